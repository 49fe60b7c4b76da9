package guard

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// Sync joins one worker's guards to its fleet (docs/how-it-works.md
// "Shared guards"). Each guard decides locally; the fleet shares only what
// changes rarely and matters to every worker: budgets stay local (each
// worker keeps its share of the floor), breakers' outcomes and holds are
// reported, and what the guard knows comes back as a View (SetView) that
// overlays the local decisions while fresh. With no fresh view each guard
// decides from what this worker saw: a call never waits for the fleet.
// "Shared guards" in the package documentation says when a report goes
// out and what it keeps. Safe for concurrent use.
type Sync struct {
	worker string
	stale  time.Duration
	// keepOutcomes is how many outcomes per model the pending report keeps
	// (outcomesKept of the breaker's settings).
	keepOutcomes int

	mu      sync.Mutex
	seq     int64
	pending Report
	// unsent are reports whose delivery failed: sent again, unchanged
	// (same Seq), before any new one, so a report the guard did receive
	// counts once.
	unsent []Report
	// hasNews: the pending report carries news (see Sync); lastCut: when the
	// last report was cut (zero: never, so the first cut announces the
	// worker).
	hasNews bool
	lastCut time.Time
	// view and when it arrived here; firstView: when the first did
	// (SetView), from which the announcement is timed.
	view      View
	viewAt    time.Time
	firstView time.Time
	// workers is the fleet's size as the last view had it (1 before one).
	workers int
}

// fleetReportsPerSecond bounds the routine reports of a whole fleet to its
// guard: one workflow takes tens of events a second (a signal costs a few),
// so a fleet of any size sends about this many, each worker every
// ReportEvery(workers).
const fleetReportsPerSecond = 10

// ReportEvery is how long a worker of a fleet of n waits between two
// routine reports: n ÷ fleetReportsPerSecond seconds.
func ReportEvery(n int) time.Duration {
	return time.Duration(max(n, 1)) * time.Second / fleetReportsPerSecond
}

// fleetReadsPerSecond bounds a whole fleet's reads of its guard's view
// (DescribeWorkflowExecution: no workflow task, no history event, but a
// request to the server each): up to 100 workers each reads every
// ReadEvery's floor of 500 ms, a larger fleet less often, so that the
// reads stay about this many a second whatever its size.
const fleetReadsPerSecond = 200

// ReadEvery is how often a worker of a fleet of n reads the fleet's
// view: every floor (a GuardLink's interval, 500 ms by default), or every
// n ÷ fleetReadsPerSecond seconds when that is longer. A change then
// reaches the last worker within about one ReadEvery of its report
// (1.5 s at 300 workers).
func ReadEvery(n int, floor time.Duration) time.Duration {
	return max(floor, time.Duration(max(n, 1))*time.Second/fleetReadsPerSecond)
}

// KeepAlive is how long a worker of a fleet of n stays silent at most:
// WorkerLease/3, or 3 × ReportEvery(n) when that is longer, so the
// fleet's keep-alives stay a third of its routine reports' rate whatever
// its size.
func KeepAlive(n int) time.Duration { return max(WorkerLease/3, 3*ReportEvery(n)) }

// Lease is how long the guard counts a worker of a fleet of n after its
// last report: three keep-alives.
func Lease(n int) time.Duration { return 3 * KeepAlive(n) }

// spreadOf is a fraction in [0,1) fixed by the worker's name and k: where
// in an interval the worker's announcement, or its floor's lottery, falls,
// so that workers started together do not all act at once.
func spreadOf(worker string, k int64) float64 {
	h := fnv.New64a()
	h.Write([]byte(worker))
	binary.Write(h, binary.LittleEndian, k)
	return float64(h.Sum64()>>11) / (1 << 53)
}

// NewSync returns the sync of the worker called worker (unique in the
// fleet); a view older than stale is not used. Outcomes are kept as the
// default policy's breaker reads them until a BreakerRegistry joins it
// (BreakerRegistry.SetSync) with its own.
func NewSync(worker string, stale time.Duration) *Sync {
	return &Sync{worker: worker, stale: stale, keepOutcomes: outcomesKept(config.DefaultConfig().Breaker), workers: 1}
}

// Worker is the name the sync reports under.
func (s *Sync) Worker() string { return s.worker }

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
	s.keepOutcomes = outcomesKept(cfg)
}

// Cut is CutAt now.
func (s *Sync) Cut() (Report, bool) { return s.CutAt(time.Now()) }

// CutAt returns the report due at now, if any: one whose delivery failed,
// as it was; else the pending one when it carries news, when ReportEvery
// has passed since the last and it has something, or when KeepAlive has
// (possibly empty). The first report announces the worker: after its
// first view (SetView; an empty one when there is no guard yet), at a
// point of ReportEvery(the fleet's size + 1) fixed by its name, so that a
// fleet started at once announces itself at the routine rate; news goes
// at once all the same.
func (s *Sync) CutAt(now time.Time) (Report, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsent) > 0 {
		r := s.unsent[0]
		s.unsent = s.unsent[1:]
		return r, true
	}
	var due bool
	if s.lastCut.IsZero() {
		announce := s.firstView.Add(time.Duration(spreadOf(s.worker, 0) * float64(ReportEvery(s.view.Workers+1))))
		due = s.hasNews || !s.firstView.IsZero() && !now.Before(announce)
	} else {
		since := now.Sub(s.lastCut)
		due = s.hasNews || !s.pending.Empty() && since >= ReportEvery(s.workers) || since >= KeepAlive(s.workers)
	}
	if !due {
		return Report{}, false
	}
	return s.cut(now), true
}

// cut takes the pending report at now, with s.mu held.
func (s *Sync) cut(now time.Time) Report {
	s.seq++
	r := s.pending
	r.Worker, r.Seq, r.At = s.worker, s.seq, now
	s.pending, s.hasNews, s.lastCut = Report{}, false, now
	return r
}

// Leave returns the last report of a worker that stops: what is pending,
// and that the fleet is to stop counting it.
func (s *Sync) Leave(now time.Time) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.cut(now)
	r.Leave = true
	return r
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
	if s.firstView.IsZero() {
		s.firstView = now
	}
	if v.Workers > 0 {
		s.workers = v.Workers
	}
}

// Workers is the fleet's size as this worker last learned it (1 before
// it learned any; the last known while the guard is out of reach).
func (s *Sync) Workers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers
}

// View is the fleet's view as this worker last read it, and when (zero:
// never).
func (s *Sync) View() (View, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view, s.viewAt
}

// changed marks the pending report as news when a breaker of this worker
// opened (open) or closed on its own outcomes at now, unless the fleet's
// fresh view already has it so: it is news to the fleet only while the
// fleet does not know.
func (s *Sync) changed(model string, open bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fresh(now) {
		until, listed := s.view.Open[model]
		switch {
		case open && listed && until.After(now):
			return // the fleet has it open
		case !open && !listed && !s.view.Breakers[model].HalfOpen:
			return // the fleet has it closed
		}
	}
	s.hasNews = true
}

// fresh reports whether the view is young enough at now to be used: within
// stale, or two reads of a fleet this large (ReadEvery), when longer.
func (s *Sync) fresh(now time.Time) bool {
	stale := max(s.stale, 2*ReadEvery(s.workers, 0))
	return !s.viewAt.IsZero() && now.Sub(s.viewAt) <= stale && now.Sub(s.viewAt) >= -stale
}

// outcome records an attempt's outcome on model at now; ignored: this
// worker's breaker did not count it. Past s.keepOutcomes outcomes of model, the
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
	if n > s.keepOutcomes {
		drop := oldest
		if oldestIgnored >= 0 {
			drop = oldestIgnored
		}
		outs = slices.Delete(outs, drop, drop+1)
	}
	s.pending.Outcomes = outs
	if class == failure.None && !ignored && s.fresh(now) {
		if _, listed := s.view.Open[model]; listed || s.view.Breakers[model].HalfOpen {
			// A success where the fleet's breaker is open or half-open is
			// a trial the fleet waits for to close it (and to let its
			// workers' trials out at once): news, not routine.
			s.hasNews = true
		}
	}
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
	if until, ok := s.view.Holds[scope]; !ok || !s.fresh(now) || until.Sub(now) < d/2 {
		s.hasNews = true // the fleet does not hold it for half as long: news
	}
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
