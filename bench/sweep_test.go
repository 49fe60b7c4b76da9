package bench

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
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
		keys := s.Contenders()
		if want := []string{KeyOneShot, KeyImpatient, KeyLiteLLM}; !reflect.DeepEqual(keys[:3], want) {
			t.Errorf("shape %s: contenders %v, want %v then durable-llm", s.Name(), keys, want)
		}
		if durable := keys[3]; (durable == KeyDurable3) != (s.Workers == 3) {
			t.Errorf("shape %s: %d workers, contender %s", s.Name(), s.Workers, durable)
		}
		if c.ClientTimeout != s.FirstTokenTimeout {
			t.Errorf("shape %s: the LiteLLM-style router's timeout %s, want first_token_timeout %s", s.Name(), c.ClientTimeout, s.FirstTokenTimeout)
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
	return SweepScore{Calls: calls, ByModel: byModel, SickAmplification: amp}
}

// judged is a shape of 100 calls on two endpoints, 80 of them reachable
// without a resend on the sick endpoint, bounds 1.2 (sick) and 1.1
// (healthy), judged: the rivals answered one, imp and lite calls by a
// model; durable-llm dur, reached of the 80, with amplification amp on
// the sick endpoint and healthy requests per incident call.
func judged(i, one, imp, lite, dur, reached int, amp, healthy float64) SweepOutcome {
	o := SweepOutcome{Shape: SweepShape{Index: i, Endpoints: 2}, Calls: 100, Reachable: 90, WithoutResend: 80,
		Bound: 1.2, HealthyBound: 1.1,
		OneShot: SweepScore{Name: NameOneShot, Calls: 100, ByModel: one}, Impatient: SweepScore{Name: NameImpatient, Calls: 100, ByModel: imp},
		LiteLLM: SweepScore{Name: NameLiteLLM, Calls: 100, ByModel: lite},
		Durable: SweepScore{Name: NameDurable, Calls: 100, ByModel: dur, WithoutResendByModel: reached, SickAmplification: amp, HealthyPerCall: healthy}}
	o.Judgement = Judge(o)
	return o
}

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		name                     string
		one, imp, lite, dur, got int
		amp, healthy             float64
		want                     SweepJudgement
	}{
		{"durable-llm best, LiteLLM-style the best rival", 60, 70, 75, 80, 78, 1.1, 0.9,
			SweepJudgement{ReachShare: 78.0 / 80, ReachOK: true, Best: 75, BestName: NameLiteLLM, Differ: true, AtLeast: true,
				Margin: 9.7137, Allowed: 9.7137, WithinMargin: true, AmplificationOK: true, HealthyOK: true}},
		{"all four equal: a tie", 80, 80, 80, 80, 80, 1.0, 1.0,
			SweepJudgement{ReachShare: 1, ReachOK: true, Best: 80, BestName: NameOneShot, AtLeast: true,
				Margin: 9.3047, Allowed: 9.3047, WithinMargin: true, AmplificationOK: true, HealthyOK: true}},
		{"one call below the one-shot, within the margin", 99, 90, 98, 98, 79, 1.2, 1.1,
			SweepJudgement{ReachShare: 79.0 / 80, ReachOK: true, Best: 99, BestName: NameOneShot, Differ: true,
				Margin: 2.8275, Allowed: 2.8275, WithinMargin: true, AmplificationOK: true, HealthyOK: true}},
		{"four calls below, beyond the margin", 99, 90, 98, 95, 76, 1.0, 0.5,
			SweepJudgement{ReachShare: 0.95, ReachOK: true, Best: 99, BestName: NameOneShot, Differ: true,
				Margin: 3.9682, Allowed: 3.9682, AmplificationOK: true, HealthyOK: true}},
		{"every call answered by all four: the margin is 0, one call is allowed", 100, 100, 100, 100, 80, 1.0, 0.5,
			SweepJudgement{ReachShare: 1, ReachOK: true, Best: 100, BestName: NameOneShot, AtLeast: true,
				Margin: 0, Allowed: 1, WithinMargin: true, AmplificationOK: true, HealthyOK: true}},
		{"one call below when every other is answered", 100, 100, 100, 99, 79, 1.0, 0.5,
			SweepJudgement{ReachShare: 79.0 / 80, ReachOK: true, Best: 100, BestName: NameOneShot, Differ: true,
				Margin: 1.6407, Allowed: 1.6407, WithinMargin: true, AmplificationOK: true, HealthyOK: true}},
		{"below 95 % of the reachable without a resend", 50, 40, 45, 75, 75, 1.0, 0.5,
			SweepJudgement{ReachShare: 75.0 / 80, Best: 50, BestName: NameOneShot, Differ: true, AtLeast: true,
				Margin: 11.2615, Allowed: 11.2615, WithinMargin: true, AmplificationOK: true, HealthyOK: true}},
		{"over the bound on the sick endpoint", 50, 50, 50, 60, 60, 1.21, 0.5,
			SweepJudgement{ReachShare: 60.0 / 80, Best: 50, BestName: NameOneShot, Differ: true, AtLeast: true,
				Margin: 11.5726, Allowed: 11.5726, WithinMargin: true, HealthyOK: true}},
		{"over 1 + ratio on the healthy endpoint", 50, 50, 50, 80, 80, 1.0, 1.11,
			SweepJudgement{ReachShare: 1, ReachOK: true, Best: 50, BestName: NameOneShot, Differ: true, AtLeast: true,
				Margin: 11.0951, Allowed: 11.0951, WithinMargin: true, AmplificationOK: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := judged(0, c.one, c.imp, c.lite, c.dur, c.got, c.amp, c.healthy).Judgement
			if math.Abs(j.Margin-c.want.Margin) > 1e-3 || math.Abs(j.Allowed-c.want.Allowed) > 1e-3 || math.Abs(j.ReachShare-c.want.ReachShare) > 1e-9 {
				t.Errorf("margin %.4f, allowed %.4f, reach share %.4f; want %.4f, %.4f, %.4f", j.Margin, j.Allowed, j.ReachShare, c.want.Margin, c.want.Allowed, c.want.ReachShare)
			}
			j.Margin, j.Allowed, j.ReachShare = c.want.Margin, c.want.Allowed, c.want.ReachShare
			if j != c.want {
				t.Errorf("judgement\n%+v, want\n%+v", j, c.want)
			}
		})
	}
	// No call reachable without a resend: nothing to miss.
	o := judged(0, 10, 10, 10, 10, 0, 1, 1)
	o.WithoutResend = 0
	if j := Judge(o); j.ReachShare != 1 || !j.ReachOK {
		t.Errorf("no call reachable without a resend: %+v", j)
	}
}

func TestVerdict(t *testing.T) {
	var outs []SweepOutcome
	for i := range 19 {
		outs = append(outs, judged(i, 90, 0, 80, 95, 78, 1.1, 0.9)) // durable-llm ahead
	}
	outs = append(outs, judged(19, 90, 0, 80, 89, 78, 1.1, 0.9)) // one call behind: within the margin, not ≥
	v := Verdict(outs)
	want := SweepVerdict{Shapes: 20, BelowReach: []int{}, BoundLimited: []int{}, Differ: 20, AtLeast: 19, BelowMargin: []int{}, OverBound: []int{}, OverHealthy: []int{},
		ReachMet: true, WinsMet: true, MarginMet: true, BoundMet: true, HealthyMet: true}
	if !reflect.DeepEqual(v, want) || !v.Met() {
		t.Errorf("19 of 20 (95 %%):\n%+v, want\n%+v", v, want)
	}
	if s := v.String(); !strings.Contains(s, "in 19 of the 20 shapes where they differ (95.0 %, target ≥ 95 %: met)") || !strings.HasSuffix(s, "→ every target met") {
		t.Errorf("verdict line %q", s)
	}
	more := append(slices.Clone(outs), judged(20, 90, 0, 80, 89, 78, 1.1, 0.9)) // 19 of 21 < 95 %
	if v := Verdict(more); v.WinsMet || v.AtLeast != 19 || v.Differ != 21 || v.Met() {
		t.Errorf("19 of 21: %+v", v)
	}
	tie := append(slices.Clone(outs), judged(20, 100, 100, 100, 100, 80, 1.0, 1.0)) // not counted among the differing
	if v := Verdict(tie); v.Differ != 20 || v.Shapes != 21 || !v.Met() {
		t.Errorf("a tie: %+v", v)
	}
	// One shape misses each of the other four targets.
	miss := append(slices.Clone(outs),
		judged(20, 90, 0, 80, 70, 70, 1.1, 0.9),  // far below its best rival
		judged(21, 50, 0, 50, 60, 60, 1.1, 0.9),  // 75 % of the reachable without a resend
		judged(22, 50, 0, 50, 80, 80, 1.5, 0.9),  // over the bound on the sick endpoint
		judged(23, 50, 0, 50, 80, 80, 1.1, 1.25)) // over 1 + ratio on the healthy endpoint
	v = Verdict(miss)
	if !reflect.DeepEqual(v.BelowMargin, []int{20}) || !reflect.DeepEqual(v.BelowReach, []int{20, 21}) ||
		!reflect.DeepEqual(v.OverBound, []int{22}) || !reflect.DeepEqual(v.OverHealthy, []int{23}) ||
		v.MarginMet || v.ReachMet || v.BoundMet || v.HealthyMet || v.Met() {
		t.Errorf("misses: %+v", v)
	}
	for _, w := range []string{"in 2 (NOT met: shapes 20, 21)", "binomial margin) in 1 (NOT met: shapes 20)",
		"sick endpoint over the budget's bound in 1 (NOT met: shapes 22)", "call started in the incident in 1 (NOT met: shapes 23)", "a target NOT met"} {
		if s := v.String(); !strings.Contains(s, w) {
			t.Errorf("verdict line %q lacks %q", s, w)
		}
	}
}

// TestBoundLimit: where a fault hits a share of one endpoint's requests,
// a client within the amplification bound that sends each call's first
// request when it starts answers at most the calls whose first request was
// answered and one per resend the bound leaves; a shape below 95 % of the
// reachable without a resend but at 95 % of that limit is listed as
// limited by the bound, not passed.
func TestBoundLimit(t *testing.T) {
	for _, c := range []struct {
		first, without int
		bound          float64
		firsts, want   int
	}{
		{90, 111, 1.218, 85, 108}, // ⌊0.218 × 85⌋ = 18
		{110, 224, 1.153, 187, 138},
		{100, 105, 1.5, 100, 105}, // capped by the reachable without a resend
		{100, 120, 1.0, 100, 100}, // no resend allowed
	} {
		if got := BoundLimit(c.first, c.without, c.bound, c.firsts); got != c.want {
			t.Errorf("BoundLimit(%d, %d, %.3f, %d) = %d, want %d", c.first, c.without, c.bound, c.firsts, got, c.want)
		}
	}
	partial := func(i, reached, limit int) SweepOutcome {
		o := judged(i, 50, 0, 50, reached, reached, 1.1, 0)
		o.Shape.Endpoints, o.Partial, o.BoundLimit = 1, true, limit
		o.Judgement = Judge(o)
		return o
	}
	within := partial(0, 60, 62)                  // 75 % of the 80 reachable, 96.8 % of the limit
	short := partial(1, 60, 70)                   // 85.7 % of the limit
	whole := judged(2, 50, 0, 50, 60, 60, 1.1, 0) // no bound's limit: a fault on every request
	if !within.Judgement.BoundOK || within.Judgement.ReachOK || short.Judgement.BoundOK || whole.Judgement.BoundOK {
		t.Errorf("judgements: within %+v, short %+v, whole %+v", within.Judgement, short.Judgement, whole.Judgement)
	}
	v := Verdict([]SweepOutcome{within, short, whole})
	if !reflect.DeepEqual(v.BelowReach, []int{0, 1, 2}) || !reflect.DeepEqual(v.BoundLimited, []int{0}) || v.ReachMet {
		t.Errorf("verdict %+v", v)
	}
	if s := v.String(); !strings.Contains(s, "in 3 (NOT met: shapes 0, 1, 2) (of them, at least 95 % of the bound's limit") || !strings.Contains(s, "could answer: shapes 0)") {
		t.Errorf("verdict line %q", s)
	}
}

// TestScoreRun: a contender's score counts its answers by a model, those
// among the calls reachable without a resend, and its requests per call
// started in the incident on each endpoint.
func TestScoreRun(t *testing.T) {
	c := StormCase{Deadline: 10 * time.Second, IncidentStart: 5 * time.Second, IncidentEnd: 10 * time.Second}
	o := func(i int, start time.Duration, byModel, degraded bool, model string, latency time.Duration) Outcome {
		return Outcome{Result: Result{ByModel: byModel, Degraded: degraded, Model: model}, I: i, Start: start, Latency: latency}
	}
	run := StormRun{Name: "x", TokensBilled: 300, Outcomes: []Outcome{
		o(0, 0, true, false, Model, time.Second),                  // good, preferred
		o(1, 6*time.Second, true, false, "qwen-14b", time.Second), // good, incident, another rung
		o(2, 7*time.Second, true, true, Model, time.Second),       // degraded: not a complete answer
		o(3, 8*time.Second, true, false, Model, 11*time.Second),   // too late
		o(4, 9*time.Second, false, false, "", time.Second),        // fallback
	}, Summary: StormSummary{AmpStretch: 1.5, SickAmpStretch: 1.25, Endpoints: []EndpointLoad{{AmpIncident: 1.75}, {AmpIncident: 0.5}}}}
	reach := []CallReach{{Reachable: true, WithoutResend: true}, {Reachable: true}, {Reachable: true, WithoutResend: true}, {}, {}}
	s := ScoreRun(run, c, reach)
	want := SweepScore{Name: "x", Calls: 5, ByModel: 2, Preferred: 1, IncidentCalls: 4, IncidentByModel: 1, TokensBilled: 300,
		Amplification: 1.5, SickAmplification: 1.25, SickPerCall: 1.75, HealthyPerCall: 0.5, WithoutResendByModel: 1}
	if s != want {
		t.Errorf("score\n%+v, want\n%+v", s, want)
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
// report, shapes in order, a shape run twice counted by its latest run; a
// part judged by older definitions is left out, and the note says so.
func TestMergeSweepParts(t *testing.T) {
	dir := t.TempDir()
	p := testParams(20 * time.Second)
	format := SweepFormat
	part := func(from, to int, byModel int, date time.Time) {
		r := &SweepReport{Format: format, Seed: 4, Params: p}
		for _, s := range GenerateSweep(4, from, to, p) {
			o := SweepOutcome{Shape: s, Date: date, Bound: 1.2, HealthyBound: 1.1,
				OneShot: score(50, 100, 1), Impatient: score(50, 100, 1), LiteLLM: score(50, 100, 1), Durable: score(byModel, 100, 1)}
			o.Judgement = Judge(o)
			r.Outcomes = append(r.Outcomes, o)
		}
		if err := WriteSweep(dir, SweepPartName(4, from, to), r, date); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	part(4, 7, 60, now)
	part(0, 4, 40, now.Add(time.Minute)) // shape 4 again, later
	format = 1
	part(8, 9, 90, now.Add(2*time.Minute)) // older definitions
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
	if m.Format != SweepFormat || m.Note != "1 part(s) judged by older definitions (format ≠ 2) left out" {
		t.Errorf("format %d, note %q", m.Format, m.Note)
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
