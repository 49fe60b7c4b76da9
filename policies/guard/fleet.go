package guard

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// Report is what one worker tells the fleet's guard: the attempt
// outcomes its breakers saw and the holds it started since its previous
// report. Reports are applied once each, by worker and sequence number.
// At is the worker's instant when it cut the report: the guard counts a
// worker in the fleet while it reported within its Lease. Leave says the
// worker is stopping. Budgets are not reported: each worker keeps its own
// (see Sync).
type Report struct {
	Worker   string         `json:"worker"`
	Seq      int64          `json:"seq"`
	At       time.Time      `json:"at,omitzero"`
	Outcomes []ModelOutcome `json:"outcomes,omitempty"`
	Holds    []HoldEvent    `json:"holds,omitempty"`
	Leave    bool           `json:"leave,omitempty"`
}

// Empty reports whether r carries no outcome and no hold.
func (r Report) Empty() bool {
	return len(r.Outcomes) == 0 && len(r.Holds) == 0
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

// View is what the fleet's guard knows at one instant: the models whose
// breaker the fleet's outcomes opened and what else the fleet's breakers
// know, the scopes held, and how many workers the fleet has. The guard
// publishes it in its memo whenever it changes.
type View struct {
	At time.Time `json:"at"`
	// Open maps a model to the end of its open period.
	Open map[string]time.Time `json:"open,omitempty"`
	// Breakers holds, for the models whose fleet breaker has grown its
	// period, is half-open or was closed by its trials, what a worker's
	// breaker takes from it.
	Breakers map[string]BreakerView `json:"breakers,omitempty"`
	// Holds maps a scope to the end of its hold.
	Holds map[string]time.Time `json:"holds,omitempty"`
	// Workers is how many workers reported within their Lease and have
	// not left: each keeps 1/Workers of the budget's floor.
	Workers int `json:"workers,omitempty"`
}

// BreakerView is what a fleet's view says of one model's breaker beyond
// whether it is open.
type BreakerView struct {
	// Period is the open period the fleet's breaker grew to (failed
	// trials), when above the policy's open_for: a worker's breaker opens
	// at least that long.
	Period time.Duration `json:"period,omitempty"`
	// HalfOpen: the fleet's breaker is half-open (its trials are out).
	HalfOpen bool `json:"half_open,omitempty"`
	// Succeeded is, half-open, how many of the fleet's trials succeeded:
	// once one has, a worker's half-open breaker lets Probes trials out
	// at once, not one.
	Succeeded int `json:"succeeded,omitempty"`
	// Closed is the last instant the fleet's trials closed the breaker: a
	// worker's breaker whose trials began before then closes too.
	Closed time.Time `json:"closed,omitzero"`
}

// WorkerLease is how long the guard counts a worker after its last report
// in a fleet of up to 30 (Lease gives it for any size). A worker with
// nothing to report sends an empty report every KeepAlive, a third of
// it, so a worker that stopped without saying so (killed) is forgotten
// within a lease. Until then it is counted: its share of the floor is
// lost for that long, which errs on the side of fewer retries.
const WorkerLease = 60 * time.Second

// ackKeep is how long a worker's last report number is kept after its
// last report: a worker gone that long (restarted under a new name) is
// forgotten.
const ackKeep = 10 * time.Minute

// Fleet is the guard state of every worker of a deployment, built from
// their reports: breakers that judge the outcomes all workers saw, the
// rate-limit holds, and the workers. It is deterministic in its inputs
// (no clock of its own), so it can live in a workflow. A fleet breaker is
// a Breaker whose every reported outcome is a call it let through: it
// opens on the fleet's failures; half-open, it judges the outcomes the
// workers' breakers counted (their trials, and the calls of workers whose
// breaker is closed), tells them once a trial succeeded, reopens with a grown period or
// closes, and the workers' breakers follow it through the View. Safe for
// concurrent use.
type Fleet struct {
	breakerCfg config.BreakerConfig

	mu         sync.Mutex
	breakers   map[string]*Breaker
	holds      *Holds
	acks       map[string]int64
	lastReport map[string]time.Time // each worker's latest report; gone when it left
}

// NewFleet returns an empty fleet state with the policy's breaker
// settings.
func NewFleet(breaker config.BreakerConfig) *Fleet {
	return &Fleet{breakerCfg: breaker, breakers: map[string]*Breaker{}, holds: NewHolds(), acks: map[string]int64{}, lastReport: map[string]time.Time{}}
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
	seen := later(f.lastReport[r.Worker], r.At)
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
	if r.Leave {
		delete(f.lastReport, r.Worker)
	} else {
		f.lastReport[r.Worker] = seen
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
		v.HalfOpen, v.Succeeded = true, successes
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
	for _, s := range f.lastReport {
		t = later(t, s)
	}
	return t
}

// View returns the fleet's state at now.
func (f *Fleet) View(now time.Time) View {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := View{At: now, Open: map[string]time.Time{}, Holds: map[string]time.Time{}}
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
	lease := Lease(len(f.lastReport))
	for _, at := range f.lastReport {
		if now.Sub(at) < lease {
			v.Workers++
		}
	}
	return v
}

// FleetState is a Fleet in a few bytes, carried across a guard workflow's
// continue-as-new: the breakers that are not as new, the holds and the
// last report of each worker. (A state from a build that shared budgets
// also carries their counts, which this one ignores.)
type FleetState struct {
	// Open are the open breakers as trips at the instant they opened: all
	// that a state from a build before Breakers carries, and what such a
	// build reads of this one's (Restore takes Breakers over Open).
	Open []ModelOutcome `json:"open,omitempty"`
	// Breakers are the breakers that are open, half-open, have a grown
	// period or were closed by their trials lately, sorted by model.
	Breakers []BreakerMemo    `json:"breakers,omitempty"`
	Holds    []HoldEvent      `json:"holds,omitempty"`
	Acks     map[string]int64 `json:"acks,omitempty"`
	// Seen is the latest report of each worker in the fleet.
	Seen map[string]time.Time `json:"seen,omitempty"`
}

// State returns the fleet's state at now.
func (f *Fleet) State(now time.Time) FleetState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := FleetState{Acks: map[string]int64{}, Seen: map[string]time.Time{}}
	for w, s := range f.acks {
		if at, ok := f.lastReport[w]; ok && now.Sub(at) < ackKeep {
			st.Acks[w], st.Seen[w] = s, at
		}
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
		f.acks[w] = s
		if at, ok := st.Seen[w]; ok {
			f.lastReport[w] = at
		}
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
	f.Apply(Report{Worker: "\x00restore", Seq: 1, Outcomes: open, Holds: st.Holds})
	f.mu.Lock()
	delete(f.acks, "\x00restore")
	delete(f.lastReport, "\x00restore")
	f.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
