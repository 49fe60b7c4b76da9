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
	models, eps    []string
	end            time.Time
	first, pending Report
	// outcomes are the instants of every outcome recorded, by model,
	// oldest first (all counted by the worker's breaker).
	outcomes map[string][]time.Time
	// requests and retries are, by endpoint, those recorded within the
	// budget's window at end.
	requests, retries map[string]int
	// lastHold is, by scope, the last rate limit recorded.
	lastHold map[string]HoldEvent
	// failing is the model whose last attempts failed in a row (its
	// breaker opened at the last).
	failing string
}

// holdFor is how long each simulated rate limit holds its model.
const holdFor = 5 * time.Second

// simulateCutOff runs a worker for d at rate attempts a second spread over
// models (model i on endpoint i mod endpoints) while every report it sends
// fails: each attempt is a request (every tenth also a retry), one in four
// fails except for the last five attempts of the first model, which all
// fail; each model is rate limited every tenth attempt and records each
// attempt's time to first token.
func simulateCutOff(t *testing.T, cfg *config.Config, models, endpoints, rate int, d time.Duration) cutOff {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	step := time.Second / time.Duration(rate)
	total := int(d / step)
	c := cutOff{cfg: cfg, end: t0.Add(time.Duration(total-1) * step), outcomes: map[string][]time.Time{}, requests: map[string]int{}, retries: map[string]int{}, lastHold: map[string]HoldEvent{}}
	for i := range models {
		c.models = append(c.models, fmt.Sprintf("qwen2.5-72b-instruct-%d", i))
	}
	for i := range endpoints {
		c.eps = append(c.eps, fmt.Sprintf("https://upstream-%d.inference.example.com:8443", i))
	}
	c.failing = c.models[0]
	w := newWorker("w-cut-off", cfg)
	const interval = 500 * time.Millisecond
	lastOfFailing := (total - 1) / models // the first model's attempts are numbered 0..lastOfFailing
	window := cfg.Budget.Window.D()
	nextCut := t0.Add(interval)
	for i := range total {
		at := t0.Add(time.Duration(i) * step)
		for !at.Before(nextCut) {
			if r, ok := w.sync.CutAt(nextCut); ok {
				w.sync.Unsent(r) // the guard cannot be reached
			}
			nextCut = nextCut.Add(interval)
		}
		m, n := c.models[i%models], i/models
		ep := c.eps[(i%models)%endpoints]
		inWindow := c.end.Sub(at.Truncate(time.Second)) < window
		b := w.budgets.For(ep)
		b.RecordRequest(at)
		if inWindow {
			c.requests[ep]++
		}
		if n%10 == 0 && b.TryRetry(at) && inWindow {
			c.retries[ep]++
		}
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
		w.sync.FirstToken(m, 300*time.Millisecond+time.Duration(n%1000)*time.Millisecond)
	}
	if st := w.breakers.State(c.failing, c.end); st != BreakerOpen {
		t.Fatalf("%s's breaker is %s after its last attempts failed, want open", c.failing, st)
	}
	var ok bool
	if c.first, ok = w.sync.CutAt(c.end); !ok || c.first.Seq != 1 {
		t.Fatalf("the report that failed first is not sent again first: %v, seq %d", ok, c.first.Seq)
	}
	if c.pending, ok = w.sync.CutAt(c.end); !ok || c.pending.Seq != 2 {
		t.Fatalf("nothing gathered while the guard was away: %v, seq %d", ok, c.pending.Seq)
	}
	return c
}

// reportBound is the most bytes a report of c's worker can take in JSON
// by the bounds Sync keeps: per model its breaker's outcomes and the
// fleet's times to first token, per endpoint a count for each second of
// the budget's window, per scope (here one per model) a hold; each item
// at its longest.
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
	ep := slices.MaxFunc(c.eps, func(a, b string) int { return len(a) - len(b) })
	outcome := size(ModelOutcome{Model: model, At: at, Class: failure.ServerError, Trip: true, Ignored: true})
	count := size(BudgetCount{Endpoint: ep, At: at, Requests: 1 << 30, Retries: 1 << 30})
	hold := size(HoldEvent{Scope: model, At: at, For: time.Hour})
	firstToken := size(time.Duration(1 << 40)) // ~18 minutes: longer than any time to first token
	seconds := int(c.cfg.Budget.Window.D()/time.Second) + 1
	envelope := 512 // field names, brackets, worker and sequence number
	return len(c.models)*(outcomesKept(c.cfg.Breaker)*outcome+FirstTokenSamples*firstToken+len(model)+8+hold) +
		len(c.eps)*seconds*count + envelope
}

// TestPendingReportStaysBounded: while the guard cannot be reached, the
// report a worker gathers stays within a size its policy fixes, however
// long the guard is away and however busy the worker, and keeps what the
// fleet can use: each model's newest outcomes, the counts of the budget's
// window, each scope's last hold. (Unbounded, 16 minutes at 20 attempts a
// second made a report of 1.7 MB here, and past 2 MB Temporal refuses it.)
func TestPendingReportStaysBounded(t *testing.T) {
	cases := []struct {
		name                     string
		models, endpoints, rate  int
		d                        time.Duration
		mutate                   func(*config.Config)
		maxBytes                 int // the bound computed must be below this
		wantOutcomesKeptPerModel int
	}{
		{name: "16 minutes at 20 attempts a second, four models on two endpoints", models: 4, endpoints: 2, rate: 20, d: 16 * time.Minute,
			maxBytes: 40 << 10, wantOutcomesKeptPerModel: 20},
		{name: "an hour at 50 attempts a second, one model", models: 1, endpoints: 1, rate: 50, d: time.Hour,
			maxBytes: 40 << 10, wantOutcomesKeptPerModel: 20},
		{name: "a policy with a 40-call window and a 5-minute budget window", models: 4, endpoints: 4, rate: 40, d: 20 * time.Minute,
			mutate: func(c *config.Config) {
				c.Breaker.Window, c.Budget.Window = 40, config.Duration(5*time.Minute)
			},
			maxBytes: 256 << 10, wantOutcomesKeptPerModel: 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			c := simulateCutOff(t, cfg, tc.models, tc.endpoints, tc.rate, tc.d)
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

			requests, retries, stale := map[string]int{}, map[string]int{}, 0
			for _, bc := range c.pending.Budget {
				if c.end.Sub(bc.At) >= cfg.Budget.Window.D() {
					stale++
				}
				requests[bc.Endpoint] += bc.Requests
				retries[bc.Endpoint] += bc.Retries
			}
			if stale > 0 {
				t.Errorf("%d counts older than the budget's window at %v", stale, c.end)
			}
			for _, ep := range c.eps {
				if requests[ep] != c.requests[ep] || retries[ep] != c.retries[ep] {
					t.Errorf("%s: %d requests and %d retries reported, want the window's %d and %d", ep, requests[ep], retries[ep], c.requests[ep], c.retries[ep])
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
			for m, ds := range c.pending.FirstTokens {
				if len(ds) != FirstTokenSamples {
					t.Errorf("%s: %d times to first token, want the newest %d", m, len(ds), FirstTokenSamples)
				}
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
// met last, the budget's window of requests and retries. Another worker
// reported all along, so the fleet's budget counts an instant before its
// window in its newest second: had the worker sent everything since the
// guard went away, the fleet would count 16 minutes of requests as now's.
// The report that failed first is sent as it was (one interval, whatever
// the outage's length), and counts so.
func TestCutOffWorkerSyncsAgain(t *testing.T) {
	cfg := config.DefaultConfig()
	c := simulateCutOff(t, cfg, 4, 2, 20, 16*time.Minute)
	f := NewFleet(cfg.Budget, cfg.Breaker)
	other := Report{Worker: "w-other", Seq: 1}
	for _, ep := range c.eps {
		other.Budget = append(other.Budget, BudgetCount{Endpoint: ep, At: c.end.Truncate(time.Second), Requests: 1})
	}
	f.Apply(other)
	if !f.Apply(c.first) || !f.Apply(c.pending) {
		t.Fatal("the fleet refused the reports of the worker that was cut off")
	}
	v := f.View(c.end)
	if got := v.Acks["w-cut-off"]; got != c.pending.Seq {
		t.Errorf("the fleet acknowledges report %d, want %d", got, c.pending.Seq)
	}
	if until, open := v.Open[c.failing]; !open || !until.After(c.end) {
		t.Errorf("the fleet's view has %s's breaker open until %v (%v), want open past %v", c.failing, until, open, c.end)
	}
	for _, m := range c.models {
		h := c.lastHold[m]
		if got, want := v.Holds[m], h.At.Add(h.For); !got.Equal(want) {
			t.Errorf("the fleet holds %s until %v, want %v", m, got, want)
		}
	}
	for _, ep := range c.eps {
		wantReq, wantRet := c.requests[ep]+1, c.retries[ep]
		for _, bc := range c.first.Budget {
			if bc.Endpoint == ep {
				wantReq, wantRet = wantReq+bc.Requests, wantRet+bc.Retries
			}
		}
		if got := v.Budgets[ep]; got.Requests != wantReq || got.Retries != wantRet {
			t.Errorf("%s: the fleet counts %d requests and %d retries, want the window's %d and %d", ep, got.Requests, got.Retries, wantReq, wantRet)
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
			s := NewSync("w", time.Second, cfg.Budget)
			NewBreakerRegistry(cfg.Breaker, nil).SetSync(s)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			i := 0
			for _, r := range tc.runs {
				for range r.n {
					s.outcome(r.model, t0.Add(time.Duration(i)*time.Millisecond), failure.ServerError, false, r.ignored)
					i++
				}
			}
			rep, _ := s.CutAt(t0.Add(time.Hour))
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

// TestPendingHoldsAndCounts: a pending report keeps each scope's hold that
// ends last (the fleet then holds the scope as long as from every hold)
// and the budget's counts of its window at the latest count (of any
// endpoint).
func TestPendingHoldsAndCounts(t *testing.T) {
	cfg := config.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewSync("w", time.Second, cfg.Budget)
	holds := []HoldEvent{
		{Scope: "a", At: t0, For: 2 * time.Second},
		{Scope: "a", At: t0.Add(time.Second), For: 30 * time.Second}, // ends last
		{Scope: "a", At: t0.Add(10 * time.Second), For: 5 * time.Second},
		{Scope: "b", At: t0, For: 3 * time.Second},
		{Scope: "b", At: t0.Add(40 * time.Second), For: 3 * time.Second}, // after a break: ends last
		{Scope: "c", At: t0, For: 4 * time.Second},
		{Scope: "c", At: t0.Add(time.Second), For: 3 * time.Second}, // ends with the first: the later is kept
	}
	all := NewFleet(cfg.Budget, cfg.Breaker)
	for i, h := range holds {
		s.hold(h.Scope, h.At, h.For)
		all.Apply(Report{Worker: "every hold", Seq: int64(i + 1), Holds: []HoldEvent{h}})
	}
	s.count("e", t0, 1, 0)
	s.count("e", t0.Add(30*time.Second), 2, 1)
	s.count("e", t0.Add(59*time.Second+500*time.Millisecond), 3, 0)
	s.count("e", t0.Add(61*time.Second), 4, 0) // t0's count leaves the window
	s.count("f", t0.Add(95*time.Second), 1, 0) // and the one at 30 s
	rep, _ := s.CutAt(t0.Add(95 * time.Second))

	want := []HoldEvent{holds[1], holds[4], holds[6]}
	if !slices.Equal(rep.Holds, want) {
		t.Errorf("holds %v, want %v", rep.Holds, want)
	}
	kept := NewFleet(cfg.Budget, cfg.Breaker)
	kept.Apply(rep)
	for _, at := range []time.Duration{0, 5 * time.Second, 20 * time.Second, 41 * time.Second, 50 * time.Second} {
		now := t0.Add(at)
		if got, want := kept.View(now).Holds, all.View(now).Holds; !sameInstants(got, want) {
			t.Errorf("at +%v the kept holds hold %v, every hold %v", at, got, want)
		}
	}
	wantCounts := []BudgetCount{
		{Endpoint: "e", At: t0.Add(59 * time.Second), Requests: 3},
		{Endpoint: "e", At: t0.Add(61 * time.Second), Requests: 4},
		{Endpoint: "f", At: t0.Add(95 * time.Second), Requests: 1},
	}
	if !slices.Equal(rep.Budget, wantCounts) {
		t.Errorf("counts %v, want those of the window at the last count %v", rep.Budget, wantCounts)
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
