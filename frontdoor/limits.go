package frontdoor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/durable-llm/durable-llm/policies/config"
)

// Limits are one tenant's load limits at the front door: calls it may
// ask for per minute, estimated tokens per minute, calls in flight, and
// the time the front door may spend validating its requests per minute.
// A call over any of them is answered 429 with Retry-After before
// anything starts. Requests the front door refuses after reading them
// count too (see Limiter.Enter), so a tenant's invalid requests cost it
// what they cost the front door.
//
// They are counted by each front-door process on its own: N front doors
// behind a load balancer admit up to N times these. A zero field is no
// limit; DefaultLimits holds the defaults.
type Limits struct {
	// RequestsPerMinute are the calls (POST /v1/chat/completions,
	// /v1/responses) the tenant may ask for per minute, whether they
	// start or are refused once read (invalid, too large, too slow, over
	// tokens_per_minute); those refused before their body is read (over a
	// limit) do not count. The bucket refills evenly and holds up to a
	// minute's worth, so a quiet tenant may send that many at once.
	// Default 600.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	// TokensPerMinute are the tokens the tenant's calls may ask for per
	// minute, each call estimated when it arrives as its prompt's tokens
	// (prompt.EstimateMessages, no tokenizer) plus its max_tokens (or the
	// policy's pruning.reserve_output_tokens when it sets none). A call
	// estimated above a whole minute's worth waits for a full bucket and
	// empties it. Default 1,000,000.
	TokensPerMinute int `yaml:"tokens_per_minute"`
	// MaxInFlight are the tenant's calls that may run at once. A call
	// counts from before its body is read (so reading, decoding and
	// validating it, schemas compiled and tokens estimated, run under
	// this limit) until its answer is sent, or its refusal; a call whose
	// client does not wait for it (Prefer: respond-async, or a client that
	// left) counts until the front door sees it end, and at most until
	// its deadline plus CallEndMargin. Default 64.
	MaxInFlight int `yaml:"max_in_flight"`
	// ValidationMSPerMinute are the milliseconds per minute the front
	// door may spend decoding and validating the tenant's requests
	// (schemas compiled, tokens estimated), valid or refused, measured on
	// each; the tenant's requests are validated one at a time, so they
	// never take more than one core however expensive they are (see
	// Slot.Validate). Once they are spent, the tenant's requests are
	// refused before their body is read until the bucket holds a
	// millisecond again. Most requests take well under a millisecond; a
	// tool schema at the limits of policies/structured takes about half a
	// second. Default 6,000 (a tenth of a core).
	ValidationMSPerMinute int `yaml:"validation_ms_per_minute"`
	// StoreRetention is how long the tenant's completed responses may be
	// continued and listed (stored responses, docs/responses.md): a tenant
	// may keep its responses for less than the front door's retention
	// (Options.StoreRetention, default 30 days), never for more. 0 (or not
	// given): the front door's.
	StoreRetention config.Duration `yaml:"store_retention"`
}

// DefaultLimits are the limits of a tenant that the tenants file does not
// limit otherwise.
var DefaultLimits = Limits{RequestsPerMinute: 600, TokensPerMinute: 1_000_000, MaxInFlight: 64, ValidationMSPerMinute: 6000}

// Names of the limits, as the tenants file and the 429s name them.
const (
	LimitRequests   = "requests_per_minute"
	LimitTokens     = "tokens_per_minute"
	LimitInFlight   = "max_in_flight"
	LimitValidation = "validation_ms_per_minute"
	LimitRetention  = "store_retention"
)

// InFlightRetryAfter is the Retry-After of a call refused by
// max_in_flight: when a call ends is not known in advance.
const InFlightRetryAfter = time.Second

// CallEndMargin is how long after a call's deadline a call that no
// request waits for still counts as in flight when the front door has not
// seen it end (Temporal unreachable, say).
const CallEndMargin = time.Minute

// problem says what is wrong with l, or "".
func (l Limits) problem() string {
	for _, f := range []struct {
		name string
		v    int
	}{{LimitRequests, l.RequestsPerMinute}, {LimitTokens, l.TokensPerMinute}, {LimitInFlight, l.MaxInFlight}, {LimitValidation, l.ValidationMSPerMinute}} {
		if f.v < 0 {
			return fmt.Sprintf("%s is %d; want 0 (no limit) or more", f.name, f.v)
		}
	}
	if l.StoreRetention < 0 {
		return fmt.Sprintf("%s is %s; want 0 (the front door's) or more", LimitRetention, l.StoreRetention.D())
	}
	return ""
}

// Refusal is a call refused by its tenant's limits.
type Refusal struct {
	// Tenant whose limit refused the call.
	Tenant string
	// Limit is LimitRequests, LimitTokens, LimitInFlight or
	// LimitValidation.
	Limit string
	// Max is the limit's value.
	Max int
	// RetryAfter is when the call would be admitted, if nothing else came.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("tenant %q is over its %s of %d at this front door; retry in %s",
		r.Tenant, r.Limit, r.Max, r.RetryAfter.Round(time.Millisecond))
}

// Limiter enforces every tenant's Limits: requests_per_minute,
// tokens_per_minute and validation_ms_per_minute are token buckets
// (golang.org/x/time/rate) that refill evenly and hold a minute's worth,
// full at first. Time is an argument of each decision, so tests step it
// through fixed instants. It is safe for concurrent use.
type Limiter struct {
	limits func(tenant string) Limits
	mu     sync.Mutex
	loads  map[string]*load
}

// load is one tenant's state.
type load struct {
	// The buckets, made at their first use. validation counts
	// nanoseconds; it goes below zero when a validation takes more than
	// it held.
	requests, tokens, validation *rate.Limiter
	// now is the latest instant the buckets were read at: their time
	// never runs backwards.
	now      time.Time
	inFlight int
	// turn holds a token while one of the tenant's requests is being
	// validated.
	turn chan struct{}
	// kept are the calls whose slot outlives their request, by workflow
	// ID.
	kept map[string]bool
}

// NewLimiter returns a Limiter that reads each tenant's limits from
// limits (Tenants.Limits).
func NewLimiter(limits func(tenant string) Limits) *Limiter {
	return &Limiter{limits: limits, loads: map[string]*load{}}
}

func (l *Limiter) load(tenant string) *load {
	ld := l.loads[tenant]
	if ld == nil {
		ld = &load{kept: map[string]bool{}, turn: make(chan struct{}, 1)}
		l.loads[tenant] = ld
	}
	return ld
}

// at is now, or the latest instant the tenant's buckets were read at
// when now is before it (clocks read by concurrent requests).
func (ld *load) at(now time.Time) time.Time {
	if now.Before(ld.now) {
		return ld.now
	}
	ld.now = now
	return now
}

// bucket is *b, made at its first use to refill perMinute units a minute.
func bucket(b **rate.Limiter, perMinute int) *rate.Limiter {
	if *b == nil {
		*b = rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)
	}
	return *b
}

// untilHolds is how long until b holds n at now (0: it does); it takes
// nothing.
func untilHolds(b *rate.Limiter, now time.Time, n int) time.Duration {
	r := b.ReserveN(now, n)
	defer r.CancelAt(now)
	return r.DelayFrom(now)
}

// nsPerMS is the unit of validation_ms_per_minute in its bucket.
const nsPerMS = int(time.Millisecond)

// Enter takes one request and a slot in flight from tenant's limits at
// now, before the request's body is read, or says which limit refuses a
// call of any size (its tokens bucket empty, too) and when to retry
// (the limit that frees last, when several refuse); a refused request
// takes nothing. The request stays spent whatever becomes of it: a
// request refused once read cost the front door its reading, decoding
// and validation. The slot must be released (Release) or kept (Keep).
func (l *Limiter) Enter(tenant string, now time.Time) (*Slot, *Refusal) {
	lim := l.limits(tenant)
	l.mu.Lock()
	defer l.mu.Unlock()
	ld := l.load(tenant)
	if r := ld.enter(tenant, lim, ld.at(now)); r != nil {
		return nil, r
	}
	ld.inFlight++
	return &Slot{l: l, tenant: tenant}, nil
}

// enter takes one request of tenant at now, or returns the limit that
// refuses any request (its tokens bucket holds less than one token, say)
// and takes nothing.
func (ld *load) enter(tenant string, lim Limits, now time.Time) *Refusal {
	var worst *Refusal
	refuse := func(limit string, max int, after time.Duration) {
		if worst == nil || after > worst.RetryAfter {
			worst = &Refusal{Tenant: tenant, Limit: limit, Max: max, RetryAfter: after}
		}
	}
	if lim.MaxInFlight > 0 && ld.inFlight >= lim.MaxInFlight {
		refuse(LimitInFlight, lim.MaxInFlight, InFlightRetryAfter)
	}
	var request *rate.Reservation
	if n := lim.RequestsPerMinute; n > 0 {
		request = bucket(&ld.requests, n).ReserveN(now, 1)
		if d := request.DelayFrom(now); d > 0 {
			refuse(LimitRequests, n, d)
		}
	}
	if n := lim.TokensPerMinute; n > 0 {
		if d := untilHolds(bucket(&ld.tokens, n), now, 1); d > 0 {
			refuse(LimitTokens, n, d)
		}
	}
	if r := ld.validationRefusal(tenant, lim, now); r != nil {
		refuse(r.Limit, r.Max, r.RetryAfter)
	}
	if worst != nil && request != nil {
		request.CancelAt(now)
	}
	return worst
}

// validationRefusal refuses any request of tenant while its validation
// bucket holds less than a millisecond at now.
func (ld *load) validationRefusal(tenant string, lim Limits, now time.Time) *Refusal {
	n := lim.ValidationMSPerMinute
	if n <= 0 {
		return nil
	}
	if d := untilHolds(bucket(&ld.validation, n*nsPerMS), now, nsPerMS); d > 0 {
		return &Refusal{Tenant: tenant, Limit: LimitValidation, Max: n, RetryAfter: d}
	}
	return nil
}

// Charge takes tokens (the call's estimate, known once its body is
// decoded) from the slot's tenant's tokens_per_minute at now, or says
// when they will be there. A call estimated above a whole minute's worth
// waits for a full bucket and empties it.
func (s *Slot) Charge(tokens int, now time.Time) *Refusal {
	lim := s.l.limits(s.tenant)
	n := lim.TokensPerMinute
	if n <= 0 {
		return nil
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	ld := s.l.load(s.tenant)
	now = ld.at(now)
	r := bucket(&ld.tokens, n).ReserveN(now, min(max(tokens, 1), n))
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &Refusal{Tenant: s.tenant, Limit: LimitTokens, Max: n, RetryAfter: d}
	}
	return nil
}

// Validate waits for the tenant's turn to decode and validate the slot's
// request: a tenant's requests are validated one at a time, so that
// however expensive they are (large prompts, schemas to compile) they take
// at most one of the front door's cores, and the others' requests are
// never queued behind them. It returns end, to be called when the
// validation is done: end frees the turn and charges the time from the
// turn's start (clock) to the tenant's validation_ms_per_minute. It
// refuses the request instead when the tenant's validation budget is
// spent by the time its turn comes, and returns ctx's error if ctx ends
// first (the client left).
func (s *Slot) Validate(ctx context.Context, clock func() time.Time) (end func(), ref *Refusal, err error) {
	s.l.mu.Lock()
	turn := s.l.load(s.tenant).turn
	s.l.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	lim := s.l.limits(s.tenant)
	start := clock()
	s.l.mu.Lock()
	ld := s.l.load(s.tenant)
	ref = ld.validationRefusal(s.tenant, lim, ld.at(start))
	s.l.mu.Unlock()
	if ref != nil {
		<-turn
		return nil, ref, nil
	}
	return func() {
		if n := lim.ValidationMSPerMinute; n > 0 {
			now := clock()
			s.l.mu.Lock()
			ld := s.l.load(s.tenant)
			spend(bucket(&ld.validation, n*nsPerMS), ld.at(now), int(now.Sub(start)))
			s.l.mu.Unlock()
		}
		<-turn
	}, nil, nil
}

// spend takes n from b at now, below zero if it holds less: a validation
// that took longer than the bucket holds owes the rest. (A reservation
// takes at most the bucket's size: a larger n is taken in parts.)
func spend(b *rate.Limiter, now time.Time, n int) {
	for n > 0 {
		part := min(n, b.Burst())
		b.ReserveN(now, part)
		n -= part
	}
}

// InFlight returns tenant's calls in flight.
func (l *Limiter) InFlight(tenant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ld := l.loads[tenant]; ld != nil {
		return ld.inFlight
	}
	return 0
}

// End frees the slot kept for the call id of tenant (see Slot.Keep).
func (l *Limiter) End(tenant, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ld := l.load(tenant)
	if ld.kept[id] {
		delete(ld.kept, id)
		ld.inFlight--
	}
}

// Slot is a request's place in its tenant's calls in flight.
type Slot struct {
	l      *Limiter
	tenant string
	done   bool
}

// Release frees the slot: the call's answer was sent, or the request was
// refused and no call started. Further calls of Release or Keep do nothing.
func (s *Slot) Release() {
	if s == nil {
		return
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if !s.done {
		s.done = true
		s.l.load(s.tenant).inFlight--
	}
}

// Keep keeps the slot for the call id after its request ends (the call
// runs on without a client waiting) until End(tenant, id). It reports
// whether the caller must now watch the call and call End when it ends:
// false when the tenant already keeps a slot for id (a second request
// for the same call: this slot is released) or the tenant has no
// in-flight limit (nothing to keep).
func (s *Slot) Keep(id string) bool {
	if s == nil {
		return false
	}
	lim := s.l.limits(s.tenant)
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.done {
		return false
	}
	s.done = true
	ld := s.l.load(s.tenant)
	if lim.MaxInFlight <= 0 || ld.kept[id] {
		ld.inFlight--
		return false
	}
	ld.kept[id] = true
	return true
}
