package guard

import (
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
		if r, ok := w.sync.Cut(); ok {
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
	for i := range cfg.Breaker.ConsecutiveFailures {
		a.breakers.RecordOutcome(model, t0.Add(time.Duration(i)*time.Millisecond), failure.ServerError)
	}
	if !b.breakers.Allow(model, t0.Add(time.Second), 0) {
		t.Fatal("worker b refused before any sync")
	}
	syncAll(f, t0.Add(time.Second), a, b)
	if b.breakers.Allow(model, t0.Add(1100*time.Millisecond), 0) || b.breakers.State(model, t0.Add(1100*time.Millisecond)) != BreakerOpen {
		t.Error("worker b let a call through to a model whose breaker the fleet opened")
	}
	// Once the fleet's open period has passed, worker b decides alone again.
	later := t0.Add(cfg.Breaker.OpenFor.D() + 2*time.Second)
	syncAll(f, later, a, b)
	if st := b.breakers.State(model, later); st != BreakerHalfOpen {
		t.Errorf("worker b's breaker is %s after the fleet's open period, want half_open (probes, not everything)", st)
	}
	if !b.breakers.Allow(model, later, 0) {
		t.Error("worker b refuses a probe after the fleet's open period")
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
