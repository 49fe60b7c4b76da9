package guard

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// cutOff is a worker whose guard could not be reached for a while: its
// first report, sent again and again, and the report gathered meanwhile,
// as it stands when the guard is back; with what the worker recorded, to
// check the reports against.
type cutOff struct {
	cfg            *config.Config
	models         []string
	end            time.Time
	first, pending Report
	// outcomes are the instants of every outcome recorded, by model,
	// oldest first (all counted by the worker's breaker).
	outcomes map[string][]time.Time
	// lastHold is, by scope, the last rate limit recorded.
	lastHold map[string]HoldEvent
	// failing is the model whose last attempts failed in a row (its
	// breaker opened at the last).
	failing string
}

// holdFor is how long each simulated rate limit holds its model.
const holdFor = 5 * time.Second

// simulateCutOff runs a worker for d at rate attempts a second spread over
// models while every report it sends fails: one attempt in four fails
// except for the last five attempts of the first model, which all fail;
// each model is rate limited every tenth attempt. The worker tries to
// report every 500 ms; its first report is due at once (it announces the
// worker) and, refused, is what every later try sends again, unchanged,
// so all else gathers in the pending report.
func simulateCutOff(t *testing.T, cfg *config.Config, models, rate int, d time.Duration) cutOff {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	step := time.Second / time.Duration(rate)
	total := int(d / step)
	c := cutOff{cfg: cfg, end: t0.Add(time.Duration(total-1) * step), outcomes: map[string][]time.Time{}, lastHold: map[string]HoldEvent{}}
	for i := range models {
		c.models = append(c.models, fmt.Sprintf("qwen2.5-72b-instruct-%d", i))
	}
	c.failing = c.models[0]
	w := newWorker("w-cut-off", cfg)
	const interval = 500 * time.Millisecond
	lastOfFailing := (total - 1) / models // the first model's attempts are numbered 0..lastOfFailing
	nextCut := t0.Add(interval)
	tries := 0
	for i := range total {
		at := t0.Add(time.Duration(i) * step)
		for !at.Before(nextCut) {
			r, ok := w.sync.CutAt(nextCut)
			if !ok || r.Seq != 1 {
				t.Fatalf("try %d at %v: report %d (%v), want the first one, refused, again", tries, nextCut.Sub(t0), r.Seq, ok)
			}
			w.sync.Unsent(r) // the guard cannot be reached
			tries++
			nextCut = nextCut.Add(interval)
		}
		m, n := c.models[i%models], i/models
		class := failure.None
		if m == c.failing && n > lastOfFailing-5 || n%4 == 2 && !(m == c.failing && n == lastOfFailing-5) {
			class = failure.ServerError
		}
		w.breakers.RecordOutcome(m, at, class)
		c.outcomes[m] = append(c.outcomes[m], at)
		if n%10 == 0 {
			w.holds.Hold(m, at, holdFor)
			c.lastHold[m] = HoldEvent{Scope: m, At: at, For: holdFor}
		}
	}
	if st := w.breakers.State(c.failing, c.end); st != BreakerOpen {
		t.Fatalf("%s's breaker is %s after its last attempts failed, want open", c.failing, st)
	}
	var ok bool
	if c.first, ok = w.sync.CutAt(c.end); !ok || c.first.Seq != 1 || !c.first.At.Equal(t0.Add(interval)) {
		t.Fatalf("the report that failed first is not sent again first: %v, seq %d cut at %v", ok, c.first.Seq, c.first.At.Sub(t0))
	}
	// Due at once: the breaker that opened and the holds are news, and
	// the last report was cut long ago.
	if c.pending, ok = w.sync.CutAt(c.end); !ok || c.pending.Seq != 2 || !c.pending.At.Equal(c.end) {
		t.Fatalf("nothing gathered while the guard was away: %v, seq %d", ok, c.pending.Seq)
	}
	if r, ok := w.sync.CutAt(c.end); ok {
		t.Fatalf("a third report %d due at the same instant, with nothing new", r.Seq)
	}
	return c
}

// reportBound is the most bytes a report of c's worker can take in JSON
// by the bounds Sync keeps: per model its breaker's outcomes, per scope
// (here one per model) a hold; each item at its longest.
func reportBound(c cutOff) int {
	size := func(v any) int {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return len(b) + 1 // and a comma
	}
	at := time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC)
	model := slices.MaxFunc(c.models, func(a, b string) int { return len(a) - len(b) })
	outcome := size(ModelOutcome{Model: model, At: at, Class: failure.ServerError, Trip: true, Ignored: true})
	hold := size(HoldEvent{Scope: model, At: at, For: time.Hour})
	envelope := 512 // field names, brackets, worker, sequence number, instant, leave
	return len(c.models)*(outcomesKept(c.cfg.Breaker)*outcome+hold) + envelope
}

// TestPendingReportStaysBounded: while the guard cannot be reached, the
// report a worker gathers stays within a size its policy fixes, however
// long the guard is away and however busy the worker, and keeps what the
// fleet can use: each model's newest outcomes and each scope's last hold.
// (Unbounded, 16 minutes at 20 attempts a second made a report of 1.7 MB
// here, and past 2 MB Temporal refuses it.)
func TestPendingReportStaysBounded(t *testing.T) {
	cases := []struct {
		name                     string
		models, rate             int
		d                        time.Duration
		mutate                   func(*config.Config)
		maxBytes                 int // the bound computed must be below this
		wantOutcomesKeptPerModel int
	}{
		{name: "16 minutes at 20 attempts a second, four models", models: 4, rate: 20, d: 16 * time.Minute,
			maxBytes: 16 << 10, wantOutcomesKeptPerModel: 20},
		{name: "an hour at 50 attempts a second, one model", models: 1, rate: 50, d: time.Hour,
			maxBytes: 16 << 10, wantOutcomesKeptPerModel: 20},
		{name: "a policy with a 40-call window", models: 4, rate: 40, d: 20 * time.Minute,
			mutate:   func(c *config.Config) { c.Breaker.Window = 40 },
			maxBytes: 32 << 10, wantOutcomesKeptPerModel: 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			c := simulateCutOff(t, cfg, tc.models, tc.rate, tc.d)
			data, err := json.Marshal(c.pending)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := json.Marshal(c.first)
			bound := reportBound(c)
			t.Logf("%d attempts: report %d bytes (bound %d), the first one sent again %d bytes", tc.rate*int(tc.d/time.Second), len(data), bound, len(first))
			if bound >= tc.maxBytes {
				t.Errorf("the computed bound is %d bytes, want under %d", bound, tc.maxBytes)
			}
			if len(data) > bound || len(first) > bound {
				t.Errorf("reports of %d and %d bytes, over the bound of %d", len(data), len(first), bound)
			}

			kept := map[string][]time.Time{}
			for _, o := range c.pending.Outcomes {
				kept[o.Model] = append(kept[o.Model], o.At)
			}
			for _, m := range c.models {
				all := c.outcomes[m]
				want := all[len(all)-tc.wantOutcomesKeptPerModel:]
				if !slices.Equal(kept[m], want) {
					t.Errorf("%s: kept %d outcomes %v … %v, want its newest %d, %v … %v", m, len(kept[m]), firstOf(kept[m]), lastOf(kept[m]), len(want), want[0], want[len(want)-1])
				}
			}

			holds := map[string]HoldEvent{}
			for _, h := range c.pending.Holds {
				if _, twice := holds[h.Scope]; twice {
					t.Errorf("scope %s held twice in one report", h.Scope)
				}
				holds[h.Scope] = h
			}
			if !sameHolds(holds, c.lastHold) {
				t.Errorf("holds %v, want each scope's last %v", holds, c.lastHold)
			}
		})
	}
}

func firstOf(ts []time.Time) time.Time {
	if len(ts) == 0 {
		return time.Time{}
	}
	return ts[0]
}

func lastOf(ts []time.Time) time.Time {
	if len(ts) == 0 {
		return time.Time{}
	}
	return ts[len(ts)-1]
}

func sameHolds(a, b map[string]HoldEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Scope != w.Scope || !v.At.Equal(w.At) || v.For != w.For {
			return false
		}
	}
	return true
}

// TestCutOffWorkerSyncsAgain: once the guard is back, the reports of a
// worker cut off for long are taken and the fleet's view holds what the
// worker saw lately: the breaker its last failures opened, the hold it
// met last, and the worker itself, counted from its newest report. The
// report that failed first is sent as it was (one interval, whatever the
// outage's length), and counts once.
func TestCutOffWorkerSyncsAgain(t *testing.T) {
	cfg := config.DefaultConfig()
	c := simulateCutOff(t, cfg, 4, 20, 16*time.Minute)
	f := NewFleet(cfg.Breaker)
	if !f.Apply(c.first) || !f.Apply(c.pending) {
		t.Fatal("the fleet refused the reports of the worker that was cut off")
	}
	if f.Apply(c.first) || f.Apply(c.pending) {
		t.Error("the fleet applied a report of the worker that was cut off twice")
	}
	if got := f.Latest(); !got.Equal(c.end) {
		t.Errorf("the fleet's latest report is at %v, want the worker's newest, %v", got, c.end)
	}
	v := f.View(c.end)
	if v.Workers != 1 {
		t.Errorf("the fleet counts %d workers, want the one that was cut off", v.Workers)
	}
	if until, open := v.Open[c.failing]; !open || !until.After(c.end) {
		t.Errorf("the fleet's view has %s's breaker open until %v (%v), want open past %v", c.failing, until, open, c.end)
	}
	for _, m := range c.models {
		if m == c.failing {
			continue
		}
		if until, open := v.Open[m]; open {
			t.Errorf("the fleet's view has %s's breaker open until %v; one attempt in four failed, want closed", m, until)
		}
	}
	for _, m := range c.models {
		h := c.lastHold[m]
		if got, want := v.Holds[m], h.At.Add(h.For); !got.Equal(want) {
			t.Errorf("the fleet holds %s until %v, want %v", m, got, want)
		}
	}
}

// TestPendingOutcomesKeepTheNewest: a pending report keeps, per model, the
// newest outcomes as many as the breaker's longest rule reads; those the
// fleet does not judge (ignored) go first.
func TestPendingOutcomesKeepTheNewest(t *testing.T) {
	type run struct {
		model   string
		n       int
		ignored bool
	}
	// want lists, by model, the outcomes kept as their numbers in the
	// order recorded (from 0, across models); "j" judged, "i" ignored.
	cases := []struct {
		name    string
		breaker func(*config.BreakerConfig)
		runs    []run
		want    map[string][]int
	}{
		{name: "under the bound all are kept", runs: []run{{"a", 5, false}},
			want: map[string][]int{"a": seq(0, 5)}},
		{name: "of a thousand the newest 20", runs: []run{{"a", 1000, false}},
			want: map[string][]int{"a": seq(980, 1000)}},
		{name: "ignored outcomes go first", runs: []run{{"a", 30, false}, {"a", 500, true}, {"a", 5, false}},
			want: map[string][]int{"a": append(seq(15, 30), seq(530, 535)...)}},
		{name: "ignored outcomes are kept while there is room", runs: []run{{"a", 10, false}, {"a", 15, true}},
			want: map[string][]int{"a": append(seq(0, 10), seq(15, 25)...)}},
		{name: "each model has its own bound", runs: []run{{"a", 100, false}, {"b", 3, false}, {"a", 10, false}},
			want: map[string][]int{"a": append(seq(90, 100), seq(103, 113)...), "b": seq(100, 103)}},
		{name: "a longer consecutive-failure rule keeps more", breaker: func(b *config.BreakerConfig) { b.ConsecutiveFailures = 30 },
			runs: []run{{"a", 100, false}}, want: map[string][]int{"a": seq(70, 100)}},
		{name: "more probes keep more", breaker: func(b *config.BreakerConfig) { b.Probes = 25 },
			runs: []run{{"a", 100, false}}, want: map[string][]int{"a": seq(75, 100)}},
		{name: "a shorter window keeps fewer", breaker: func(b *config.BreakerConfig) { b.Window, b.MinCalls = 8, 4 },
			runs: []run{{"a", 100, false}}, want: map[string][]int{"a": seq(92, 100)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			if tc.breaker != nil {
				tc.breaker(&cfg.Breaker)
			}
			s := NewSync("w", time.Second)
			s.SetView(View{}, longAgo)
			s.SetView(View{}, longAgo)
			NewBreakerRegistry(cfg.Breaker, nil).SetSync(s)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			i := 0
			for _, r := range tc.runs {
				for range r.n {
					s.outcome(r.model, t0.Add(time.Duration(i)*time.Millisecond), failure.ServerError, false, r.ignored)
					i++
				}
			}
			rep, ok := s.CutAt(t0.Add(time.Hour))
			if !ok {
				t.Fatal("the first report was not cut")
			}
			got := map[string][]int{}
			for _, o := range rep.Outcomes {
				got[o.Model] = append(got[o.Model], int(o.At.Sub(t0)/time.Millisecond))
			}
			for m, want := range tc.want {
				if !slices.Equal(got[m], want) {
					t.Errorf("%s: kept %v, want %v", m, got[m], want)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("models %v kept, want %v", got, tc.want)
			}
		})
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// TestPendingHoldsKeepTheLast: a pending report keeps each scope's hold
// that ends last, so the fleet then holds the scope as long as from every
// hold.
func TestPendingHoldsKeepTheLast(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewSync("w", time.Second)
	s.SetView(View{}, longAgo)
	holds := []HoldEvent{
		{Scope: "a", At: t0, For: 2 * time.Second},
		{Scope: "a", At: t0.Add(time.Second), For: 30 * time.Second}, // ends last
		{Scope: "a", At: t0.Add(10 * time.Second), For: 5 * time.Second},
		{Scope: "b", At: t0, For: 3 * time.Second},
		{Scope: "b", At: t0.Add(40 * time.Second), For: 3 * time.Second}, // after a break: ends last
		{Scope: "c", At: t0, For: 4 * time.Second},
		{Scope: "c", At: t0.Add(time.Second), For: 3 * time.Second}, // ends with the first: the later is kept
	}
	all := NewFleet(cfg.Breaker)
	for i, h := range holds {
		s.hold(h.Scope, h.At, h.For)
		all.Apply(Report{Worker: "every hold", Seq: int64(i + 1), Holds: []HoldEvent{h}})
	}
	rep, ok := s.CutAt(t0.Add(95 * time.Second))
	if !ok || rep.Seq != 1 {
		t.Fatalf("the first report: %v, seq %d; want it cut as 1", ok, rep.Seq)
	}

	want := []HoldEvent{holds[1], holds[4], holds[6]}
	if !slices.Equal(rep.Holds, want) {
		t.Errorf("holds %v, want %v", rep.Holds, want)
	}
	kept := NewFleet(cfg.Breaker)
	kept.Apply(rep)
	for _, at := range []time.Duration{0, 5 * time.Second, 20 * time.Second, 41 * time.Second, 50 * time.Second} {
		now := t0.Add(at)
		if got, want := kept.View(now).Holds, all.View(now).Holds; !sameInstants(got, want) {
			t.Errorf("at +%v the kept holds hold %v, every hold %v", at, got, want)
		}
	}
}

func sameInstants(a, b map[string]time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !v.Equal(w) {
			return false
		}
	}
	return true
}

// TestReportCadence: a worker reports when it has something the fleet
// needs soon, and otherwise rarely. Its first cut announces it (empty or
// not); an outcome without news waits ReportEvery(workers) after the last
// report; news goes out at the next cut: a breaker of this worker that
// opened or closed on its own outcomes (not one that took the fleet's
// view), a hold the fleet's fresh view does not hold for at least half
// its length; a worker with nothing to say sends an empty report every
// WorkerLease/3 so the fleet keeps counting it; Leave cuts a last report
// that says it is leaving.
func TestReportCadence(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Breaker.ConsecutiveFailures, cfg.Breaker.OpenFor = 5, config.Duration(time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const model, other, ep = "qwen-72b", "llama-8b", "http://up:8000"
	w := newSilentWorker("w", cfg)
	f := NewFleet(cfg.Breaker)
	var seq int64
	// due cuts at now and wants a report, the next by number.
	due := func(now time.Time, why string) Report {
		t.Helper()
		r, ok := w.sync.CutAt(now)
		if !ok {
			t.Fatalf("+%v: no report cut; want one: %s", now.Sub(t0), why)
		}
		seq++
		if r.Seq != seq || r.Worker != "w" || !r.At.Equal(now) || r.Leave {
			t.Fatalf("+%v: report %+v; want number %d from w cut then, not leaving (%s)", now.Sub(t0), r, seq, why)
		}
		return r
	}
	notDue := func(now time.Time, why string) {
		t.Helper()
		if r, ok := w.sync.CutAt(now); ok {
			t.Fatalf("+%v: report %d cut (%d outcomes, %d holds); want none: %s", now.Sub(t0), r.Seq, len(r.Outcomes), len(r.Holds), why)
		}
	}

	// Before its first view the worker does not know the fleet's size:
	// it says nothing. Its view says 30: it announces itself at its own
	// point of ReportEvery(31), so that 31 workers started at once are
	// heard at the routine rate, not all in one second.
	notDue(t0, "no view yet")
	w.sync.SetView(View{At: t0, Workers: 30}, t0)
	if got, want := ReportEvery(w.sync.Workers()), 3*time.Second; w.sync.Workers() != 30 || got != want {
		t.Fatalf("a fleet of %d reports every %v, want 30 and %v", w.sync.Workers(), got, want)
	}
	announce := t0.Add(time.Duration(spreadOf("w", 0) * float64(ReportEvery(31))))
	if announce.After(t0) {
		notDue(announce.Add(-time.Millisecond), "before its point of ReportEvery(31)")
	}
	hello := due(announce, "the first cut announces the worker")
	if !hello.Empty() {
		t.Errorf("the first report carries %+v, want nothing", hello)
	}
	notDue(announce.Add(100*time.Millisecond), "nothing to say")

	// A fleet of 30: a routine report every 3 s.
	base := announce
	at = func(d time.Duration) time.Time { return base.Add(d) }
	last := base
	w.breakers.RecordOutcome(model, at(time.Second), failure.None)
	notDue(at(time.Second), "an outcome that is no news waits")
	notDue(last.Add(3*time.Second-time.Millisecond), "an outcome that is no news waits ReportEvery")
	last = at(3 * time.Second)
	if r := due(last, "ReportEvery has passed with an outcome"); len(r.Outcomes) != 1 {
		t.Errorf("the routine report carries %d outcomes, want 1", len(r.Outcomes))
	}

	// News: the fifth failure in a row opens this worker's breaker, and
	// the report goes out at once.
	t1 := at(4 * time.Second)
	for range 4 {
		w.breakers.RecordOutcome(model, t1, failure.ServerError)
	}
	notDue(t1, "four failures open nothing")
	w.breakers.RecordOutcome(model, t1, failure.ServerError)
	if st := w.breakers.State(model, t1); st != BreakerOpen {
		t.Fatalf("the breaker is %s after 5 failures in a row, want open", st)
	}
	if r := due(t1, "the breaker opened on this worker's outcomes"); len(r.Outcomes) != 5 {
		t.Errorf("the report of the opening carries %d outcomes, want the 5 failures", len(r.Outcomes))
	}
	notDue(t1, "the news went out")
	last = t1

	// Its trials close it: news again (half-opening is not).
	trials := t1.Add(cfg.Breaker.OpenFor.D())
	for i := 0; w.breakers.State(model, trials) != BreakerClosed; i++ {
		if i == 20 {
			t.Fatal("20 good trials did not close the breaker")
		}
		if !w.breakers.Allow(model, trials) {
			t.Fatalf("trial %d refused", i+1)
		}
		if st := w.breakers.State(model, trials); st != BreakerHalfOpen {
			t.Fatalf("before trial %d the breaker is %s, want half_open", i+1, st)
		}
		notDue(trials, "half-open is no news")
		w.breakers.RecordOutcome(model, trials, failure.None)
	}
	due(trials, "the breaker closed on this worker's trials")
	last = trials

	// A breaker opened by the fleet's view is the fleet's news, not this
	// worker's: nothing to report. Nor when the fleet's trials close it.
	t2 := last.Add(500 * time.Millisecond)
	w.sync.SetView(View{At: t2, Open: map[string]time.Time{other: t2.Add(time.Second)}, Workers: 30}, t2)
	if w.breakers.State(other, t2) != BreakerOpen || w.breakers.Allow(other, t2) {
		t.Fatal("the fleet's open breaker does not refuse here")
	}
	if st := w.breakers.Breaker(other).State(t2); st != BreakerOpen {
		t.Fatalf("the local breaker is %s, want open: it took the fleet's view", st)
	}
	notDue(t2, "the breaker opened by the fleet's view is no news")
	t3 := t2.Add(time.Second)
	w.sync.SetView(View{At: t3, Breakers: map[string]BreakerView{other: {Closed: t3}}, Workers: 30}, t3)
	if st := w.breakers.State(other, t3); st != BreakerClosed {
		t.Fatalf("the local breaker is %s after the fleet's trials closed it, want closed", st)
	}
	notDue(t3, "the breaker closed by the fleet's view is no news")

	// A hold the fresh view holds for at least half its length is no
	// news; a longer one is, and so is a scope the view does not hold,
	// and any hold once the view is stale.
	t4 := t3.Add(100 * time.Millisecond)
	w.sync.SetView(View{At: t4, Holds: map[string]time.Time{ep: t4.Add(5 * time.Second)}, Workers: 30}, t4)
	w.holds.Hold(ep, t4, 10*time.Second)
	notDue(t4, "the fleet holds the scope for half the hold")
	w.holds.Hold(ep, t4, 12*time.Second)
	if r := due(t4, "the fleet holds the scope for less than half the hold"); len(r.Holds) != 1 || r.Holds[0].For != 12*time.Second {
		t.Errorf("the report's holds are %+v, want the one that ends last", r.Holds)
	}
	w.holds.Hold("http://other:8000", t4.Add(500*time.Millisecond), time.Second)
	due(t4.Add(500*time.Millisecond), "a scope the fleet does not hold")
	stale := t4.Add(2 * time.Second) // the view is a second old at most to be used
	w.holds.Hold(ep, stale, 2*time.Second)
	last = due(stale, "a hold with a stale view").At

	// Nothing to say: a keep-alive every KeepAlive(30), 20 s.
	notDue(last.Add(KeepAlive(30)-time.Millisecond), "silent for less than KeepAlive")
	if r := due(last.Add(KeepAlive(30)), "the keep-alive"); !r.Empty() {
		t.Errorf("the keep-alive carries %+v, want nothing", r)
	}
	last = last.Add(KeepAlive(30))

	// The fleet counts the worker from its first report until it leaves.
	if !f.Apply(hello) {
		t.Fatal("the fleet refused the first report")
	}
	w.breakers.RecordOutcome(model, last.Add(time.Second), failure.None)
	bye := w.sync.Leave(last.Add(2 * time.Second))
	if seq++; bye.Seq != seq || !bye.Leave || len(bye.Outcomes) != 1 {
		t.Errorf("the last report %+v: want number %d, leaving, with the pending outcome", bye, seq)
	}
	if got := f.View(t0).Workers; got != 1 {
		t.Errorf("the fleet counts %d workers after the first report, want 1", got)
	}
	f.Apply(bye)
	if got := f.View(bye.At).Workers; got != 0 {
		t.Errorf("the fleet counts %d workers after the worker left, want 0", got)
	}
}

// TestNewsOnlyWhileTheFleetDoesNotKnow: a breaker this worker opens on its
// own failures is news while the fleet's fresh view does not have it
// open, and no news once it does (a fleet of a hundred whose workers all
// trip on the same outage reports it once each at most, not a hundred
// times a second); likewise a close the fleet's view already shows (not
// while the fleet has the breaker half-open).
func TestNewsOnlyWhileTheFleetDoesNotKnow(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWorker("w", cfg)
	if _, ok := w.sync.CutAt(t0); !ok {
		t.Fatal("the worker did not announce itself")
	}
	const model = "qwen-72b"
	w.sync.SetView(View{Open: map[string]time.Time{model: t0.Add(10 * time.Second)}, Workers: 100}, t0)
	w.breakers.Breaker(model) // closed here: the view has not been laid over it yet
	for range cfg.Breaker.ConsecutiveFailures {
		w.breakers.Record(model, t0, false)
	}
	if r, ok := w.sync.CutAt(t0); ok {
		t.Errorf("report %d cut for a breaker the fleet has open", r.Seq)
	}
	// A view that does not have it open: this worker's trip is news.
	w2 := newWorker("w2", cfg)
	w2.sync.CutAt(t0)
	w2.sync.SetView(View{Workers: 100}, t0)
	for range cfg.Breaker.ConsecutiveFailures {
		w2.breakers.Record(model, t0, false)
	}
	if _, ok := w2.sync.CutAt(t0); !ok {
		t.Error("a trip the fleet does not know was not reported at once")
	}
	// A close on this worker's own trials is news while the fleet's view
	// has the breaker half-open, none when it has it closed.
	for _, tt := range []struct {
		name string
		view View
		news bool
	}{
		{"half-open in the fleet", View{Breakers: map[string]BreakerView{model: {HalfOpen: true}}, Workers: 100}, true},
		{"closed in the fleet", View{Workers: 100}, false},
	} {
		w := newWorker("w-"+tt.name, cfg)
		w.sync.CutAt(t0)
		w.breakers.Trip(model, t0)
		if _, ok := w.sync.CutAt(t0); !ok {
			t.Fatalf("%s: the trip was not reported", tt.name)
		}
		t1 := t0.Add(cfg.Breaker.OpenFor.D())
		w.sync.SetView(tt.view, t1)
		for i := range cfg.Breaker.Probes {
			if !w.breakers.Allow(model, t1) {
				t.Fatalf("%s: trial %d refused", tt.name, i+1)
			}
			w.breakers.RecordOutcome(model, t1, failure.None)
		}
		if st := w.breakers.State(model, t1); st != BreakerClosed {
			t.Fatalf("%s: the breaker is %s after %d good trials, want closed", tt.name, st, cfg.Breaker.Probes)
		}
		if _, ok := w.sync.CutAt(t1); ok != tt.news {
			t.Errorf("%s: a close on this worker's trials cut a report: %v, want %v", tt.name, ok, tt.news)
		}
	}
}

// TestATrialTheFleetWaitsForIsNews: a success on a model whose breaker
// the fleet's view has half-open (or open) is news, reported at once: the
// fleet closes its breaker on such trials, and before it does every
// worker keeps the model shut. A routine report (ReportEvery: 30 s in a
// fleet of 300) left the fleet's breaker half-open for as long. A success
// the fleet's closed breaker does not wait for is routine.
func TestATrialTheFleetWaitsForIsNews(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const model = "qwen-72b"
	for _, tt := range []struct {
		name string
		view View
		news bool
	}{
		{"half-open in the fleet", View{Breakers: map[string]BreakerView{model: {HalfOpen: true}}, Workers: 300}, true},
		{"open in the fleet", View{Open: map[string]time.Time{model: t0.Add(time.Second)}, Workers: 300}, true},
		{"closed in the fleet", View{Workers: 300}, false},
	} {
		w := newWorker("w-"+tt.name, cfg)
		if _, ok := w.sync.CutAt(t0); !ok {
			t.Fatalf("%s: the worker did not announce itself", tt.name)
		}
		w.sync.SetView(tt.view, t0)
		w.breakers.RecordOutcome(model, t0, failure.None)
		if _, ok := w.sync.CutAt(t0); ok != tt.news {
			t.Errorf("%s: one success cut a report: %v, want %v", tt.name, ok, tt.news)
		}
	}
}

// TestReadEveryBoundsTheFleetsReads: up to 100 workers each reads the
// view every 500 ms; beyond, less often, so that the fleet's reads stay
// at 200 a second; and a view two reads old is still fresh at that size.
func TestReadEveryBoundsTheFleetsReads(t *testing.T) {
	floor := 500 * time.Millisecond
	for _, n := range []int{1, 3, 100, 300, 1000} {
		every := ReadEvery(n, floor)
		if n <= 100 && every != floor {
			t.Errorf("%d workers read every %v, want %v", n, every, floor)
		}
		if perSecond := float64(n) / every.Seconds(); perSecond > fleetReadsPerSecond+1e-9 {
			t.Errorf("%d workers read %.0f times a second, want ≤ %d", n, perSecond, fleetReadsPerSecond)
		}
	}
	s := NewSync("w", 2*time.Second)
	now := time.Now()
	s.SetView(View{Workers: 1000}, now)
	if !s.fresh(now.Add(9 * time.Second)) {
		t.Error("a view 9 s old at 1,000 workers (a read every 5 s) is stale")
	}
	if s.fresh(now.Add(11 * time.Second)) {
		t.Error("a view 11 s old at 1,000 workers is still fresh")
	}
}
