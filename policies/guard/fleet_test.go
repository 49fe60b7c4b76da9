package guard

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// worker is one process's guards joined to the fleet.
type worker struct {
	sync     *Sync
	budgets  *Budgets
	breakers *BreakerRegistry
	holds    *Holds
}

// longAgo is when the workers of these tests first looked for the fleet
// and found none: they announce themselves at their first cut.
var longAgo = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// newWorker is newSilentWorker that has looked for its fleet long ago.
func newWorker(name string, cfg *config.Config) worker {
	w := newSilentWorker(name, cfg)
	w.sync.SetView(View{}, longAgo)
	return w
}

// newSilentWorker is a worker's guards joined to a Sync that has not
// looked for its fleet yet.
func newSilentWorker(name string, cfg *config.Config) worker {
	w := worker{
		sync:    NewSync(name, time.Second),
		budgets: NewBudgets(cfg.Budget), breakers: NewBreakerRegistry(cfg.Breaker, nil), holds: NewHolds(),
	}
	w.budgets.SetSync(w.sync)
	w.breakers.SetSync(w.sync)
	w.holds.SetSync(w.sync)
	return w
}

// syncAll delivers every worker's report to the fleet, then the fleet's
// view to every worker, at now.
func syncAll(f *Fleet, now time.Time, ws ...worker) {
	for _, w := range ws {
		if r, ok := w.sync.CutAt(now); ok {
			f.Apply(r)
		}
	}
	for _, w := range ws {
		w.sync.SetView(f.View(now), now)
	}
}

func TestFleetSharesGuards(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Budget.Floor, cfg.Budget.Ratio = 2, 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFleet(cfg.Breaker)
	a, b := newWorker("a", cfg), newWorker("b", cfg)
	const ep, model = "http://up:8000", "qwen-72b"
	syncAll(f, t0, a, b)

	// The floor is split between the workers the fleet counts: one retry
	// each of a floor of two, and no worker spends the other's.
	if a.sync.Workers() != 2 || b.sync.Workers() != 2 {
		t.Fatalf("the workers count a fleet of %d and %d, want 2", a.sync.Workers(), b.sync.Workers())
	}
	if !a.budgets.For(ep).TryRetry(t0) || a.budgets.For(ep).TryRetry(t0) {
		t.Error("worker a: want one retry, its half of a floor of two")
	}
	if !b.budgets.For(ep).TryRetry(t0) {
		t.Error("worker b was refused its own half of the floor")
	}

	// A breaker opened by failures worker a saw refuses in worker b.
	tripped := t0.Add(time.Second)
	for i := range cfg.Breaker.ConsecutiveFailures {
		a.breakers.RecordOutcome(model, tripped.Add(time.Duration(i-cfg.Breaker.ConsecutiveFailures+1)*time.Millisecond), failure.ServerError)
	}
	if !b.breakers.Allow(model, tripped) {
		t.Fatal("worker b refused before any sync")
	}
	syncAll(f, tripped, a, b)
	during := tripped.Add(cfg.Breaker.OpenFor.D() / 2)
	if b.breakers.Allow(model, during) || b.breakers.State(model, during) != BreakerOpen {
		t.Error("worker b let a call through to a model whose breaker the fleet opened")
	}
	// Once the fleet's open period has passed, worker b's breaker tries.
	later := tripped.Add(cfg.Breaker.OpenFor.D())
	syncAll(f, later, a, b)
	if st := b.breakers.State(model, later); st != BreakerHalfOpen {
		t.Errorf("worker b's breaker is %s after the fleet's open period, want half_open (trials, not everything)", st)
	}
	if !b.breakers.Allow(model, later) {
		t.Error("worker b refuses a trial after the fleet's open period")
	}

	// A rate limit worker a met holds the scope in worker b.
	a.holds.Hold(ep, later, 3*time.Second)
	syncAll(f, later, a, b)
	if left := b.holds.Left(ep, later.Add(time.Second)); left != 2*time.Second {
		t.Errorf("worker b: scope held %v more, want 2 s", left)
	}

	// A report applied twice counts once.
	r := Report{Worker: "c", Seq: 1, At: later}
	if !f.Apply(r) || f.Apply(r) {
		t.Error("a report was not applied exactly once")
	}
	if got := f.View(later).Workers; got != 3 {
		t.Errorf("the fleet counts %d workers, want 3", got)
	}
	// One that left is no longer counted, nor one silent for a lease.
	f.Apply(Report{Worker: "c", Seq: 2, At: later, Leave: true})
	if got := f.View(later.Add(WorkerLease)).Workers; got != 0 {
		t.Errorf("the fleet counts %d workers a lease after the last reports, want 0", got)
	}
}

// TestFleetStateRestores: a fleet restored from its State (a guard
// workflow's continue-as-new) gives the same view.
func TestFleetStateRestores(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFleet(cfg.Breaker)
	f.Apply(Report{Worker: "a", Seq: 3, At: t0,
		Outcomes: []ModelOutcome{{Model: "m", At: t0, Trip: true}},
		Holds:    []HoldEvent{{Scope: "e1", At: t0, For: 5 * time.Second}}})
	now := t0.Add(3 * time.Second)
	g := NewFleet(cfg.Breaker)
	g.Restore(f.State(now))
	want, got := f.View(now), g.View(now)
	if !got.Open["m"].Equal(want.Open["m"]) || !got.Holds["e1"].Equal(want.Holds["e1"]) || got.Workers != 1 {
		t.Errorf("restored view %+v, want %+v", got, want)
	}
	if g.Apply(Report{Worker: "a", Seq: 3}) {
		t.Error("a report applied before the restore was applied again")
	}
}

// TestSyncResendsAFailedReportUnchanged: a report whose delivery failed
// (it may still have arrived) goes out again under its own number, so the
// guard counts it once.
func TestSyncResendsAFailedReportUnchanged(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFleet(cfg.Breaker)
	w := newWorker("w", cfg)
	w.breakers.RecordOutcome("m", t0, failure.ServerError)
	r, _ := w.sync.CutAt(t0)
	f.Apply(r) // it arrived, but the sender timed out
	w.sync.Unsent(r)
	w.breakers.RecordOutcome("m", t0, failure.None)
	again, _ := w.sync.CutAt(t0)
	if again.Seq != r.Seq || len(again.Outcomes) != 1 {
		t.Fatalf("the failed report went out again as %d with %d outcomes, want %d with 1", again.Seq, len(again.Outcomes), r.Seq)
	}
	if f.Apply(again) {
		t.Error("the report sent again was applied twice")
	}
	next, ok := w.sync.CutAt(t0.Add(KeepAlive(1)))
	if !ok || next.Seq != r.Seq+1 || len(next.Outcomes) != 1 || !f.Apply(next) {
		t.Errorf("the next report %+v (%v): want the outcome after it, under the next number", next, ok)
	}
}

// TestFleetBreakerGrowsAndSharesTrials: the fleet's breaker judges every
// worker's trials: one worker's failed trial reopens the model for the
// grown period in the other too; one worker's successful trial lets the
// other's half-open breaker have probes trials out at once, not one; the
// close the fleet's trials decide closes the others' half-open breakers
// and halves the grown period.
func TestFleetBreakerGrowsAndSharesTrials(t *testing.T) {
	cfg := config.DefaultConfig() // open_for 1 s, doubling, 5 trials, 90 %
	br := cfg.Breaker
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const model = "qwen-72b"
	f := NewFleet(br)
	a, b := newWorker("a", cfg), newWorker("b", cfg)
	allow := func(w worker, now time.Time) {
		t.Helper()
		if !w.breakers.Allow(model, now) {
			t.Fatalf("%v: no trial let through", now.Sub(t0))
		}
	}
	result := func(w worker, now time.Time, ok bool) {
		class := failure.ServerError
		if ok {
			class = failure.None
		}
		w.breakers.RecordOutcome(model, now, class)
	}
	trial := func(w worker, now time.Time, ok bool) {
		t.Helper()
		allow(w, now)
		result(w, now, ok)
	}

	// Worker a trips it; the fleet opens it for open_for.
	for range br.ConsecutiveFailures {
		a.breakers.RecordOutcome(model, t0, failure.ServerError)
	}
	syncAll(f, t0, a, b)
	if st := b.breakers.State(model, at(time.Millisecond)); st != BreakerOpen {
		t.Fatalf("worker b: %s, want open", st)
	}

	// A trial 4 s into the outage fails in worker a: reopened for twice
	// open_for (half the outage so far), in b too, whose breaker was
	// half-open.
	first := br.OpenFor.D()
	if st := b.breakers.State(model, at(4*first)); st != BreakerHalfOpen {
		t.Fatalf("worker b: %s at 4 s, want half_open", st)
	}
	trial(a, at(4*first), false)
	syncAll(f, at(4*first+100*time.Millisecond), a, b)
	v := f.View(at(4*first + 100*time.Millisecond))
	if want := at(6 * first); !v.Open[model].Equal(want) || v.Breakers[model].Period != 2*first {
		t.Fatalf("fleet after a failed trial: open until %v, period %v; want until %v, period %v",
			v.Open[model].Sub(t0), v.Breakers[model].Period, want.Sub(t0), 2*first)
	}
	if st := b.breakers.State(model, at(4*first+200*time.Millisecond)); st != BreakerOpen {
		t.Errorf("worker b: %s after worker a's trial failed, want open", st)
	}
	if b.breakers.Allow(model, at(4*first+200*time.Millisecond)) {
		t.Error("worker b let a call through after worker a's trial failed")
	}
	if got := b.breakers.Breaker(model).period; got != 2*first {
		t.Errorf("worker b's breaker took period %v, want the fleet's %v", got, 2*first)
	}

	// Half-open again at 6 s. A late failure in b (no trial of b's) is not
	// judged by the fleet either. Until a trial has succeeded somewhere,
	// b lets one trial out at a time.
	half := at(6 * first)
	b.breakers.RecordOutcome(model, half, failure.Timeout)
	allow(b, half)
	if b.breakers.Allow(model, half) {
		t.Fatal("worker b let a second trial out before any trial succeeded")
	}
	trial(a, half, true)
	syncAll(f, half.Add(100*time.Millisecond), a, b)
	now := half.Add(200 * time.Millisecond)
	v = f.View(now)
	if _, open := v.Open[model]; open || !v.Breakers[model].HalfOpen || v.Breakers[model].Succeeded != 1 {
		t.Fatalf("fleet after a's good trial and b's late failure: open %v, %+v; want half-open with 1 success", open, v.Breakers[model])
	}
	// Worker a's success lets b have probes trials out: its first and
	// probes-1 more, then no more. On its own (no success of its own)
	// b's breaker would let none out beside the first.
	if b.breakers.Breaker(model).Permit(now) {
		t.Error("worker b's own breaker, which saw no success, lets a second trial out")
	}
	for range br.Probes - 1 {
		allow(b, now)
	}
	if b.breakers.Allow(model, now) {
		t.Errorf("worker b let a trial out beyond the %d in flight", br.Probes)
	}

	// Four of b's trials succeed: with a's, the fleet has 5 of 5 and
	// closes; b's breaker (4 results of its own) and a's (1) close with it.
	for range br.Probes - 1 {
		result(b, now, true)
	}
	if st := b.breakers.Breaker(model).State(now); st != BreakerHalfOpen {
		t.Fatalf("worker b's breaker is %s after %d results of its own, want half_open", st, br.Probes-1)
	}
	syncAll(f, now.Add(100*time.Millisecond), a, b)
	later := now.Add(200 * time.Millisecond)
	v = f.View(later)
	if !v.Breakers[model].Closed.Equal(now) || v.Breakers[model].HalfOpen || v.Breakers[model].Succeeded != 0 {
		t.Fatalf("fleet after 5 good trials: %+v, want closed at %v", v.Breakers[model], now.Sub(t0))
	}
	for _, w := range []struct {
		name string
		w    worker
	}{{"a", a}, {"b", b}} {
		if st := w.w.breakers.State(model, later); st != BreakerClosed {
			t.Errorf("worker %s: %s after the fleet's trials closed the breaker, want closed", w.name, st)
		}
	}

	// The close halves the grown period, here back to open_for, in the
	// fleet and in b.
	if got := f.View(later).Breakers[model].Period; got != 0 {
		t.Errorf("fleet period %v after its trials closed it, want open_for again (not in the view)", got)
	}
	if got := b.breakers.Breaker(model).period; got != first {
		t.Errorf("worker b's period %v after the close, want %v", got, first)
	}
}

// TestFleetStateRestoresBreakers: a fleet's breakers survive the guard's
// continue-as-new (State, JSON, Restore) as they were: open with a grown
// period, half-open with trials judged, closed with a period still
// healing; and a state written before Breakers (Open trips only) restores
// as it did.
func TestFleetStateRestoresBreakers(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	fail := func(m string, d time.Duration) ModelOutcome {
		return ModelOutcome{Model: m, At: at(d), Class: failure.ServerError}
	}
	ok := func(m string, d time.Duration) ModelOutcome { return ModelOutcome{Model: m, At: at(d)} }
	var outs []ModelOutcome
	for _, m := range []string{"open", "half", "healing"} {
		for range 5 {
			outs = append(outs, fail(m, 0))
		}
		outs = append(outs, fail(m, 4*time.Second), fail(m, 12*time.Second)) // failed trials: 2 s, then 4 s
	}
	outs = append(outs, ok("half", 16*time.Second), ok("half", 16*time.Second)) // half-open, 2 of 2
	for range 5 {
		outs = append(outs, ok("healing", 16*time.Second)) // closed at 16 s: 4 s halved to 2 s
	}
	f := NewFleet(cfg.Breaker)
	f.Apply(Report{Worker: "a", Seq: 1, Outcomes: outs})
	now := at(16500 * time.Millisecond)
	f.Apply(Report{Worker: "a", Seq: 2, Outcomes: []ModelOutcome{fail("open", 16*time.Second)}}) // 8 s from 16 s

	raw, err := json.Marshal(f.State(now))
	if err != nil {
		t.Fatal(err)
	}
	var st FleetState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	g := NewFleet(cfg.Breaker)
	g.Restore(st)
	for _, d := range []time.Duration{16500 * time.Millisecond, 19 * time.Second, 26 * time.Second} {
		want, got := f.View(at(d)), g.View(at(d))
		if !maps.EqualFunc(got.Open, want.Open, time.Time.Equal) || !maps.EqualFunc(got.Breakers, want.Breakers, sameBreakerView) {
			t.Errorf("at %v restored %+v %+v, want %+v %+v", d, got.Open, got.Breakers, want.Open, want.Breakers)
		}
	}
	if v := g.View(now); !v.Open["open"].Equal(at(24*time.Second)) || !v.Breakers["half"].HalfOpen || v.Breakers["half"].Succeeded != 2 || v.Breakers["healing"].Period != 2*time.Second {
		t.Errorf("restored view %+v %+v", v.Open, v.Breakers)
	}
	// The restored open breaker knows when its outage began: a trial that
	// fails at 24 s grows its period to 12 s (half the outage), not 16 s.
	for _, fl := range []*Fleet{f, g} {
		fl.Apply(Report{Worker: "a", Seq: 3, Outcomes: []ModelOutcome{fail("open", 24*time.Second)}})
	}
	if got, want := g.View(at(25 * time.Second)).Breakers["open"].Period, f.View(at(25 * time.Second)).Breakers["open"].Period; got != want || want != 12*time.Second {
		t.Errorf("after a failed trial at 24 s the restored breaker's period is %v, the original's %v; want 12 s", got, want)
	}
	// The restored half-open breaker goes on judging: three more good
	// trials close it.
	g.Apply(Report{Worker: "a", Seq: 4, Outcomes: []ModelOutcome{ok("half", 17*time.Second), ok("half", 17*time.Second), ok("half", 17*time.Second)}})
	if v := g.View(at(17 * time.Second)); !v.Breakers["half"].Closed.Equal(at(17 * time.Second)) {
		t.Errorf("the restored half-open breaker did not close after 5 of 5: %+v", v.Breakers["half"])
	}

	// A state from before Breakers: only open trips.
	old := NewFleet(cfg.Breaker)
	old.Restore(FleetState{Open: []ModelOutcome{{Model: "m", At: t0, Trip: true}}})
	if v := old.View(t0); !v.Open["m"].Equal(t0.Add(cfg.Breaker.OpenFor.D())) {
		t.Errorf("an old state's trip restored as %+v, want open until open_for", v.Open)
	}
	// And an old build reads this one's open breakers from Open.
	for _, o := range st.Open {
		if o.Model == "open" && !o.At.Add(cfg.Breaker.OpenFor.D()).Equal(at(24*time.Second)) {
			t.Errorf("Open carries %v for an old build, which would open it until %v; want 24 s", o.At.Sub(t0), o.At.Add(cfg.Breaker.OpenFor.D()).Sub(t0))
		}
	}
}

func sameBreakerView(a, b BreakerView) bool {
	return a.Period == b.Period && a.HalfOpen == b.HalfOpen && a.Succeeded == b.Succeeded && a.Closed.Equal(b.Closed)
}

// TestFleetWithAnOldGuardInput: a guard started by an older build has no
// open_for_max or heal_after in its input (zero): its breakers work, with
// a period that never grows, as before.
func TestFleetWithAnOldGuardInput(t *testing.T) {
	cfg := config.DefaultConfig()
	br := cfg.Breaker
	br.OpenFor, br.OpenForMax, br.HealAfter = config.Duration(30*time.Second), 0, 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFleet(br)
	var outs []ModelOutcome
	for range 5 {
		outs = append(outs, ModelOutcome{Model: "m", At: t0, Class: failure.ServerError})
	}
	outs = append(outs, ModelOutcome{Model: "m", At: t0.Add(30 * time.Second), Class: failure.ServerError})
	f.Apply(Report{Worker: "a", Seq: 1, Outcomes: outs})
	if v := f.View(t0.Add(31 * time.Second)); !v.Open["m"].Equal(t0.Add(60 * time.Second)) {
		t.Errorf("open until %v, want 60 s (30 s, not grown)", v.Open["m"].Sub(t0))
	}
}
