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
}

// Empty reports whether r carries nothing.
func (r Report) Empty() bool {
	return len(r.Budget) == 0 && len(r.Outcomes) == 0 && len(r.Holds) == 0 && len(r.FirstTokens) == 0
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
}

// HoldEvent is a rate limit that held Scope from At for For.
type HoldEvent struct {
	Scope string        `json:"scope"`
	At    time.Time     `json:"at"`
	For   time.Duration `json:"for"`
}

// View is what the fleet's guard knows at one instant: each endpoint's
// budget window, the models whose breaker the fleet's outcomes opened, the
// scopes held, and the last report applied per worker (so a worker knows
// which of its counts the view includes).
type View struct {
	At      time.Time                 `json:"at"`
	Budgets map[string]BudgetSnapshot `json:"budgets,omitempty"`
	// Open maps a model to the end of its open period.
	Open map[string]time.Time `json:"open,omitempty"`
	// Holds maps a scope to the end of its hold.
	Holds map[string]time.Time `json:"holds,omitempty"`
	Acks  map[string]int64     `json:"acks,omitempty"`
	// FirstTokens is each model's p90 time to first token over the
	// fleet's recent attempts.
	FirstTokens map[string]FirstTokenP90 `json:"first_tokens,omitempty"`
}

// Fleet is the guard state of every worker of a deployment, built from
// their reports: one retry budget per endpoint, whose floor is counted
// once for the fleet; breakers that open on the failures all workers saw;
// the rate-limit holds. It is deterministic in its inputs (no clock of its
// own), so it can live in a workflow. Fleet breakers only open: once
// OpenFor has passed a model's fleet breaker starts closed again, and
// probing is left to each worker's own breaker. Safe for concurrent use.
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
		b := f.breaker(o.Model, o.At)
		if o.Trip {
			b.Trip(o.At)
		} else if o.Class == failure.None || o.Class.CountsForBreaker() {
			b.RecordOutcome(o.At, o.Class)
		}
	}
	f.seen[r.Worker] = seen
	for m, ds := range r.FirstTokens {
		f.ttft.Add(m, ds...) // each model's list on its own: the order of models does not matter
	}
	for _, h := range r.Holds {
		f.holds.Hold(h.Scope, h.At, h.For)
	}
	return true
}

// breaker returns the fleet breaker of model at now, starting it closed
// again once an open period has passed.
func (f *Fleet) breaker(model string, now time.Time) *Breaker {
	b := f.breakers[model]
	if b == nil || b.State(now) == BreakerHalfOpen {
		b = NewBreaker(f.breakerCfg)
		f.breakers[model] = b
	}
	return b
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
		if until, open := b.OpenUntil(now); open {
			v.Open[m] = until
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
	v.FirstTokens = f.ttft.summary()
	return v
}

// FleetState is a Fleet in a few bytes, carried across a guard workflow's
// continue-as-new: the budget windows by bucket, the open breakers (as
// trips at the instant they opened), the holds and the last report of
// each worker.
type FleetState struct {
	Budget []BudgetCount    `json:"budget,omitempty"`
	Open   []ModelOutcome   `json:"open,omitempty"`
	Holds  []HoldEvent      `json:"holds,omitempty"`
	Acks   map[string]int64 `json:"acks,omitempty"`
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
		if until, open := f.breakers[m].OpenUntil(now); open {
			st.Open = append(st.Open, ModelOutcome{Model: m, At: until.Add(-f.breakerCfg.OpenFor.D()), Trip: true})
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
	f.mu.Unlock()
	f.Apply(Report{Worker: "\x00restore", Seq: 1, Budget: st.Budget, Outcomes: st.Open, Holds: st.Holds, FirstTokens: st.FirstTokens})
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
