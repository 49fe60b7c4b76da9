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

func newWorker(name string, cfg *config.Config) worker {
	w := worker{
		sync:    NewSync(name, time.Second, cfg.Budget),
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
	f := NewFleet(cfg.Budget, cfg.Breaker)
	a, b := newWorker("a", cfg), newWorker("b", cfg)
	const ep, model = "http://up:8000", "qwen-72b"
	syncAll(f, t0, a, b)

	// The floor is the fleet's: two retries in all, not two per worker.
	if !a.budgets.For(ep).TryRetry(t0) || !a.budgets.For(ep).TryRetry(t0) {
		t.Fatal("worker a was refused the fleet's floor")
	}
	if a.budgets.For(ep).TryRetry(t0) {
		t.Error("worker a spent a third retry from a floor of two, before any sync")
	}
	syncAll(f, t0.Add(500*time.Millisecond), a, b)
	if b.budgets.For(ep).TryRetry(t0.Add(600 * time.Millisecond)) {
		t.Error("worker b retried although worker a had spent the fleet's floor")
	}
	if got := b.budgets.For(ep).Remaining(t0.Add(600 * time.Millisecond)); got != 0 {
		t.Errorf("worker b sees %d retries left, want 0", got)
	}

	// A breaker opened by failures worker a saw refuses in worker b.
	tripped := t0.Add(time.Second)
	for i := range cfg.Breaker.ConsecutiveFailures {
		a.breakers.RecordOutcome(model, tripped.Add(time.Duration(i-cfg.Breaker.ConsecutiveFailures+1)*time.Millisecond), failure.ServerError)
	}
	if !b.breakers.Allow(model, tripped, 0) {
		t.Fatal("worker b refused before any sync")
	}
	syncAll(f, tripped, a, b)
	during := tripped.Add(cfg.Breaker.OpenFor.D() / 2)
	if b.breakers.Allow(model, during, 0) || b.breakers.State(model, during) != BreakerOpen {
		t.Error("worker b let a call through to a model whose breaker the fleet opened")
	}
	// Once the fleet's open period has passed, worker b's breaker tries.
	later := tripped.Add(cfg.Breaker.OpenFor.D())
	syncAll(f, later, a, b)
	if st := b.breakers.State(model, later); st != BreakerHalfOpen {
		t.Errorf("worker b's breaker is %s after the fleet's open period, want half_open (trials, not everything)", st)
	}
	if !b.breakers.Allow(model, later, 0) {
		t.Error("worker b refuses a trial after the fleet's open period")
	}

	// A rate limit worker a met holds the scope in worker b.
	a.holds.Hold(ep, later, 3*time.Second)
	syncAll(f, later, a, b)
	if left := b.holds.Left(ep, later.Add(time.Second)); left != 2*time.Second {
		t.Errorf("worker b: scope held %v more, want 2 s", left)
	}

	// A stale view is not used: each worker decides from its own window.
	stale := later.Add(2 * time.Minute)
	if !b.budgets.For(ep).TryRetry(stale) {
		t.Error("with a stale view worker b was refused its own floor")
	}
	// A report applied twice counts once.
	r := Report{Worker: "c", Seq: 1, Budget: []BudgetCount{{Endpoint: ep, At: stale, Retries: 1}}}
	if !f.Apply(r) || f.Apply(r) {
		t.Error("a report was not applied exactly once")
	}
	if got := f.View(stale).Budgets[ep].Retries; got != 1 {
		t.Errorf("fleet retries %d after one report applied twice, want 1", got)
	}
}

// TestFleetStateRestores: a fleet restored from its State (a guard
// workflow's continue-as-new) gives the same view.
func TestFleetStateRestores(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFleet(cfg.Budget, cfg.Breaker)
	f.Apply(Report{Worker: "a", Seq: 3,
		Budget:   []BudgetCount{{Endpoint: "e1", At: t0, Requests: 40, Retries: 3}, {Endpoint: "e2", At: t0.Add(2 * time.Second), Requests: 5}},
		Outcomes: []ModelOutcome{{Model: "m", At: t0, Trip: true}},
		Holds:    []HoldEvent{{Scope: "e1", At: t0, For: 5 * time.Second}}})
	now := t0.Add(3 * time.Second)
	g := NewFleet(cfg.Budget, cfg.Breaker)
	g.Restore(f.State(now))
	want, got := f.View(now), g.View(now)
	for _, ep := range []string{"e1", "e2"} {
		if want.Budgets[ep] != got.Budgets[ep] {
			t.Errorf("budget %s: %+v, want %+v", ep, got.Budgets[ep], want.Budgets[ep])
		}
	}
	if !got.Open["m"].Equal(want.Open["m"]) || !got.Holds["e1"].Equal(want.Holds["e1"]) || got.Acks["a"] != 3 || len(got.Acks) != 1 {
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
	f := NewFleet(cfg.Budget, cfg.Breaker)
	w := newWorker("w", cfg)
	for range 3 {
		w.budgets.For("e").TryRetry(t0)
	}
	r, _ := w.sync.Cut()
	f.Apply(r) // it arrived, but the sender timed out
	w.sync.Unsent(r)
	w.budgets.For("e").RecordRequest(t0)
	again, _ := w.sync.Cut()
	if again.Seq != r.Seq {
		t.Fatalf("the failed report went out again as %d, want %d", again.Seq, r.Seq)
	}
	f.Apply(again)
	next, _ := w.sync.Cut()
	f.Apply(next)
	if got := f.View(t0).Budgets["e"]; got.Retries != 3 || got.Requests != 1 {
		t.Errorf("fleet counts %+v, want 3 retries and 1 request", got)
	}
}

// TestFleetFirstTokens: the fleet's p90 time to first token covers every
// worker's reports, keeps the latest FirstTokenSamples, and survives the
// guard's continue-as-new (State, Restore).
func TestFleetFirstTokens(t *testing.T) {
	cfg := config.DefaultConfig()
	f := NewFleet(cfg.Budget, cfg.Breaker)
	fast, slow := NewSync("fast", time.Second, cfg.Budget), NewSync("slow", time.Second, cfg.Budget)
	for range 90 {
		fast.FirstToken("qwen-72b", 300*time.Millisecond)
	}
	for range 10 {
		slow.FirstToken("qwen-72b", 3*time.Second)
	}
	slow.FirstToken("llama-8b", 100*time.Millisecond)
	for _, s := range []*Sync{fast, slow} {
		r, _ := s.Cut()
		f.Apply(r)
	}
	now := time.Unix(1_000_000, 0)
	v := f.View(now)
	if got := v.FirstTokens["qwen-72b"]; got != (FirstTokenP90{P90: 300 * time.Millisecond, N: 100}) {
		t.Errorf("qwen-72b of both workers: %+v, want p90 300 ms of 100", got)
	}
	fast.SetView(v, now)
	if got, ok := fast.FleetFirstTokens("llama-8b", now); !ok || got.N != 1 {
		t.Errorf("a worker reads the other's llama-8b times: %+v %v", got, ok)
	}
	for range FirstTokenSamples {
		slow.FirstToken("qwen-72b", 3*time.Second)
	}
	r, _ := slow.Cut()
	f.Apply(r)
	if got := f.View(now).FirstTokens["qwen-72b"]; got != (FirstTokenP90{P90: 3 * time.Second, N: FirstTokenSamples}) {
		t.Errorf("after 200 slow times: %+v, want only the latest 200", got)
	}
	g := NewFleet(cfg.Budget, cfg.Breaker)
	g.Restore(f.State(now))
	if got, want := g.View(now).FirstTokens, f.View(now).FirstTokens; len(got) != 2 || got["qwen-72b"] != want["qwen-72b"] || got["llama-8b"] != want["llama-8b"] {
		t.Errorf("restored %+v, want %+v", got, want)
	}
}

// TestFleetBreakerGrowsAndRamps: the fleet's breaker judges every
// worker's trials: one worker's failed trial reopens the model for the
// grown period in the other too; the trials that succeed anywhere ramp the
// share every worker lets through; the close the fleet's trials decide
// closes the others' half-open breakers and halves the grown period.
func TestFleetBreakerGrowsAndRamps(t *testing.T) {
	cfg := config.DefaultConfig() // open_for 1 s, doubling, share 10 %, 5 trials, 90 %
	br := cfg.Breaker
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const model = "qwen-72b"
	f := NewFleet(cfg.Budget, br)
	a, b := newWorker("a", cfg), newWorker("b", cfg)
	trial := func(w worker, now time.Time, ok bool) {
		t.Helper()
		if !w.breakers.Allow(model, now, 0) {
			t.Fatalf("%v: no trial let through", now.Sub(t0))
		}
		class := failure.ServerError
		if ok {
			class = failure.None
		}
		w.breakers.RecordOutcome(model, now, class)
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
	// open_for (half the outage so far), in b too.
	first := br.OpenFor.D()
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
	if got := b.breakers.Breaker(model).period; got != 2*first {
		t.Errorf("worker b's breaker took period %v, want the fleet's %v", got, 2*first)
	}

	// Half-open again at 6 s. A late failure in b (no trial of b's) is not
	// judged by the fleet either.
	half := at(6 * first)
	b.breakers.RecordOutcome(model, half, failure.Timeout)
	trial(a, half, true)
	trial(a, half, true)
	trial(b, half, true)
	syncAll(f, half.Add(100*time.Millisecond), a, b)
	now := half.Add(200 * time.Millisecond)
	v = f.View(now)
	if _, open := v.Open[model]; open || v.Breakers[model].Share != 0.8 {
		t.Fatalf("fleet after 3 good trials and a late failure: open %v, share %v; want half-open at 80 %%", open, v.Breakers[model].Share)
	}
	// Worker b earned 20 % itself; the fleet's 80 % lets u = 0.5 through.
	if b.breakers.Breaker(model).Permit(now, 0.5) || !b.breakers.Permit(model, now, 0.5) {
		t.Errorf("worker b does not take the fleet's trial share: own %v, with the fleet %v",
			b.breakers.Breaker(model).Permit(now, 0.5), b.breakers.Permit(model, now, 0.5))
	}

	// Two more good trials in a: the fleet has 5 of 5 and closes; b's
	// half-open breaker closes with it.
	trial(a, now, true)
	trial(a, now, true)
	syncAll(f, now.Add(100*time.Millisecond), a, b)
	later := now.Add(200 * time.Millisecond)
	v = f.View(later)
	if !v.Breakers[model].Closed.Equal(now) || v.Breakers[model].Share != 0 {
		t.Fatalf("fleet after 5 good trials: %+v, want closed at %v", v.Breakers[model], now.Sub(t0))
	}
	if st := b.breakers.State(model, later); st != BreakerClosed {
		t.Errorf("worker b: %s after the fleet's trials closed the breaker, want closed", st)
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
	f := NewFleet(cfg.Budget, cfg.Breaker)
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
	g := NewFleet(cfg.Budget, cfg.Breaker)
	g.Restore(st)
	for _, d := range []time.Duration{16500 * time.Millisecond, 19 * time.Second, 26 * time.Second} {
		want, got := f.View(at(d)), g.View(at(d))
		if !maps.EqualFunc(got.Open, want.Open, time.Time.Equal) || !maps.EqualFunc(got.Breakers, want.Breakers, sameBreakerView) {
			t.Errorf("at %v restored %+v %+v, want %+v %+v", d, got.Open, got.Breakers, want.Open, want.Breakers)
		}
	}
	if v := g.View(now); !v.Open["open"].Equal(at(24*time.Second)) || v.Breakers["half"].Share != 0.4 || v.Breakers["healing"].Period != 2*time.Second {
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
	old := NewFleet(cfg.Budget, cfg.Breaker)
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
	return a.Period == b.Period && a.Share == b.Share && a.Closed.Equal(b.Closed)
}

// TestFleetWithAnOldGuardInput: a guard started by an older build has no
// open_for_max or heal_after in its input (zero): its breakers work, with
// a period that never grows, as before.
func TestFleetWithAnOldGuardInput(t *testing.T) {
	cfg := config.DefaultConfig()
	br := cfg.Breaker
	br.OpenFor, br.OpenForMax, br.HealAfter = config.Duration(30*time.Second), 0, 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFleet(cfg.Budget, br)
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

// TestTheFleetServesItsLineInTurn: worker a's call "old" and worker b's
// call "young" wait for a spent fleet budget, old refused first. When b's
// traffic earns the fleet one retry, young, asking first on b, is still
// refused (old is ahead in a's line, which a's report told the fleet),
// and old gets it. Before, each worker's line was its own: in the 5 s
// flap with three workers a call refused first waited out call.max_wait
// in the up window after the fault while other workers' younger calls
// took the retries. Once a's line is empty and its report says so, b's
// call no longer waits for it.
func TestTheFleetServesItsLineInTurn(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Budget.Floor, cfg.Budget.Ratio, cfg.Budget.TenantShare = 1, 0.1, 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	f := NewFleet(cfg.Budget, cfg.Breaker)
	a, b := newWorker("a", cfg), newWorker("b", cfg)
	const ep = "http://up:8000"
	syncAll(f, t0, a, b)
	if !a.budgets.For(ep).TryRetry(t0) {
		t.Fatal("the fleet's floor was refused")
	}
	syncAll(f, at(50*time.Millisecond), a, b)
	try := func(w worker, d time.Duration, call string) (bool, int) {
		ok, _, ahead := w.budgets.For(ep).TryRetryInTurn(at(d), "", call)
		return ok, ahead
	}
	if ok, _ := try(a, 100*time.Millisecond, "old"); ok {
		t.Fatal("old got a retry from a spent budget")
	}
	if ok, _ := try(b, 200*time.Millisecond, "young"); ok {
		t.Fatal("young got a retry from a spent budget")
	}
	for range 10 {
		b.budgets.For(ep).RecordRequest(at(300 * time.Millisecond))
	}
	syncAll(f, at(400*time.Millisecond), a, b)
	if got := b.budgets.For(ep).Remaining(at(450 * time.Millisecond)); got != 1 {
		t.Fatalf("the fleet's budget holds %d retries, want the one b's traffic earned", got)
	}
	if ok, ahead := try(b, 500*time.Millisecond, "young"); ok || ahead != 1 {
		t.Fatalf("young on b while old waits on a: ok %v, %d ahead; want refused, old ahead", ok, ahead)
	}
	if ok, _ := try(a, 600*time.Millisecond, "old"); !ok {
		t.Fatal("old, first in the fleet's line, was refused the retry earned")
	}
	for range 10 {
		b.budgets.For(ep).RecordRequest(at(700 * time.Millisecond))
	}
	syncAll(f, at(800*time.Millisecond), a, b)
	if ok, ahead := try(b, 900*time.Millisecond, "young"); !ok {
		t.Fatalf("young, alone in the fleet's line once a's report said old left it: refused (%d ahead)", ahead)
	}
}
