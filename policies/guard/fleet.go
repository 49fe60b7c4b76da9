package guard

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// Report is what one worker tells the fleet's guard about the requests
// and outcomes it saw since its previous report. Instants are the
// worker's; reports are applied once each, by worker and sequence number.
type Report struct {
	Worker   string         `json:"worker"`
	Seq      int64          `json:"seq"`
	Budget   []BudgetCount  `json:"budget,omitempty"`
	Outcomes []ModelOutcome `json:"outcomes,omitempty"`
	Holds    []HoldEvent    `json:"holds,omitempty"`
	// FirstTokens are the times to first token the worker measured, by
	// model, oldest first.
	FirstTokens map[string][]time.Duration `json:"first_tokens,omitempty"`
	// Waiting is every call waiting in the worker's budgets' lines at
	// WaitingAt (all of them, not a change since the last report); a
	// zero WaitingAt says nothing of them.
	Waiting   []WaitingCall `json:"waiting,omitempty"`
	WaitingAt time.Time     `json:"waiting_at,omitempty"`
}

// Empty reports whether r carries nothing.
func (r Report) Empty() bool {
	return len(r.Budget) == 0 && len(r.Outcomes) == 0 && len(r.Holds) == 0 && len(r.FirstTokens) == 0 && r.WaitingAt.IsZero()
}

// WaitingCall is a call in a budget's line: on Endpoint's budget, first
// refused at Since.
type WaitingCall struct {
	Endpoint string    `json:"endpoint"`
	Since    time.Time `json:"since"`
}

// waitingCalls is one worker's calls in line as its last report had them.
type waitingCalls struct {
	at    time.Time
	calls []WaitingCall
}

// BudgetCount is the calls' first requests and the retries charged to one
// endpoint's budget in the second that starts At.
type BudgetCount struct {
	Endpoint string    `json:"endpoint"`
	At       time.Time `json:"at"`
	Requests int       `json:"requests,omitempty"`
	Retries  int       `json:"retries,omitempty"`
}

// ModelOutcome is the outcome of one attempt on Model at At, as a breaker
// judges it (Class empty: success; Trip: the class trips the breaker).
type ModelOutcome struct {
	Model string        `json:"model"`
	At    time.Time     `json:"at"`
	Class failure.Class `json:"class,omitempty"`
	Trip  bool          `json:"trip,omitempty"`
	// Ignored: the worker's breaker did not count it (it was open, or
	// half-open and the result was not a trial's: a late result of a call
	// from before it opened); the fleet's breaker does not count it
	// either.
	Ignored bool `json:"ignored,omitempty"`
}

// HoldEvent is a rate limit that held Scope from At for For.
type HoldEvent struct {
	Scope string        `json:"scope"`
	At    time.Time     `json:"at"`
	For   time.Duration `json:"for"`
}

// View is what the fleet's guard knows at one instant: each endpoint's
// budget window, the models whose breaker the fleet's outcomes opened and
// what else the fleet's breakers know, the scopes held, and the last
// report applied per worker (so a worker knows which of its counts the
// view includes).
type View struct {
	At      time.Time                 `json:"at"`
	Budgets map[string]BudgetSnapshot `json:"budgets,omitempty"`
	// Open maps a model to the end of its open period.
	Open map[string]time.Time `json:"open,omitempty"`
	// Breakers holds, for the models whose fleet breaker has grown its
	// period, is half-open or was closed by its trials, what a worker's
	// breaker takes from it.
	Breakers map[string]BreakerView `json:"breakers,omitempty"`
	// Holds maps a scope to the end of its hold.
	Holds map[string]time.Time `json:"holds,omitempty"`
	Acks  map[string]int64     `json:"acks,omitempty"`
	// FirstTokens is each model's p90 time to first token over the
	// fleet's recent attempts.
	FirstTokens map[string]FirstTokenP90 `json:"first_tokens,omitempty"`
	// Waiting is, by worker, the calls in its budgets' lines as of its
	// last report, when that is at most waiterLive old: a worker serves
	// its own line in turn after the calls other workers' lines held
	// before them (RetryBudget.TryRetryInTurn).
	Waiting map[string][]WaitingCall `json:"waiting,omitempty"`
}

// BreakerView is what a fleet's view says of one model's breaker beyond
// whether it is open.
type BreakerView struct {
	// Period is the open period the fleet's breaker grew to (failed
	// trials), when above the policy's open_for: a worker's breaker opens
	// at least that long.
	Period time.Duration `json:"period,omitempty"`
	// Share is, half-open, the share of calls the fleet's trials have
	// earned: a worker's half-open breaker lets that share through when
	// larger than its own.
	Share float64 `json:"share,omitempty"`
	// Closed is the last instant the fleet's trials closed the breaker: a
	// worker's breaker whose trials began before then closes too.
	Closed time.Time `json:"closed,omitempty"`
}

// Fleet is the guard state of every worker of a deployment, built from
// their reports: one retry budget per endpoint, whose floor is counted
// once for the fleet; breakers that judge the outcomes all workers saw;
// the rate-limit holds. It is deterministic in its inputs (no clock of its
// own), so it can live in a workflow. A fleet breaker is a Breaker whose
// every reported outcome is a call it let through: it opens on the
// fleet's failures; half-open, it judges the outcomes the workers' breakers
// counted (their trials, and the calls of workers whose breaker is closed)
// and ramps its share, reopens with a grown period or closes, and the
// workers' breakers follow it through the View. Safe for concurrent use.
type Fleet struct {
	budgetCfg  config.BudgetConfig
	breakerCfg config.BreakerConfig

	mu       sync.Mutex
	budgets  *Budgets
	breakers map[string]*Breaker
	holds    *Holds
	ttft     *FirstTokens
	acks     map[string]int64
	seen     map[string]time.Time // the latest instant in each worker's reports
	waiting  map[string]waitingCalls
}

// ackKeep is how long a worker's last report number is kept after its
// last report: a worker gone that long (restarted under a new name) is
// forgotten.
const ackKeep = 10 * time.Minute

// NewFleet returns an empty fleet state with the policy's budget and
// breaker settings.
func NewFleet(budget config.BudgetConfig, breaker config.BreakerConfig) *Fleet {
	return &Fleet{
		budgetCfg: budget, breakerCfg: breaker,
		budgets: NewBudgets(budget), breakers: map[string]*Breaker{}, holds: NewHolds(), ttft: NewFirstTokens(), acks: map[string]int64{}, seen: map[string]time.Time{},
	}
}

// Apply adds a report; one already applied (its Seq not above the
// worker's last) is ignored, and Apply reports false.
func (f *Fleet) Apply(r Report) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Seq <= f.acks[r.Worker] {
		return false
	}
	f.acks[r.Worker] = r.Seq
	seen := f.seen[r.Worker]
	for _, c := range r.Budget {
		f.budgets.For(c.Endpoint).add(c.At, c.Requests, c.Retries)
		seen = later(seen, c.At)
	}
	for _, h := range r.Holds {
		seen = later(seen, h.At)
	}
	for _, o := range r.Outcomes {
		seen = later(seen, o.At)
		b := f.breaker(o.Model)
		switch {
		case o.Trip:
			b.Trip(o.At)
		case o.Ignored:
		case o.Class == failure.None || o.Class.CountsForBreaker():
			b.judge(o.At, o.Class)
		}
	}
	f.seen[r.Worker] = seen
	if w := f.waiting[r.Worker]; !r.WaitingAt.IsZero() && r.WaitingAt.After(w.at) {
		if f.waiting == nil {
			f.waiting = map[string]waitingCalls{}
		}
		f.waiting[r.Worker] = waitingCalls{at: r.WaitingAt, calls: r.Waiting}
	}
	for m, ds := range r.FirstTokens {
		f.ttft.Add(m, ds...) // each model's list on its own: the order of models does not matter
	}
	for _, h := range r.Holds {
		f.holds.Hold(h.Scope, h.At, h.For)
	}
	return true
}

// breaker returns the fleet breaker of model, creating it closed.
func (f *Fleet) breaker(model string) *Breaker {
	b := f.breakers[model]
	if b == nil {
		b = NewBreaker(f.breakerCfg)
		f.breakers[model] = b
	}
	return b
}

// judge records a reported outcome in a fleet breaker at now: a worker let
// the call through, so half-open it is a trial.
func (b *Breaker) judge(now time.Time, class failure.Class) {
	b.mu.Lock()
	b.tick(now)
	if b.state == BreakerHalfOpen {
		b.admitted++
	}
	b.mu.Unlock()
	b.outcome(now, class)
}

// peek is the breaker at now as a query sees it, changing nothing: its
// state, the end of its open period, and its view.
func (b *Breaker) peek(now time.Time) (BreakerState, time.Time, BreakerView) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, period, successes := b.state, b.period, b.successes
	switch {
	case st == BreakerOpen && !now.Before(b.openUntil):
		st, successes = BreakerHalfOpen, 0
	case st == BreakerClosed:
		period, _ = b.healed(now)
	}
	var v BreakerView
	if period > b.cfg.OpenFor.D() {
		v.Period = period
	}
	if st == BreakerHalfOpen {
		v.Share = trialShare(b.cfg.ProbeFraction, successes)
	}
	if st == BreakerClosed {
		v.Closed = b.closedAt
	}
	return st, b.openUntil, v
}

// BreakerMemo is one fleet breaker in a FleetState: what it needs to go
// on judging as it did (a closed breaker's last outcomes are not kept).
type BreakerMemo struct {
	Model string `json:"model"`
	// State is closed, open or half_open.
	State string `json:"state"`
	// Until is, open, the end of its open period; half-open, when its
	// trials began.
	Until  time.Time     `json:"until,omitzero"`
	Period time.Duration `json:"period"`
	// HealFrom is, closed, the start of the healthy stretch its period
	// heals over.
	HealFrom time.Time `json:"heal_from,omitzero"`
	// Results and Successes are, half-open, its trials' results.
	Results   int       `json:"results,omitempty"`
	Successes int       `json:"successes,omitempty"`
	Closed    time.Time `json:"closed,omitzero"`
	// Since is, open or half-open, when it opened from closed (a state
	// without it lets the period double as before).
	Since time.Time `json:"since,omitzero"`
}

// memo returns b as a BreakerMemo of model at now; false when it is as
// new (closed, at its first period, never closed by trials within
// ackKeep), which needs no memo.
func (b *Breaker) memo(model string, now time.Time) (BreakerMemo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := BreakerMemo{Model: model, State: b.state.String(), Until: b.openUntil, Period: b.period,
		HealFrom: b.healFrom, Results: b.results, Successes: b.successes, Closed: b.closedAt, Since: b.since}
	if b.state == BreakerClosed {
		m.Period, m.HealFrom = b.healed(now)
		m.Until, m.Results, m.Successes, m.Since = time.Time{}, 0, 0, time.Time{}
		if m.Period <= b.cfg.OpenFor.D() {
			m.HealFrom = time.Time{}
			if b.closedAt.IsZero() || now.Sub(b.closedAt) >= ackKeep {
				return m, false
			}
		}
	}
	return m, true
}

// restore loads m into a new breaker.
func (b *Breaker) restore(m BreakerMemo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.openUntil, b.period, b.healFrom, b.closedAt, b.since = parseBreakerState(m.State), m.Until, m.Period, m.HealFrom, m.Closed, m.Since
	b.results, b.successes, b.admitted = m.Results, m.Successes, m.Results
	if b.period <= 0 {
		b.period = b.cfg.OpenFor.D()
	}
}

// Latest is the latest instant of any report applied (zero before one).
func (f *Fleet) Latest() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var t time.Time
	for _, s := range f.seen {
		t = later(t, s)
	}
	return t
}

// View returns the fleet's state at now.
func (f *Fleet) View(now time.Time) View {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := View{At: now, Budgets: map[string]BudgetSnapshot{}, Open: map[string]time.Time{}, Holds: map[string]time.Time{}, Acks: map[string]int64{}}
	for _, ep := range f.budgets.Endpoints() {
		v.Budgets[ep] = f.budgets.For(ep).peek(now)
	}
	for m, b := range f.breakers {
		st, until, bv := b.peek(now)
		if st == BreakerOpen {
			v.Open[m] = until
		}
		if bv != (BreakerView{}) {
			if v.Breakers == nil {
				v.Breakers = map[string]BreakerView{}
			}
			v.Breakers[m] = bv
		}
	}
	for _, sc := range f.holds.Scopes() {
		if left := f.holds.Left(sc, now); left > 0 {
			v.Holds[sc] = now.Add(left)
		}
	}
	for w, s := range f.acks {
		v.Acks[w] = s
	}
	for w, l := range f.waiting {
		if len(l.calls) > 0 && now.Sub(l.at) <= waiterLive {
			if v.Waiting == nil {
				v.Waiting = map[string][]WaitingCall{}
			}
			v.Waiting[w] = slices.Clone(l.calls)
		}
	}
	v.FirstTokens = f.ttft.summary()
	return v
}

// FleetState is a Fleet in a few bytes, carried across a guard workflow's
// continue-as-new: the budget windows by bucket, the breakers that are not
// as new, the holds and the last report of each worker.
type FleetState struct {
	Budget []BudgetCount `json:"budget,omitempty"`
	// Open are the open breakers as trips at the instant they opened: all
	// that a state from a build before Breakers carries, and what such a
	// build reads of this one's (Restore takes Breakers over Open).
	Open []ModelOutcome `json:"open,omitempty"`
	// Breakers are the breakers that are open, half-open, have a grown
	// period or were closed by their trials lately, sorted by model.
	Breakers []BreakerMemo    `json:"breakers,omitempty"`
	Holds    []HoldEvent      `json:"holds,omitempty"`
	Acks     map[string]int64 `json:"acks,omitempty"`
	// Seen is the latest instant of each acknowledged worker's reports.
	Seen map[string]time.Time `json:"seen,omitempty"`
	// FirstTokens are each model's recent times to first token.
	FirstTokens map[string][]time.Duration `json:"first_tokens,omitempty"`
}

// State returns the fleet's state at now.
func (f *Fleet) State(now time.Time) FleetState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := FleetState{Acks: map[string]int64{}, Seen: map[string]time.Time{}, FirstTokens: f.ttft.samples()}
	for w, s := range f.acks {
		if now.Sub(f.seen[w]) < ackKeep {
			st.Acks[w], st.Seen[w] = s, f.seen[w]
		}
	}
	for _, ep := range f.budgets.Endpoints() {
		b := f.budgets.For(ep)
		b.mu.Lock()
		for _, c := range b.ring.counts(now) {
			c.Endpoint = ep
			st.Budget = append(st.Budget, c)
		}
		b.mu.Unlock()
	}
	for _, m := range slices.Sorted(maps.Keys(f.breakers)) {
		b := f.breakers[m]
		if until, open := b.OpenUntil(now); open {
			st.Open = append(st.Open, ModelOutcome{Model: m, At: until.Add(-f.breakerCfg.OpenFor.D()), Trip: true})
		}
		if memo, ok := b.memo(m, now); ok {
			st.Breakers = append(st.Breakers, memo)
		}
	}
	for _, sc := range f.holds.Scopes() {
		if left := f.holds.Left(sc, now); left > 0 {
			st.Holds = append(st.Holds, HoldEvent{Scope: sc, At: now, For: left})
		}
	}
	return st
}

// Restore loads a state from State into an empty fleet.
func (f *Fleet) Restore(st FleetState) {
	f.mu.Lock()
	for w, s := range st.Acks {
		f.acks[w], f.seen[w] = s, st.Seen[w]
	}
	memos := map[string]bool{}
	for _, m := range st.Breakers {
		f.breaker(m.Model).restore(m)
		memos[m.Model] = true
	}
	f.mu.Unlock()
	var open []ModelOutcome // a state from before Breakers
	for _, o := range st.Open {
		if !memos[o.Model] {
			open = append(open, o)
		}
	}
	f.Apply(Report{Worker: "\x00restore", Seq: 1, Budget: st.Budget, Outcomes: open, Holds: st.Holds, FirstTokens: st.FirstTokens})
	f.mu.Lock()
	delete(f.acks, "\x00restore")
	delete(f.seen, "\x00restore")
	f.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
