package guard

import (
	"slices"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// Sync joins one worker's guards to its fleet (docs/how-it-works.md "Shared guards"). It
// gathers what the worker's budgets, breakers and holds record into
// reports (Cut) for the fleet's guard, and overlays the fleet's View on
// their decisions while the view is fresh: a budget then counts the
// fleet's requests and retries, so its floor is paid once for the fleet;
// a breaker the fleet opened refuses here too; a scope the fleet holds is
// held here. With no fresh view (the guard unreachable, or not yet asked)
// each guard decides from what this worker saw, as it would alone: a call
// never waits for the fleet.
//
// The counts a view does not include yet (reported after it was taken,
// or not reported) are added to it, so two decisions in one worker never
// spend the same retry. Safe for concurrent use.
//
// The report being gathered keeps only what the fleet can still use, so
// it stays small however long the guard cannot be reached (a report past
// Temporal's 2 MB payload limit is refused, sent again for ever, and the
// worker never syncs again):
//   - per model, the newest outcomes as many as the breaker's longest rule
//     reads (its window, consecutive failures or probes: 20 with the
//     default policy), those the fleet does not judge (Ignored) dropped
//     first: an older outcome has left the fleet breaker's window too, and
//     what it would have decided then is over;
//   - per endpoint, the per-second counts of the budget's window at the
//     latest count: an older one no longer earns or spends a retry;
//   - per scope, the hold that ends last: the fleet holds a scope until the
//     latest end it is told;
//   - per model, the newest FirstTokenSamples times to first token, as
//     many as the fleet keeps; the calls in line, listed afresh in each
//     report, at most maxReportedWaiting.
//
// So a report is at most models × (20 outcomes + FirstTokenSamples times)
// + endpoints × 61 counts + a hold per scope: under 40 KB with the default
// policy and four models on two endpoints (TestPendingReportStaysBounded,
// where 16 minutes at 20 attempts a second made 1.7 MB unbounded). While
// the guard is reachable a report reaches the outcome bound only when one
// model sees over 20 attempts in an interval (40 a second); the fleet's
// breaker then judges the newest 20, the whole window its rate rule reads.
type Sync struct {
	worker string
	stale  time.Duration
	budget config.BudgetConfig
	// keep is how many outcomes per model the pending report keeps
	// (outcomesKept of the breaker's settings).
	keep int

	mu      sync.Mutex
	seq     int64
	pending Report
	sent    []Report
	// unsent are reports whose delivery failed: sent again, unchanged
	// (same Seq), before any new one, so a report the guard did receive
	// counts once.
	unsent []Report
	view   View
	viewAt time.Time // when the view arrived here
	// lines lists the calls in this worker's budgets' lines (set by
	// Budgets.SetSync); waited: the last report listed some.
	lines  func(now time.Time) []WaitingCall
	waited bool
}

// NewSync returns the sync of the worker called worker (unique in the
// fleet); a view older than stale is not used. Outcomes are kept as the default policy's breaker reads them until a
// BreakerRegistry joins it (BreakerRegistry.SetSync) with its own.
func NewSync(worker string, stale time.Duration, budget config.BudgetConfig) *Sync {
	return &Sync{worker: worker, stale: stale, budget: budget, keep: outcomesKept(config.DefaultConfig().Breaker)}
}

// outcomesKept is how many outcomes of one model a pending report keeps
// for a breaker with cfg: the most any of its rules reads (the rate over
// Window calls, ConsecutiveFailures in a row, Probes trial results).
func outcomesKept(cfg config.BreakerConfig) int {
	return max(cfg.Window, cfg.ConsecutiveFailures, cfg.Probes, 1)
}

// setBreaker keeps the outcomes a breaker with cfg reads.
func (s *Sync) setBreaker(cfg config.BreakerConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = outcomesKept(cfg)
}

// maxSent bounds the reports kept until a view acknowledges them (a guard
// that takes reports but cannot be queried).
const maxSent = 120

// Cut is CutAt now.
func (s *Sync) Cut() (Report, bool) { return s.CutAt(time.Now()) }

// CutAt returns the next report to deliver at now: one whose delivery
// failed, as it was, else what was recorded since the previous report,
// with the calls in this worker's budgets' lines at now (while there are
// some, and once more when there are none left); false when there is
// nothing.
func (s *Sync) CutAt(now time.Time) (Report, bool) {
	var waiting []WaitingCall
	s.mu.Lock()
	lines := s.lines
	s.mu.Unlock()
	if lines != nil {
		waiting = lines(now) // takes the budgets' locks: not under s.mu
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsent) > 0 {
		r := s.unsent[0]
		s.unsent = s.unsent[1:]
		return r, true
	}
	if len(waiting) > 0 || s.waited {
		s.pending.Waiting, s.pending.WaitingAt = waiting, now
		s.waited = len(waiting) > 0
	}
	if s.pending.Empty() {
		return Report{}, false
	}
	s.seq++
	r := s.pending
	r.Worker, r.Seq = s.worker, s.seq
	s.pending = Report{}
	s.sent = append(s.sent, r)
	if len(s.sent) > maxSent {
		s.sent = s.sent[len(s.sent)-maxSent:]
	}
	return r, true
}

// Unsent returns a report whose delivery failed (it may still have
// arrived): the next Cut returns it again, unchanged, so the guard, which
// applies a worker's reports once by Seq, never counts it twice.
func (s *Sync) Unsent(r Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsent = append([]Report{r}, s.unsent...)
}

// SetView takes the fleet's view, received at now.
func (s *Sync) SetView(v View, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.view, s.viewAt = v, now
	acked := v.Acks[s.worker]
	kept := s.sent[:0]
	for _, r := range s.sent {
		if r.Seq > acked {
			kept = append(kept, r)
		}
	}
	s.sent = kept
}

func (s *Sync) fresh(now time.Time) bool {
	return !s.viewAt.IsZero() && now.Sub(s.viewAt) <= s.stale && now.Sub(s.viewAt) >= -s.stale
}

// countBudget records requests and retries charged to endpoint at now.
func (s *Sync) countBudget(endpoint string, now time.Time, requests, retries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(endpoint, now, requests, retries)
}

// count is countBudget with s.mu held; the pending report's counts older
// than the budget's window at now are dropped: they no longer earn or
// spend a retry (a fleet's budget would count them in its newest second
// instead).
func (s *Sync) count(endpoint string, now time.Time, requests, retries int) {
	at := now.Truncate(time.Second)
	if w := s.budget.Window.D(); w > 0 {
		s.pending.Budget = slices.DeleteFunc(s.pending.Budget, func(c BudgetCount) bool { return now.Sub(c.At) >= w })
	}
	for i := range s.pending.Budget {
		c := &s.pending.Budget[i]
		if c.Endpoint == endpoint && c.At.Equal(at) {
			c.Requests += requests
			c.Retries += retries
			return
		}
	}
	s.pending.Budget = append(s.pending.Budget, BudgetCount{Endpoint: endpoint, At: at, Requests: requests, Retries: retries})
}

// fleetBudget is endpoint's budget at now as the fleet's view has it plus
// this worker's counts the view does not include yet: the retries it
// allows and those spent; false without a fresh view. s.mu is held.
func (s *Sync) fleetBudget(endpoint string, now time.Time) (limit, spent int, ok bool) {
	if !s.fresh(now) {
		return 0, 0, false
	}
	b := s.view.Budgets[endpoint]
	req, ret := 0, 0
	for _, r := range append(slices.Clone(s.sent), s.pending) {
		for _, c := range r.Budget {
			if c.Endpoint == endpoint && now.Sub(c.At) < s.budget.Window.D() {
				req += c.Requests
				ret += c.Retries
			}
		}
	}
	// The view's reserve, refilled by this worker's requests and spent by
	// its retries that the view does not include yet.
	level := float64(s.budget.Floor)
	if v, ok := s.view.Budgets[endpoint]; ok {
		level = float64(v.Allowed - v.Retries)
	}
	left := whole(level + s.budget.Ratio*float64(req) - float64(ret))
	return b.Retries + ret + left, b.Retries + ret, true
}

// fleetRetry decides a retry on endpoint at now from the fleet's budget
// (decided false without a fresh view); a retry allowed is counted.
func (s *Sync) fleetRetry(endpoint string, now time.Time) (allowed, decided bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, spent, ok := s.fleetBudget(endpoint, now)
	if !ok {
		return false, false
	}
	if spent >= limit {
		return false, true
	}
	s.count(endpoint, now, 0, 1)
	return true, true
}

// fleetRemaining is the fleet's retries left on endpoint at now; false
// without a fresh view.
func (s *Sync) fleetRemaining(endpoint string, now time.Time) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, spent, ok := s.fleetBudget(endpoint, now)
	return max(limit-spent, 0), ok
}

// fleetAhead counts the calls other workers' lines held on endpoint as
// of the fleet's view that were first refused before since (all of them
// when all); 0 without a fresh view.
func (s *Sync) fleetAhead(endpoint string, since time.Time, all bool, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fresh(now) {
		return 0
	}
	n := 0
	for w, calls := range s.view.Waiting {
		if w == s.worker {
			continue // this worker's own line is counted where it is kept
		}
		for _, c := range calls {
			if c.Endpoint == endpoint && (all || c.Since.Before(since)) {
				n++
			}
		}
	}
	return n
}

// outcome records an attempt's outcome on model at now; ignored: this
// worker's breaker did not count it. Past s.keep outcomes of model, the
// oldest it has that the fleet does not judge is dropped, else its
// oldest.
func (s *Sync) outcome(model string, now time.Time, class failure.Class, trip, ignored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	outs := append(s.pending.Outcomes, ModelOutcome{Model: model, At: now, Class: class, Trip: trip, Ignored: ignored})
	n, oldest, oldestIgnored := 0, -1, -1
	for i, o := range outs {
		if o.Model != model {
			continue
		}
		n++
		if oldest < 0 {
			oldest = i
		}
		if o.Ignored && oldestIgnored < 0 {
			oldestIgnored = i
		}
	}
	if n > s.keep {
		drop := oldest
		if oldestIgnored >= 0 {
			drop = oldestIgnored
		}
		outs = slices.Delete(outs, drop, drop+1)
	}
	s.pending.Outcomes = outs
}

// fleetBreaker is what the fleet's view says of one model's breaker at an
// instant.
type fleetBreaker struct {
	BreakerView
	open  bool
	until time.Time // open: the end of the fleet's open period
}

// fleetBreaker returns what the fleet's view says of model's breaker at
// now; false without a fresh view.
func (s *Sync) fleetBreaker(model string, now time.Time) (fleetBreaker, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fresh(now) {
		return fleetBreaker{}, false
	}
	fb := fleetBreaker{BreakerView: s.view.Breakers[model]}
	if until, ok := s.view.Open[model]; ok && until.After(now) {
		fb.open, fb.until = true, until
	}
	return fb, true
}

// hold records a rate limit holding scope from now for d: the pending
// report keeps one hold per scope, the one that ends last: the fleet
// holds a scope until the latest end it was told.
func (s *Sync) hold(scope string, now time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := HoldEvent{Scope: scope, At: now, For: d}
	for i, p := range s.pending.Holds {
		if p.Scope == scope {
			if !h.At.Add(h.For).Before(p.At.Add(p.For)) {
				s.pending.Holds[i] = h
			}
			return
		}
	}
	s.pending.Holds = append(s.pending.Holds, h)
}

// fleetHeld is how long the fleet's view holds scope after now (0 without
// a fresh view).
func (s *Sync) fleetHeld(scope string, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.view.Holds[scope]
	if !ok || !s.fresh(now) || !until.After(now) {
		return 0
	}
	return until.Sub(now)
}

// FirstToken records a time to first token of model.
func (s *Sync) FirstToken(model string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending.FirstTokens == nil {
		s.pending.FirstTokens = map[string][]time.Duration{}
	}
	ds := append(s.pending.FirstTokens[model], d)
	if len(ds) > FirstTokenSamples {
		// The guard keeps no more; a guard out of reach for long must not
		// grow the next report.
		ds = slices.Delete(ds, 0, len(ds)-FirstTokenSamples)
	}
	s.pending.FirstTokens[model] = ds
}

// FleetFirstTokens is the fleet's p90 time to first token of model and
// the number of times it covers; false without a fresh view.
func (s *Sync) FleetFirstTokens(model string, now time.Time) (FirstTokenP90, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.view.FirstTokens[model]
	return p, ok && s.fresh(now)
}
