package guard

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// BreakerState is the state of a circuit breaker.
type BreakerState int

// The breaker states.
const (
	// BreakerClosed lets every call through and watches the outcomes.
	BreakerClosed BreakerState = iota
	// BreakerOpen refuses every call until its open period has passed.
	BreakerOpen
	// BreakerHalfOpen lets a few calls at a time through as trials and
	// decides from their outcomes whether to close or reopen.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half_open" (the form used in metrics
// labels and reasons).
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// parseBreakerState is the inverse of String; anything else is closed.
func parseBreakerState(s string) BreakerState {
	switch s {
	case "open":
		return BreakerOpen
	case "half_open":
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// checkBreaker refuses the model-breaker settings config.Validate refuses.
// Several would break the breaker: a Window of 0 calls leaves no ring to
// record in, a MinCalls above Window never lets the rate apply.
func checkBreaker(cfg config.BreakerConfig) error {
	switch {
	case cfg.ConsecutiveFailures <= 0:
		return fmt.Errorf("breaker.consecutive_failures must be a positive number of failures, got %d", cfg.ConsecutiveFailures)
	case !isFraction(cfg.FailureRate):
		return fmt.Errorf("breaker.failure_rate must be a fraction in (0,1], got %v", cfg.FailureRate)
	case cfg.Window <= 0:
		return fmt.Errorf("breaker.window must be a positive number of calls, got %d", cfg.Window)
	case cfg.MinCalls <= 0 || cfg.MinCalls > cfg.Window:
		return fmt.Errorf("breaker.min_calls must be a number of calls in [1, breaker.window (%d)], got %d", cfg.Window, cfg.MinCalls)
	case cfg.OpenFor <= 0:
		return fmt.Errorf("breaker.open_for must be a positive duration, got %s", cfg.OpenFor)
	case cfg.OpenForMax != 0 && cfg.OpenForMax < cfg.OpenFor:
		return fmt.Errorf("breaker.open_for_max must be 0 or at least breaker.open_for (%s), got %s", cfg.OpenFor, cfg.OpenForMax)
	case cfg.HealAfter < 0:
		return fmt.Errorf("breaker.heal_after must be a duration ≥ 0, got %s", cfg.HealAfter)
	case !isFraction(cfg.CloseThreshold):
		return fmt.Errorf("breaker.close_threshold must be a fraction in (0,1], got %v", cfg.CloseThreshold)
	case cfg.Probes <= 0:
		return fmt.Errorf("breaker.probes must be a positive number of probes, got %d", cfg.Probes)
	}
	return nil
}

// checkClassBreaker refuses the per-class breaker settings config.Validate
// refuses.
func checkClassBreaker(cfg config.BreakerConfig) error {
	switch {
	case !isFraction(cfg.ClassFailureRate):
		return fmt.Errorf("breaker.class_failure_rate must be a fraction in (0,1], got %v", cfg.ClassFailureRate)
	case cfg.ClassWindow <= 0:
		return fmt.Errorf("breaker.class_window must be a positive duration, got %s", cfg.ClassWindow)
	case cfg.ClassMinRetries <= 0:
		return fmt.Errorf("breaker.class_min_retries must be a positive number of retries, got %d", cfg.ClassMinRetries)
	}
	return nil
}

// isFraction reports whether f is in (0,1] (NaN is not).
func isFraction(f float64) bool { return f > 0 && f <= 1 }

// Breaker is the circuit breaker of one model in one process (docs/how-it-works.md "Failure classes").
//
// Closed, it opens after ConsecutiveFailures failures in a row, or when
// more than FailureRate of the last Window calls failed (once MinCalls
// calls were seen). Open, it refuses every call for its open period.
// Half-open, it lets a call through as a trial while fewer than Probes
// trials are out, closes once Probes trial results are in and at least
// CloseThreshold of them succeeded, and reopens as soon as the trials can
// no longer reach CloseThreshold. "Breaker" in the package documentation
// says how the open period grows and heals, and which results count.
//
// State changes happen when a method is called with an instant past the
// deadline (there is no timer), and are reported to the registry's hook.
// A Breaker is safe for concurrent use.
type Breaker struct {
	mu  sync.Mutex
	cfg config.BreakerConfig // as given, checked by NewBreaker

	state BreakerState
	// openUntil is the end of the open period; half-open, the instant
	// the trials began.
	openUntil time.Time
	// period is how long the next opening lasts.
	period time.Duration
	// healFrom is, closed with a grown period, the start of the healthy
	// stretch HealAfter is counted from.
	healFrom time.Time
	// closedAt is the last instant trials closed it.
	closedAt time.Time
	// since is when it last opened from closed: the start of the outage
	// as this breaker saw it, which bounds how far the period grows.
	since time.Time

	// Closed: consecutive failures and a ring of the last outcomes.
	consecutive int
	outcomes    []bool // true: failure
	next        int
	calls       int
	failures    int

	// Half-open: trials let through, their results, their successes, and
	// when the last was let through.
	admitted  int
	results   int
	successes int
	trialAt   time.Time

	onChange func(from, to BreakerState, now time.Time)
	// adopting: the change under way is the fleet's (overlay), not news
	// of this breaker's own.
	adopting bool
}

// NewBreaker returns a closed breaker with cfg's model-breaker settings,
// taken as given (the Class… fields are not read). Build cfg with
// config.DefaultConfig or config.LoadConfig, which validate it. NewBreaker
// panics when a setting it reads is one config.Validate refuses: a count or
// OpenFor that is not positive, an OpenForMax below OpenFor (other than
// 0), a negative HealAfter, a fraction outside (0,1], or MinCalls above
// Window.
func NewBreaker(cfg config.BreakerConfig) *Breaker {
	if err := checkBreaker(cfg); err != nil {
		panic(fmt.Sprintf("guard.NewBreaker: %v", err))
	}
	return &Breaker{cfg: cfg, outcomes: make([]bool, cfg.Window), period: cfg.OpenFor.D()}
}

// State returns the breaker's state at now.
func (b *Breaker) State(now time.Time) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.state
}

// Allow decides whether one call may go to the model at now: always when
// closed, never when open, and when half-open while fewer trials than
// allowed are out, in which case the call is a trial. Call it once per
// attempt and Record the outcome of every allowed call.
func (b *Breaker) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.permit(now, false) && b.admit(now)
}

// Permit is Allow without taking a trial: it tells the worker that plans
// an attempt whether to plan it here; Admit then takes the trial where the
// attempt runs, which also records its outcome.
func (b *Breaker) Permit(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.permit(now, false)
}

// permit decides whether a half-open breaker lets one more trial through
// at now: while fewer than Probes trials are out, and until a trial has
// succeeded here or in the fleet (fleetSucceeded), one at a time, so an
// upstream still down costs one request per opening, not one per call
// waiting for it. A trial out for longer than the open period counts as
// lost.
func (b *Breaker) permit(now time.Time, fleetSucceeded bool) bool {
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		limit := b.cfg.Probes
		if b.successes == 0 && !fleetSucceeded {
			limit = 1
		}
		return b.admitted-b.results < limit || now.Sub(b.trialAt) >= b.period
	}
	return false
}

// Admit lets an attempt that was permitted through at now: always when
// closed (and when half-open, as a trial), never when open.
func (b *Breaker) Admit(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.admit(now)
}

func (b *Breaker) admit(now time.Time) bool {
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		b.admitted++
		b.trialAt = now
		return true
	}
	return false
}

// Record records the outcome of a call at now.
func (b *Breaker) Record(now time.Time, success bool) {
	b.record(now, success)
}

// record records the outcome of a call at now and reports whether it
// counted: false while open and for a half-open result beyond the trials
// let through.
func (b *Breaker) record(now time.Time, success bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	switch b.state {
	case BreakerClosed:
		b.recordClosed(now, success)
		return true
	case BreakerHalfOpen:
		return b.recordTrial(now, success)
	}
	return false
}

// RecordOutcome records the outcome of a call by its failure class: the
// empty class is a success, classes whose CountsForBreaker is true are
// failures, and every other class (a client mistake such as
// invalid_request, or our own breaker_open, worker_lost) is ignored.
// It does not trip the breaker for auth; the decision activity calls Trip for that.
func (b *Breaker) RecordOutcome(now time.Time, class failure.Class) {
	b.outcome(now, class)
}

// outcome is RecordOutcome; it reports whether the outcome counted.
func (b *Breaker) outcome(now time.Time, class failure.Class) bool {
	switch {
	case class == failure.None:
		return b.record(now, true)
	case class.CountsForBreaker():
		return b.record(now, false)
	}
	return false
}

// Trip opens the breaker at once for its open period from now, whatever
// its state (an auth failure: the model's key is refused). Tripping an
// open breaker extends its open period; tripping a half-open one is a
// failed trial (the period doubles).
func (b *Breaker) Trip(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	if b.state == BreakerHalfOpen {
		b.reopen(now)
		return
	}
	b.open(now)
}

// OpenUntil reports whether the breaker is open at now and until when. It
// changes nothing (a query may call it).
func (b *Breaker) OpenUntil(now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openUntil, b.state == BreakerOpen && now.Before(b.openUntil)
}

// tick moves an open breaker to half-open once its period has passed, and
// lets a closed one's grown period heal.
func (b *Breaker) tick(now time.Time) {
	switch b.state {
	case BreakerOpen:
		if !now.Before(b.openUntil) {
			b.admitted, b.results, b.successes = 0, 0, 0
			b.set(BreakerHalfOpen, now)
		}
	case BreakerClosed:
		b.period, b.healFrom = b.healed(now)
	}
}

// healed is the open period and the start of its healthy stretch at now,
// closed: halved for every HealAfter since healFrom, down to OpenFor.
func (b *Breaker) healed(now time.Time) (time.Duration, time.Time) {
	p, from := b.period, b.healFrom
	first, heal := b.cfg.OpenFor.D(), b.cfg.HealAfter.D()
	for p > first && heal > 0 && now.Sub(from) >= heal {
		p, from = max(p/2, first), from.Add(heal)
	}
	return p, from
}

func (b *Breaker) recordClosed(now time.Time, success bool) {
	failure := !success
	if b.calls == len(b.outcomes) {
		if b.outcomes[b.next] {
			b.failures--
		}
	} else {
		b.calls++
	}
	b.outcomes[b.next] = failure
	b.next = (b.next + 1) % len(b.outcomes)
	if failure {
		b.failures++
		b.consecutive++
	} else {
		b.consecutive = 0
	}
	// Only a failure can trip the breaker.
	if failure && (b.consecutive >= b.cfg.ConsecutiveFailures ||
		b.calls >= b.cfg.MinCalls && float64(b.failures) > b.cfg.FailureRate*float64(b.calls)) {
		b.open(now)
	}
}

// recordTrial judges a half-open result; false when it is not a trial's.
func (b *Breaker) recordTrial(now time.Time, success bool) bool {
	if b.results >= b.admitted {
		return false // not a trial: a late result from before
	}
	b.results++
	if success {
		b.successes++
	}
	// The lone first trial failing reopens at once (the upstream is still
	// down); after a success, reopen as soon as even all-successful
	// further trials could not reach the threshold over at least Probes
	// results; close when Probes results are in.
	n := max(b.results, b.cfg.Probes)
	best := b.successes + n - b.results
	switch {
	case b.successes == 0 && !success,
		float64(best) < b.cfg.CloseThreshold*float64(n)-1e-9:
		b.reopen(now)
	case b.results >= b.cfg.Probes:
		b.close(now)
	}
	return true
}

// overlay lays the fleet's view of this breaker over it at now: the
// fleet's open period is adopted (unless this one is open at least as
// long), with the period it grew to; a close the fleet's trials decided
// closes this breaker if its trials began before it.
func (b *Breaker) overlay(fb fleetBreaker, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	b.adopting = true
	defer func() { b.adopting = false }()
	b.period = max(b.period, fb.Period)
	switch {
	case fb.open:
		if b.state == BreakerOpen && !b.openUntil.Before(fb.until) {
			return
		}
		if b.state == BreakerClosed {
			b.since = now // its outage begins here as far as this breaker knows
		}
		b.resetClosed()
		b.openUntil = fb.until
		b.set(BreakerOpen, now)
	case b.state == BreakerHalfOpen && !fb.Closed.IsZero() && !fb.Closed.Before(b.openUntil):
		b.close(now)
	}
}

// reopen opens the breaker after failed trials, for twice the period
// before, but at most half the time since it opened from closed (and
// OpenForMax; never longer when that is 0): the upstream is then never
// left untried for more than a third of an outage's length, so a model that
// comes back is seen soon after, while one that stays down is tried
// geometrically less often.
func (b *Breaker) reopen(now time.Time) {
	if top := b.cfg.OpenForMax.D(); top > b.period {
		grown := min(2*b.period, top)
		if !b.since.IsZero() {
			grown = min(grown, now.Sub(b.since)/2)
		}
		b.period = max(b.period, grown)
	}
	b.open(now)
}

func (b *Breaker) open(now time.Time) {
	if b.state == BreakerClosed {
		b.since = now
	}
	b.openUntil = now.Add(b.period)
	b.resetClosed()
	b.set(BreakerOpen, now)
}

// close closes the breaker after good trials: the period is halved (the
// upstream came back sooner than it had grown to expect, so a flapping one
// does not ratchet it up across its short healthy spells) and heals on
// from now.
func (b *Breaker) close(now time.Time) {
	b.resetClosed()
	b.closedAt, b.healFrom = now, now
	b.period = max(b.period/2, b.cfg.OpenFor.D())
	if b.cfg.HealAfter == 0 {
		b.period = b.cfg.OpenFor.D()
	}
	b.set(BreakerClosed, now)
}

func (b *Breaker) resetClosed() {
	clear(b.outcomes)
	b.next, b.calls, b.failures, b.consecutive = 0, 0, 0, 0
}

func (b *Breaker) set(to BreakerState, now time.Time) {
	from := b.state
	b.state = to
	if from != to && b.onChange != nil {
		b.onChange(from, to, now)
	}
}

// StateChangeHook is called on every breaker state change with the model,
// the old and new state and the instant of the call that observed it. It
// runs while that breaker's lock is held, so changes of one model are
// reported in order; it must be quick and must not call back into the
// registry (that would deadlock).
type StateChangeHook func(model string, from, to BreakerState, now time.Time)

// BreakerRegistry holds one Breaker per model, created on first use, all
// with the same settings. It is the per-process breaker set the activities
// share.
//
// A BreakerRegistry is safe for concurrent use.
type BreakerRegistry struct {
	cfg      config.BreakerConfig
	onChange StateChangeHook

	mu       sync.RWMutex
	breakers map[string]*Breaker
	sync     *Sync
}

// SetSync joins the registry to its fleet: outcomes are reported (as
// many per model as its breakers read, see Sync), and the fleet's view of
// a breaker is laid over the local one.
func (r *BreakerRegistry) SetSync(s *Sync) {
	if s != nil {
		s.setBreaker(r.cfg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sync = s
}

func (r *BreakerRegistry) fleet() *Sync {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sync
}

// overlay lays the fleet's view of model's breaker at now over the local
// one: while the fleet has it open, the local breaker takes the fleet's
// open period (so that it half-opens and tries when the fleet's ends
// instead of letting everything through) and the period it grew to; a
// close the fleet's trials decided closes a local half-open. It returns
// whether the fleet has it open, and whether, half-open, a trial has
// succeeded somewhere in the fleet (a local half-open then lets Probes
// trials out at once, not one).
func (r *BreakerRegistry) overlay(model string, now time.Time) (open, succeeded bool) {
	s := r.fleet()
	if s == nil {
		return false, false
	}
	fb, ok := s.fleetBreaker(model, now)
	if !ok {
		return false, false
	}
	var b *Breaker
	if fb.open {
		b = r.Breaker(model)
	} else {
		b = r.existing(model)
	}
	if b != nil {
		b.overlay(fb, now)
	}
	return fb.open, fb.Succeeded > 0
}

// NewBreakerRegistry returns an empty registry whose breakers use cfg,
// taken as given. onStateChange may be nil. Like NewBreaker, it panics
// when cfg's model-breaker settings are ones config.Validate refuses (here,
// not at a model's first call).
func NewBreakerRegistry(cfg config.BreakerConfig, onStateChange StateChangeHook) *BreakerRegistry {
	if err := checkBreaker(cfg); err != nil {
		panic(fmt.Sprintf("guard.NewBreakerRegistry: %v", err))
	}
	return &BreakerRegistry{cfg: cfg, onChange: onStateChange, breakers: make(map[string]*Breaker)}
}

// Breaker returns the breaker of model, creating it (closed) on first use.
func (r *BreakerRegistry) Breaker(model string) *Breaker {
	if b := r.existing(model); b != nil {
		return b
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.breakers[model]; ok {
		return b
	}
	b := NewBreaker(r.cfg)
	hook := r.onChange
	b.onChange = func(from, to BreakerState, now time.Time) {
		if hook != nil {
			hook(model, from, to, now)
		}
		if s := r.fleet(); s != nil && !b.adopting && to != BreakerHalfOpen {
			s.changed(model, to == BreakerOpen, now) // it opened or closed on this worker's outcomes
		}
	}
	r.breakers[model] = b
	return b
}

// existing returns model's breaker, nil when it has none yet.
func (r *BreakerRegistry) existing(model string) *Breaker {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.breakers[model]
}

// State returns the state of model's breaker at now; a model never seen is
// closed (and no breaker is created for it).
func (r *BreakerRegistry) State(model string, now time.Time) BreakerState {
	if open, _ := r.overlay(model, now); open {
		return BreakerOpen
	}
	b := r.existing(model)
	if b == nil {
		return BreakerClosed
	}
	return b.State(now)
}

// Allow is Breaker.Allow for model; false while the fleet has it open.
func (r *BreakerRegistry) Allow(model string, now time.Time) bool {
	open, succeeded := r.overlay(model, now)
	if open {
		return false
	}
	b := r.Breaker(model)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.permit(now, succeeded) && b.admit(now)
}

// Permit is Breaker.Permit for model; false while the fleet has it open.
func (r *BreakerRegistry) Permit(model string, now time.Time) bool {
	open, succeeded := r.overlay(model, now)
	if open {
		return false
	}
	b := r.existing(model)
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.permit(now, succeeded)
}

// Admit is Breaker.Admit for model; false while the fleet has it open.
func (r *BreakerRegistry) Admit(model string, now time.Time) bool {
	if open, _ := r.overlay(model, now); open {
		return false
	}
	return r.Breaker(model).Admit(now)
}

// Record is Breaker.Record for model.
func (r *BreakerRegistry) Record(model string, now time.Time, success bool) {
	counted := r.Breaker(model).record(now, success)
	if s := r.fleet(); s != nil {
		class := failure.ServerError
		if success {
			class = failure.None
		}
		s.outcome(model, now, class, false, !counted)
	}
}

// RecordOutcome is Breaker.RecordOutcome for model.
func (r *BreakerRegistry) RecordOutcome(model string, now time.Time, class failure.Class) {
	if class != failure.None && !class.CountsForBreaker() {
		return // creates no breaker for a class it would ignore
	}
	counted := r.Breaker(model).outcome(now, class)
	if s := r.fleet(); s != nil {
		s.outcome(model, now, class, false, !counted)
	}
}

// Trip is Breaker.Trip for model.
func (r *BreakerRegistry) Trip(model string, now time.Time) {
	r.Breaker(model).Trip(now)
	if s := r.fleet(); s != nil {
		s.outcome(model, now, failure.None, true, false)
	}
}

// Models returns the models that have a breaker, sorted.
func (r *BreakerRegistry) Models() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	models := make([]string, 0, len(r.breakers))
	for m := range r.breakers {
		models = append(models, m)
	}
	sort.Strings(models)
	return models
}

// Snapshot returns the state at now of every breaker created so far.
func (r *BreakerRegistry) Snapshot(now time.Time) map[string]BreakerState {
	r.mu.RLock()
	breakers := make(map[string]*Breaker, len(r.breakers))
	for m, b := range r.breakers {
		breakers[m] = b
	}
	r.mu.RUnlock()
	out := make(map[string]BreakerState, len(breakers))
	for m, b := range breakers {
		out[m] = b.State(now)
	}
	return out
}

// ClassBreaker is the per-class breaker (docs/how-it-works.md "Failure classes": a class
// whose retries keep failing stops retrying and degrades). It counts the outcomes of retries by the failure class that
// caused them over a sliding ClassWindow; when at least ClassMinRetries
// retries of a class were seen and more than ClassFailureRate of them
// failed, Allow refuses that class until enough old failures slide out of
// the window. It is process-wide, like the budget, not per model.
//
// A ClassBreaker is safe for concurrent use.
type ClassBreaker struct {
	rate       float64
	minRetries int
	window     time.Duration

	mu      sync.Mutex
	classes map[failure.Class]*windowRing // a: retries, b: failed retries
}

// ClassStats are the counts of one class in a ClassBreaker's window.
type ClassStats struct {
	Retries  int
	Failures int
	// Open is true when the class may not retry.
	Open bool
}

// NewClassBreaker returns a class breaker with cfg's ClassFailureRate,
// ClassWindow and ClassMinRetries, taken as given (the model-breaker fields
// are not read). Build cfg with config.DefaultConfig or config.LoadConfig,
// which validate it. NewClassBreaker panics when one of them is a value
// config.Validate refuses: a rate outside (0,1], a ClassWindow or
// ClassMinRetries that is not positive.
func NewClassBreaker(cfg config.BreakerConfig) *ClassBreaker {
	if err := checkClassBreaker(cfg); err != nil {
		panic(fmt.Sprintf("guard.NewClassBreaker: %v", err))
	}
	return &ClassBreaker{
		rate:       cfg.ClassFailureRate,
		minRetries: cfg.ClassMinRetries,
		window:     cfg.ClassWindow.D(),
		classes:    make(map[failure.Class]*windowRing),
	}
}

// Record records at now the outcome of one retry made because an attempt
// failed with class. The empty class is ignored.
func (c *ClassBreaker) Record(class failure.Class, now time.Time, success bool) {
	if class == failure.None {
		return
	}
	failed := 0
	if !success {
		failed = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.classes[class]
	if !ok {
		ring := newWindowRing(c.window)
		r = &ring
		c.classes[class] = r
	}
	r.add(now, 1, failed)
}

// Allow reports whether failures of class may still be retried at now.
func (c *ClassBreaker) Allow(class failure.Class, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.stats(class, now).Open
}

// Snapshot returns the counts at now of every class seen so far.
func (c *ClassBreaker) Snapshot(now time.Time) map[failure.Class]ClassStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[failure.Class]ClassStats, len(c.classes))
	for class := range c.classes {
		out[class] = c.stats(class, now)
	}
	return out
}

func (c *ClassBreaker) stats(class failure.Class, now time.Time) ClassStats {
	r, ok := c.classes[class]
	if !ok {
		return ClassStats{}
	}
	retries, failures := r.sum(now)
	return ClassStats{
		Retries:  retries,
		Failures: failures,
		Open:     retries >= c.minRetries && float64(failures) > c.rate*float64(retries),
	}
}
