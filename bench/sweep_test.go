package bench

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/workflows"
)

// testParams are fixed policy numbers, so that a change of the default
// policy does not change what these tests check.
func testParams(deadline time.Duration) SweepParams {
	return SweepParams{Deadline: deadline, FallbackReserve: 2 * time.Second, FirstTokenTimeout: 8 * time.Second,
		BudgetRatio: 0.1, BudgetFloor: 10, BudgetWindow: time.Minute}
}

func TestSweepIsDeterministicPerSeed(t *testing.T) {
	p := testParams(20 * time.Second)
	a, b := GenerateSweep(1, 0, 31, p), GenerateSweep(1, 0, 31, p)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew different shapes")
	}
	for i := range a {
		sa, _ := json.Marshal(a[i].Scenario())
		sb, _ := json.Marshal(b[i].Scenario())
		if string(sa) != string(sb) {
			t.Errorf("shape %d: the same seed made different scenarios", i)
		}
	}
	// A part draws the same shapes as the whole sweep.
	if part := GenerateSweep(1, 8, 15, p); !reflect.DeepEqual(part, a[8:16]) {
		t.Error("shapes 8..15 drawn alone differ from the same shapes of the whole sweep")
	}
	other := GenerateSweep(2, 0, 31, p)
	same := 0
	for i := range a {
		a2, o2 := a[i], other[i]
		a2.Seed, o2.Seed = 0, 0
		if reflect.DeepEqual(a2, o2) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("seeds 1 and 2 drew %d identical shapes", same)
	}
	// The drawn parameters take more than one value each.
	workers, endpoints, stops, faults := map[int]bool{}, map[int]bool{}, map[bool]bool{}, map[SweepFault]bool{}
	for _, s := range a {
		workers[s.Workers], endpoints[s.Endpoints], stops[s.StopsOnDisconnect], faults[s.Fault] = true, true, true, true
	}
	if len(workers) != 2 || len(endpoints) != 2 || len(stops) != 2 || len(faults) != len(SweepFaults) {
		t.Errorf("32 shapes drew workers %v, endpoints %v, stops-on-disconnect %v, %d faults", workers, endpoints, stops, len(faults))
	}
}

func TestSweepIsEvenByFault(t *testing.T) {
	p := testParams(20 * time.Second)
	for seed := uint64(1); seed <= 20; seed++ {
		for _, n := range []int{30, 32, 37} {
			count := map[SweepFault]int{}
			for _, s := range GenerateSweep(seed, 0, n-1, p) {
				count[s.Fault]++
			}
			lo, hi := n, 0
			for _, f := range SweepFaults {
				lo, hi = min(lo, count[f]), max(hi, count[f])
			}
			if len(count) != len(SweepFaults) || hi-lo > 1 {
				t.Errorf("seed %d, %d shapes: faults %v, not even", seed, n, count)
			}
		}
	}
}

// TestSweepIncidentsStartFortyCalls counts, on each shape's storm case,
// the calls the open loop starts in the incident.
func TestSweepIncidentsStartFortyCalls(t *testing.T) {
	p := testParams(20 * time.Second)
	for seed := uint64(1); seed <= 20; seed++ {
		for _, s := range GenerateSweep(seed, 0, 31, p) {
			c, err := s.Case()
			if err != nil {
				t.Fatalf("shape %s: %v", s.Name(), err)
			}
			if c.IncidentEnd-c.IncidentStart != s.Incident {
				t.Errorf("shape %s: case's incident %s, shape's %s", s.Name(), c.IncidentEnd-c.IncidentStart, s.Incident)
			}
			n := int(c.Rate * c.Duration.Seconds())
			interval := time.Duration(float64(time.Second) / c.Rate)
			in := 0
			for i := range n {
				if at := time.Duration(i) * interval; at >= c.IncidentStart && at < c.IncidentEnd {
					in++
				}
			}
			if in < SweepMinIncidentCalls {
				t.Errorf("shape %s (%s): %d calls start in the incident", s.Name(), s.Describe(), in)
			}
			if c.Rate > sweepMaxRate+0.05 && in > SweepMinIncidentCalls+int(c.Rate) {
				t.Errorf("shape %s: rate %.1f above the cap without need", s.Name(), c.Rate)
			}
		}
	}
}

// TestSweepSlowFirstByteBeforeTheReserve reads the scenario itself: the
// slowest first byte (the model's cap plus the fault's cap) comes before
// the deadline minus the fallback reserve.
func TestSweepSlowFirstByteBeforeTheReserve(t *testing.T) {
	for _, deadline := range []time.Duration{10 * time.Second, 20 * time.Second, 60 * time.Second} {
		p := testParams(deadline)
		bound := deadline - p.FallbackReserve
		slow := 0
		for seed := uint64(1); seed <= 20; seed++ {
			for _, s := range GenerateSweep(seed, 0, 31, p) {
				if s.Fault != SweepSlowFirstByte {
					continue
				}
				slow++
				sc := s.Scenario()
				var extra llmsim.Latency
				for _, ph := range sc.Phases {
					for _, f := range ph.Faults {
						if f.Kind == llmsim.FaultLatency {
							extra = f.Latency
						}
					}
				}
				var model time.Duration
				for _, m := range sc.Models {
					model = max(model, m.Latency.Max.D())
				}
				worst := model + extra.Max.D()
				if extra.Max == 0 || worst >= bound {
					t.Errorf("deadline %s, shape %s: first byte up to %s + %s, not below %s", deadline, s.Name(), model, extra.Max, bound)
				}
				if extra.Median.D() <= 0 || extra.Median > extra.Max {
					t.Errorf("shape %s: median %s, cap %s", s.Name(), extra.Median, extra.Max)
				}
			}
		}
		if slow == 0 {
			t.Fatal("no slow first byte drawn")
		}
	}
}

// TestSweepScenarios checks each fault becomes the llmsim fault it names,
// on the endpoints it names, and each shape's contenders.
func TestSweepScenarios(t *testing.T) {
	want := map[SweepFault]llmsim.Fault{SweepHangLost: llmsim.FaultHang, SweepHangServed: llmsim.FaultPause,
		SweepSlowFirstByte: llmsim.FaultLatency, SweepRateLimited: llmsim.FaultRateLimited, SweepBusy: llmsim.FaultQueueFull,
		SweepBadGateway: llmsim.FaultBadGateway, SweepResetMidStream: llmsim.FaultCutStream}
	for _, s := range GenerateSweep(3, 0, 31, testParams(20*time.Second)) {
		sc := s.Scenario()
		if err := sc.Validate(); err != nil {
			t.Fatalf("shape %s: %v", s.Name(), err)
		}
		if *sc.ContinueOnDisconnect == s.StopsOnDisconnect {
			t.Errorf("shape %s: continue_on_disconnect %v, stops %v", s.Name(), *sc.ContinueOnDisconnect, s.StopsOnDisconnect)
		}
		var kinds []llmsim.FaultSpec
		for _, ph := range sc.Phases {
			kinds = append(kinds, ph.Faults...)
		}
		for _, f := range kinds {
			if s.Fault != SweepFlapping && f.Kind != want[s.Fault] {
				t.Errorf("shape %s (%s) injects %s", s.Name(), s.Fault, f.Kind)
			}
			if f.Kind == llmsim.FaultQueueFull && f.Status != 503 {
				t.Errorf("shape %s: busy answers %d", s.Name(), f.Status)
			}
			if (s.Endpoints == 2) != (f.Model == llmsim.ModelQwen72B) {
				t.Errorf("shape %s: %d endpoints, fault on model %q", s.Name(), s.Endpoints, f.Model)
			}
		}
		if s.Fault == SweepFlapping && len(kinds) != s.FlapCycles {
			t.Errorf("shape %s: %d down windows, want %d", s.Name(), len(kinds), s.FlapCycles)
		}
		c, _ := s.Case()
		if (len(c.SecondEndpoint) > 0) != (s.Endpoints == 2) || !c.PerRequest {
			t.Errorf("shape %s: case %+v", s.Name(), c)
		}
		durable := s.Contenders()[2]
		if (durable == KeyDurable3) != (s.Workers == 3) {
			t.Errorf("shape %s: %d workers, contender %s", s.Name(), s.Workers, durable)
		}
	}
}

func TestBinomialMargin(t *testing.T) {
	for _, c := range []struct {
		n, a, b int
		want    float64
	}{
		{100, 50, 50, 1.6448536 * math.Sqrt(50)}, // p = 0.5: √(2·100·0.25)
		{100, 100, 100, 0},
		{100, 0, 0, 0},
		{200, 180, 180, 1.6448536 * math.Sqrt(2*200*0.9*0.1)},
		{0, 0, 0, 0},
	} {
		if got := BinomialMargin(c.n, c.a, c.b); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("BinomialMargin(%d, %d, %d) = %.4f, want %.4f", c.n, c.a, c.b, got, c.want)
		}
	}
	if BinomialMargin(100, 90, 80) != BinomialMargin(100, 80, 90) {
		t.Error("the margin depends on which count comes first")
	}
}

func TestAmplificationBound(t *testing.T) {
	for _, c := range []struct {
		incident time.Duration
		calls    int
		want     float64
	}{
		{10 * time.Second, 100, 1.2}, // 1 + 0.1 + 10·1/100
		{60 * time.Second, 100, 1.2}, // one window exactly
		{61 * time.Second, 100, 1.3}, // two windows
		{30 * time.Second, 40, 1.35}, // 1 + 0.1 + 10/40
		{130 * time.Second, 50, 1.7}, // three windows: 1 + 0.1 + 30/50
	} {
		if got := AmplificationBound(0.1, 10, 1, time.Minute, c.incident, c.calls); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("bound(%s, %d calls) = %v, want %v", c.incident, c.calls, got, c.want)
		}
	}
	// Two endpoints, two budgets: each brings its floor.
	if got := AmplificationBound(0.1, 10, 2, time.Minute, 10*time.Second, 100); math.Abs(got-1.3) > 1e-9 {
		t.Errorf("bound over two endpoints = %v, want 1.3 (1 + 0.1 + 2·10/100)", got)
	}
	if !math.IsInf(AmplificationBound(0.1, 10, 1, time.Minute, time.Second, 0), 1) {
		t.Error("a bound over no calls must not judge")
	}
}

func score(byModel, calls int, amp float64) SweepScore {
	return SweepScore{Calls: calls, ByModel: byModel, Amplification: amp}
}

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		name                      string
		one, imp, dur             int
		amp                       float64
		differ, atLeast, inMargin bool
		ampOK                     bool
	}{
		{"all equal", 100, 100, 100, 1.0, false, true, true, true},
		{"durable best", 60, 70, 80, 1.1, true, true, true, true},
		{"ties the better one-shot", 60, 80, 80, 1.1, true, true, true, true},
		{"one call below, all answered", 100, 99, 99, 1.0, true, false, true, true},
		{"two calls below, all answered", 100, 98, 98, 1.0, true, false, true, true},   // margin ≈ 2.3
		{"five calls below, all answered", 100, 95, 95, 1.0, true, false, false, true}, // margin ≈ 3.6
		{"within the margin at p ≈ 0.5", 50, 40, 45, 1.0, true, false, true, true},     // margin ≈ 11.6
		{"beyond the margin at p ≈ 0.5", 50, 40, 30, 1.0, true, false, false, true},    // margin ≈ 11.5
		{"amplification over the bound", 50, 50, 60, 1.3, true, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := Judge(score(c.one, 100, 1), score(c.imp, 100, 1), score(c.dur, 100, c.amp), 1.2)
			if j.Differ != c.differ || j.AtLeast != c.atLeast || j.WithinMargin != c.inMargin || j.AmplificationOK != c.ampOK {
				t.Errorf("judgement %+v", j)
			}
			if j.Better != max(c.one, c.imp) || j.Allowed < 1 {
				t.Errorf("better %d, allowed %.2f", j.Better, j.Allowed)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	outcome := func(i int, one, dur int, amp float64) SweepOutcome {
		o := SweepOutcome{Shape: SweepShape{Index: i}, Bound: 1.2,
			OneShot: score(one, 100, 1), Impatient: score(0, 100, 1), Durable: score(dur, 100, amp)}
		o.Judgement = Judge(o.OneShot, o.Impatient, o.Durable, o.Bound)
		return o
	}
	var outs []SweepOutcome
	for i := range 19 {
		outs = append(outs, outcome(i, 90, 95, 1.1)) // durable ahead
	}
	outs = append(outs, outcome(19, 90, 89, 1.1)) // one call behind: within margin, not ≥
	v := Verdict(outs)
	if v.Differ != 20 || v.AtLeast != 19 || !v.WinsMet || !v.MarginMet || !v.BoundMet || !v.Met() {
		t.Errorf("19 of 20 (95 %%): %+v", v)
	}
	outs = append(outs, outcome(20, 90, 89, 1.1)) // 19 of 21 < 95 %
	if v := Verdict(outs); v.WinsMet || v.Met() {
		t.Errorf("19 of 21: %+v", v)
	}
	outs = outs[:20]
	outs = append(outs, outcome(20, 90, 70, 1.1)) // far below
	if v := Verdict(outs); v.MarginMet || !reflect.DeepEqual(v.BelowMargin, []int{20}) || v.Met() {
		t.Errorf("a shape far below: %+v", v)
	}
	outs = outs[:20]
	outs = append(outs, outcome(20, 100, 100, 1.0)) // all equal: not counted among the differing
	outs[20].Impatient = score(100, 100, 1)
	outs[20].Judgement = Judge(outs[20].OneShot, outs[20].Impatient, outs[20].Durable, 1.2)
	if v := Verdict(outs); v.Differ != 20 || !v.Met() {
		t.Errorf("a tie: %+v", v)
	}
	outs = append(outs, outcome(21, 50, 60, 1.5))
	if v := Verdict(outs); v.BoundMet || !reflect.DeepEqual(v.OverBound, []int{21}) {
		t.Errorf("over the bound: %+v", v)
	}
	if s := Verdict(outs).String(); !strings.Contains(s, "NOT met: shapes 21") {
		t.Errorf("verdict line %q", s)
	}
}

func TestScoreRun(t *testing.T) {
	c := StormCase{Deadline: 10 * time.Second, IncidentStart: 5 * time.Second, IncidentEnd: 10 * time.Second}
	o := func(start time.Duration, byModel, degraded bool, model string, latency time.Duration) Outcome {
		return Outcome{Result: Result{ByModel: byModel, Degraded: degraded, Model: model}, Start: start, Latency: latency}
	}
	run := StormRun{Name: "x", TokensBilled: 300, Outcomes: []Outcome{
		o(0, true, false, Model, time.Second),                  // good, preferred
		o(6*time.Second, true, false, "qwen-14b", time.Second), // good, incident, another rung
		o(7*time.Second, true, true, Model, time.Second),       // degraded: not a complete answer
		o(8*time.Second, true, false, Model, 11*time.Second),   // too late
		o(9*time.Second, false, false, "", time.Second),        // fallback
	}}
	s := ScoreRun(run, c)
	if s.Calls != 5 || s.ByModel != 2 || s.Preferred != 1 || s.IncidentCalls != 4 || s.IncidentByModel != 1 {
		t.Errorf("score %+v", s)
	}
	if s.TokensPerAnswer() != 150 {
		t.Errorf("tokens per answer %v", s.TokensPerAnswer())
	}
}

func TestTokensBilled(t *testing.T) {
	gens := []llmsim.Generation{
		{PromptTokens: 10, CompletionTokens: 30, SentTokens: 30, End: llmsim.EndDone, Service: llmsim.Duration(time.Second)},
		{PromptTokens: 10, CompletionTokens: 30, SentTokens: 0, End: llmsim.EndClientGone, Service: llmsim.Duration(time.Second)}, // left mid-generation
		{PromptTokens: 10, CompletionTokens: 30, SentTokens: 15, End: llmsim.EndCutStream, Service: llmsim.Duration(time.Second)}, // cut mid-stream
		{PromptTokens: 10, CompletionTokens: 30, End: llmsim.EndClientGone},                                                       // left in the queue
	}
	if got := tokensBilled(gens, true); got != 4*40 {
		t.Errorf("a server that keeps generating bills %d, want 160", got)
	}
	if got := tokensBilled(gens, false); got != 40+10+25 {
		t.Errorf("a server that stops bills %d, want 75", got)
	}
}

// TestSweepContendersMeetTheSameSchedule runs a one-shot client twice on
// a small case drawn per request, the second time with an unnumbered
// request of other traffic before each call (as retries of another
// contender would be): a request's fault depends on its call, not on
// what arrived before it, so both runs fail exactly the same calls.
func TestSweepContendersMeetTheSameSchedule(t *testing.T) {
	const yaml = `
name: same-schedule
seed: 5
load: {rate: 20, duration: 2s, client_timeout: 1s}
models:
  - {name: qwen-72b, latency: {dist: lognormal, median: 20ms, sigma: 0.3, max: 100ms}}
phases:
  - {name: healthy, duration: 200ms}
  - {name: sick, duration: 1600ms, faults: [{kind: bad_gateway, probability: 0.5}]}
  - {name: recovered}
`
	c, err := stormCaseFrom("same-schedule", []byte(yaml), 5*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	c.PerRequest, c.FirstTokenTimeout = true, 3*time.Second
	ctx := context.Background()
	quiet, err := runStormContender(ctx, c, KeyOneShot, StormOptions{})
	if err != nil {
		t.Fatal(err)
	}
	noisy, err := runContender(ctx, c, StormOptions{}, func(baseURL string) (*Contender, error) {
		con := NewOneShot(baseURL, c.Deadline)
		call := con.Call
		con.Call = func(ctx context.Context, i int) Result {
			call(ctx, 10_000+i) // other traffic, unnumbered
			return call(ctx, i)
		}
		return con, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := quiet.Outcomes, noisy.Outcomes
	if len(a) != len(b) || len(a) != 40 {
		t.Fatalf("%d and %d calls", len(a), len(b))
	}
	failed := 0
	for i := range a {
		if a[i].ByModel != b[i].ByModel {
			t.Errorf("call %d: answered %v alone, %v among other traffic", i, a[i].ByModel, b[i].ByModel)
		}
		if !a[i].ByModel {
			failed++
		}
	}
	if failed < 5 || failed > 30 {
		t.Errorf("%d of 40 calls failed", failed)
	}
	if quiet.TokensBilled == 0 || noisy.TokensBilled <= quiet.TokensBilled {
		t.Errorf("tokens billed %d alone, %d with the other traffic", quiet.TokensBilled, noisy.TokensBilled)
	}
}

// TestImpatientOneShotGivesUpAtItsTimeout: the impatient one-shot sends
// one request and abandons it at its timeout, where the one-shot waits.
func TestImpatientOneShotGivesUpAtItsTimeout(t *testing.T) {
	const yaml = `
name: slow
seed: 5
load: {rate: 10, duration: 1s, client_timeout: 1s}
models:
  - {name: qwen-72b, latency: 600ms}
phases:
  - {name: healthy, duration: 100ms}
  - {name: slow, duration: 2s}
  - {name: recovered}
`
	c, err := stormCaseFrom("slow", []byte(yaml), 3*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	c.PerRequest, c.FirstTokenTimeout = true, 300*time.Millisecond
	rep, err := RunStorm(context.Background(), c, StormOptions{Contenders: []string{KeyOneShot, KeyImpatient}})
	if err != nil {
		t.Fatal(err)
	}
	for i, run := range rep.Runs {
		for _, o := range run.Outcomes {
			if o.ByModel != (i == 0) || run.Stats.Conversations[o.Key].Attempts != 1 {
				t.Errorf("%s, call %d: by a model %v after %s, %d requests", run.Name, o.I, o.ByModel, o.Latency, run.Stats.Conversations[o.Key].Attempts)
			}
		}
	}
}

// TestMergeSweepParts: parts written one after another merge into one
// report, shapes in order, a shape run twice counted by its latest run.
func TestMergeSweepParts(t *testing.T) {
	dir := t.TempDir()
	p := testParams(20 * time.Second)
	part := func(from, to int, byModel int, date time.Time) {
		r := &SweepReport{Seed: 4, Params: p}
		for _, s := range GenerateSweep(4, from, to, p) {
			o := SweepOutcome{Shape: s, Date: date, OneShot: score(50, 100, 1), Impatient: score(50, 100, 1), Durable: score(byModel, 100, 1)}
			o.Judgement = Judge(o.OneShot, o.Impatient, o.Durable, 1.2)
			r.Outcomes = append(r.Outcomes, o)
		}
		if err := WriteSweep(dir, SweepPartName(4, from, to), r, date); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	part(4, 7, 60, now)
	part(0, 4, 40, now.Add(time.Minute)) // shape 4 again, later
	m, err := MergeSweep(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Outcomes) != 8 {
		t.Fatalf("%d shapes merged, want 8", len(m.Outcomes))
	}
	for i, o := range m.Outcomes {
		if o.Shape.Index != i {
			t.Errorf("shape %d at %d", o.Shape.Index, i)
		}
	}
	if m.Outcomes[4].Durable.ByModel != 40 {
		t.Errorf("shape 4 counted by its earlier run")
	}
	if v := m.Verdict(); v.Differ != 8 || v.AtLeast != 3 {
		t.Errorf("merged verdict %+v", v)
	}
}

// TestDurableResultCountsALowerRungsCompleteAnswer: the sweep counts a
// call answered by a model when a complete model answer came in time,
// whichever rung wrote it. A lower rung's answer (which the workflow marks
// degraded: served by a fallback model) counts; text no model completed
// (streamed before the models ran out, or the best text kept when retries
// ran out) does not. Before, every answer of the second endpoint's model
// was left out, and two-endpoint shapes read as lost.
func TestDurableResultCountsALowerRungsCompleteAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		res  workflows.CallResult
		want bool
	}{
		{"preferred rung", workflows.CallResult{Source: workflows.SourceModel, Model: Model, Content: "Shipped.", FinishReason: "stop"}, true},
		{"lower rung, complete", workflows.CallResult{Source: workflows.SourceFallbackModel, Model: "llama-8b", Content: "Shipped.", FinishReason: "stop", Degraded: true}, true},
		{"text streamed before the models ran out", workflows.CallResult{Source: workflows.SourceModel, Model: Model, Content: "Ship", Degraded: true}, false},
		{"best text kept", workflows.CallResult{Source: workflows.SourceFallbackModel, Model: "llama-8b", Content: "Ship", FinishReason: "length", Degraded: true}, false},
		{"FAQ", workflows.CallResult{Source: workflows.SourceFAQ, Content: "See our shipping page.", Degraded: true}, false},
	} {
		o := Outcome{Result: durableResult("k", c.res), Latency: time.Second}
		if got := answeredByModel(o, 20*time.Second); got != c.want {
			t.Errorf("%s: answered by a model %v, want %v", c.name, got, c.want)
		}
	}
}
