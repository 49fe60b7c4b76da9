package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(5, 1, 3), 0.5, 3 * time.Millisecond},
		{"median of even is the lower", ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"p100 is the max", ms(seq(100)...), 1, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.q); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.in, tt.q, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[n-1-i] = i + 1 // descending, so sorting matters
	}
	return out
}

// calls returns one call per 100 ms for d, good unless bad says otherwise.
func calls(d time.Duration, bad func(start time.Duration) bool) []Outcome {
	var outs []Outcome
	for i, s := 0, time.Duration(0); s < d; i, s = i+1, s+100*time.Millisecond {
		ok := !bad(s)
		outs = append(outs, Outcome{I: i, Start: s, Latency: time.Second, Result: Result{Key: fmt.Sprint(i), Answered: ok, ByModel: ok}})
	}
	return outs
}

func TestRecoveryTime(t *testing.T) {
	good := func(o Outcome) bool { return o.ByModel }
	tests := []struct {
		name   string
		bad    func(time.Duration) bool
		want   time.Duration
		wantOK bool
	}{
		{"never failed", func(time.Duration) bool { return false }, 0, true},
		// From 12.9 s on, 1 of 171 calls failed: within the 1 % allowance.
		{"failed until 13 s", func(s time.Duration) bool { return s < 13*time.Second }, 2900 * time.Millisecond, true},
		{"failed before the incident ended only", func(s time.Duration) bool { return s < 9*time.Second }, 0, true},
		{"never recovered", func(s time.Duration) bool { return s >= 5*time.Second }, 0, false},
		{"recovered too late to judge", func(s time.Duration) bool { return s < 29*time.Second }, 0, false},
		// One failure in 200 later calls is within the 1 % allowance.
		{"one straggler", func(s time.Duration) bool { return s < 11*time.Second || s == 20*time.Second }, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RecoveryTime(calls(30*time.Second, tt.bad), 10*time.Second, good, 100*time.Millisecond, 20)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RecoveryTime = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	c := StormCase{Rate: 10, Duration: 30 * time.Second, Deadline: 20 * time.Second,
		IncidentStart: 10 * time.Second, IncidentEnd: 15 * time.Second, Tail: 10 * time.Second}
	// Calls in the incident fail and make 4 attempts; the others make one.
	outs := calls(c.Duration, func(s time.Duration) bool { return s >= 10*time.Second && s < 15*time.Second })
	st := llmsim.Stats{Conversations: map[string]llmsim.Conversation{}}
	for _, o := range outs {
		n := 1
		if !o.ByModel {
			n = 4
		}
		st.Conversations[o.Key] = llmsim.Conversation{Attempts: n}
		st.Totals.Arrivals += n
	}
	// Upstream arrivals: 1 per bucket, 4 per bucket during the incident.
	for i := 0; i < 300; i++ {
		a := 1
		if i >= 100 && i < 150 {
			a = 4
		}
		st.Buckets = append(st.Buckets, llmsim.Bucket{StartMS: int64(i * 100), Counts: llmsim.Counts{Arrivals: a}})
	}
	outs[0].Latency = 25 * time.Second // past the deadline: not answered in time

	s := Summarize(outs, st, c)
	if s.Calls != 300 || s.IncidentCalls != 50 {
		t.Fatalf("calls %d, incident calls %d; want 300, 50", s.Calls, s.IncidentCalls)
	}
	if s.AmpIncident != 4 {
		t.Errorf("AmpIncident = %v, want 4", s.AmpIncident)
	}
	if want := float64(250+200) / 300; s.AmpOverall != want {
		t.Errorf("AmpOverall = %v, want %v", s.AmpOverall, want)
	}
	if want := 100 * 249.0 / 300; s.ByModelPct != want || s.AnsweredPct != want {
		t.Errorf("answered %v, by model %v; want %v", s.AnsweredPct, s.ByModelPct, want)
	}
	if s.PeakOverOffered != 4 {
		t.Errorf("PeakOverOffered = %v, want 4", s.PeakOverOffered)
	}
	if want := 4.0 / (450.0 / 300); s.PeakToMean != want {
		t.Errorf("PeakToMean = %v, want %v", s.PeakToMean, want)
	}
	if !s.Recovered || s.Recovery != 0 {
		t.Errorf("recovery %v, %v; want 0, true", s.Recovery, s.Recovered)
	}
	if s.TailByModelPct != 100 || s.State() != "recovered" {
		t.Errorf("tail %v %%, state %s; want 100 %%, recovered", s.TailByModelPct, s.State())
	}
}

func TestTableMarkdown(t *testing.T) {
	got := Table{Columns: []string{"name", "value"}, Rows: [][]string{{"a", "1"}, {"longer", "22.5 %"}}}.Markdown()
	want := "" +
		"| name   |  value |\n" +
		"| ------ | -----: |\n" +
		"| a      |      1 |\n" +
		"| longer | 22.5 % |\n"
	if got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 s", 450 * time.Microsecond: "0.45 ms", 5 * time.Millisecond: "5.0 ms", 850 * time.Millisecond: "850 ms",
		1270 * time.Millisecond: "1.27 s", 12345 * time.Millisecond: "12.3 s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestLoadStormCases(t *testing.T) {
	for _, name := range StormCaseNames {
		for _, short := range []bool{false, true} {
			c, err := LoadStormCase(name, 30*time.Second, short)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if c.Rate <= 0 || c.ClientTimeout <= 0 || c.IncidentEnd <= c.IncidentStart || c.Duration <= c.IncidentEnd && !(c.Sporadic && c.Duration == c.IncidentEnd) {
				t.Errorf("%s (short %v): bad case %+v", name, short, c)
			}
			if _, err := c.scenario(); err != nil {
				t.Errorf("%s (short %v): %v", name, short, err)
			}
		}
	}
	if _, err := LoadStormCase("nope", time.Second, false); err == nil || !strings.Contains(err.Error(), "spike") {
		t.Errorf("unknown case: %v", err)
	}
}

// TestStormPhases checks the phases a flapping case and a sporadic case
// are judged by: which calls start while the endpoint works, and where
// each fault ends.
func TestStormPhases(t *testing.T) {
	flap, err := LoadStormCase("flap5", 20*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	wantEnds := []FaultEnd{{13 * s, 18 * s}, {23 * s, 28 * s}, {33 * s, 38 * s}, {43 * s, 48 * s}, {53 * s, -1}}
	if got := flap.FaultEnds(); !slices.Equal(got, wantEnds) {
		t.Errorf("flap5 fault ends %v, want %v", got, wantEnds)
	}
	if flap.IncidentStart != 8*s || flap.IncidentEnd != 53*s {
		t.Errorf("flap5 incident %v → %v, want 8s → 53s", flap.IncidentStart, flap.IncidentEnd)
	}
	for _, tt := range []struct {
		at          time.Duration
		working, up bool
	}{
		{0, true, false}, {7900 * time.Millisecond, true, false}, {8 * s, false, false}, {12900 * time.Millisecond, false, false},
		{13 * s, true, true}, {17900 * time.Millisecond, true, true}, {18 * s, false, false}, {53 * s, true, false}, {79 * s, true, false},
	} {
		if w, up := flap.Working(tt.at); w != tt.working || up != tt.up {
			t.Errorf("flap5 at %v: working %v, in an up window of the incident %v; want %v, %v", tt.at, w, up, tt.working, tt.up)
		}
	}
	sp, err := LoadStormCase("sporadic", 20*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Sporadic || sp.IncidentStart != 0 || sp.IncidentEnd != sp.Duration || len(sp.FaultEnds()) != 0 {
		t.Errorf("sporadic case %+v: want the whole run as its incident and no fault end", sp)
	}
	if w, _ := sp.Working(30 * s); w {
		t.Error("sporadic: a call at 30 s starts while the endpoint works, want never")
	}
}

// twoDownWindows is a 40 s run at 10 calls a second whose endpoint is
// down from 10 s to 15 s and from 25 s to 30 s.
func twoDownWindows() StormCase {
	s := time.Second
	return StormCase{Rate: 10, Duration: 40 * s, Deadline: 20 * s, IncidentStart: 10 * s, IncidentEnd: 30 * s,
		Phases: []StormPhase{
			{Name: "up-1", End: 10 * s}, {Name: "down-1", Start: 10 * s, End: 15 * s, Sick: true},
			{Name: "up-2", Start: 15 * s, End: 25 * s}, {Name: "down-2", Start: 25 * s, End: 30 * s, Sick: true},
			{Name: "recovered", Start: 30 * s, End: -1},
		}}
}

// TestSummarizeAnswers checks the answer-side metrics of a flapping run:
// calls started in up windows, self-heal from llmsim's record of each
// call's first request, and the recovery after each down window.
func TestSummarizeAnswers(t *testing.T) {
	s := time.Second
	c := twoDownWindows()
	// Calls fail in the down windows and for 1 s after the first; those
	// started in the first down window make two requests, the first a 503.
	bad := func(at time.Duration) bool {
		return at >= 10*s && at < 16*s || at >= 25*s && at < 30*s
	}
	outs := calls(c.Duration, bad)
	st := llmsim.Stats{Conversations: map[string]llmsim.Conversation{}}
	for _, o := range outs {
		cv := llmsim.Conversation{Attempts: 1, Requests: []llmsim.Attempt{{N: 1, Outcome: "200"}}}
		if o.Start >= 10*s && o.Start < 15*s {
			cv = llmsim.Conversation{Attempts: 2, Requests: []llmsim.Attempt{{N: 1, Outcome: "503", Fault: llmsim.FaultUnavailable}, {N: 2, Outcome: "200"}}}
		}
		st.Conversations[o.Key] = cv
	}
	// Of the first down window's calls, those started from 12 s on were
	// answered all the same (by their second request).
	for i := range outs {
		if outs[i].Start >= 12*s && outs[i].Start < 15*s {
			outs[i].ByModel, outs[i].Answered = true, true
		}
	}
	got := Summarize(outs, st, c)
	if got.WorkingCalls != 300 || got.UpCalls != 100 {
		t.Errorf("working calls %d, in up windows %d; want 300, 100", got.WorkingCalls, got.UpCalls)
	}
	if want := 100 * 290.0 / 300; got.WorkingByModelPct != want || got.UpByModelPct != 90 {
		t.Errorf("by a model while working %v %%, in up windows %v %%; want %v, 90", got.WorkingByModelPct, got.UpByModelPct, want)
	}
	if p, ok := got.SelfHealPct(); got.FirstFailed != 50 || got.Healed != 30 || !ok || p != 60 {
		t.Errorf("self-heal %d of %d (%v %%, %v); want 30 of 50, 60 %%", got.Healed, got.FirstFailed, p, ok)
	}
	want := []Recovery{{At: 15 * s, Recovered: true, After: s}, {At: 30 * s, Recovered: true}}
	if !slices.Equal(got.Recoveries, want) {
		t.Errorf("recoveries %v, want %v", got.Recoveries, want)
	}
	if w, _ := got.WorstRecovery(); w != want[0] || got.RecoveryString() != "1.00 s" {
		t.Errorf("worst recovery %v (%s), want %v", w, got.RecoveryString(), want[0])
	}
}

// TestSummarizeJudgesACallByThePhaseItMet: a call started 100 ms before
// the second fault whose request reached the endpoint in it (a busy
// machine is slow to send) is judged with that fault: it neither spoils
// the recovery from the first fault nor counts as refused while the
// endpoint worked.
func TestSummarizeJudgesACallByThePhaseItMet(t *testing.T) {
	s := time.Second
	c := twoDownWindows()
	late := 24900 * time.Millisecond
	outs := calls(c.Duration, func(at time.Duration) bool {
		return at >= 10*s && at < 16*s || at >= late && at < 30*s
	})
	st := llmsim.Stats{Conversations: map[string]llmsim.Conversation{}}
	for _, o := range outs {
		at := o.Start
		if o.Start == late {
			at += 150 * time.Millisecond
		}
		st.Conversations[o.Key] = llmsim.Conversation{Attempts: 1, Requests: []llmsim.Attempt{{N: 1, AtMS: at.Milliseconds(), Outcome: "200"}}}
	}
	got := Summarize(outs, st, c)
	if want := []Recovery{{At: 15 * s, Recovered: true, After: s}, {At: 30 * s, Recovered: true}}; !slices.Equal(got.Recoveries, want) {
		t.Errorf("recoveries %v, want %v", got.Recoveries, want)
	}
	if got.WorkingCalls != 299 || got.UpCalls != 99 || got.UpByModelPct != 100*89.0/99 {
		t.Errorf("working calls %d, in up windows %d (%v %% by a model); want 299, 99 (%v %%)", got.WorkingCalls, got.UpCalls, got.UpByModelPct, 100*89.0/99)
	}
}

func TestFirstFailed(t *testing.T) {
	for _, tt := range []struct {
		name         string
		reqs         []llmsim.Attempt
		failed, sent bool
	}{
		{"none sent", nil, false, false},
		{"answered", []llmsim.Attempt{{N: 1, Outcome: "200"}}, false, true},
		{"hang, client gave up", []llmsim.Attempt{{N: 1, Outcome: "499", Fault: llmsim.FaultHang}, {N: 2, Outcome: "200"}}, true, true},
		{"502", []llmsim.Attempt{{N: 1, Outcome: "502", Fault: llmsim.FaultBadGateway}}, true, true},
		{"capacity 429", []llmsim.Attempt{{N: 1, Outcome: "429"}}, true, true},
		{"listed out of order", []llmsim.Attempt{{N: 2, Outcome: "200"}, {N: 1, Outcome: "reset", Fault: llmsim.FaultReset}}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			failed, sent := firstFailed(llmsim.Conversation{Attempts: len(tt.reqs), Requests: tt.reqs})
			if failed != tt.failed || sent != tt.sent {
				t.Errorf("firstFailed = %v, %v; want %v, %v", failed, sent, tt.failed, tt.sent)
			}
		})
	}
}

// TestAmplificationInTheIncidentWindow: calls started in a 5 s incident
// each send their retry 1 s after it ends (they waited it out). Per
// incident call they made 2 requests, but the endpoint received 1 per
// such call while it was sick: the window's own load.
func TestAmplificationInTheIncidentWindow(t *testing.T) {
	c := StormCase{Rate: 10, Duration: 30 * time.Second, Deadline: 20 * time.Second,
		IncidentStart: 10 * time.Second, IncidentEnd: 15 * time.Second, Tail: 10 * time.Second,
		Scenario: []byte(`name: t
seed: 1
load: {rate: 10, duration: 30s, client_timeout: 1s}
models:
  - {name: m, context_window: 4096, slots: 10, queue: 10, latency: {dist: lognormal, median: 100ms, sigma: 0.1, max: 300ms}}
phases:
  - {name: a, duration: 10s}
  - {name: b, duration: 5s, faults: [{kind: unavailable}]}
  - {name: c}
`)}
	inIncident := func(s time.Duration) bool { return s >= 10*time.Second && s < 15*time.Second }
	outs := calls(c.Duration, func(time.Duration) bool { return false })
	st := llmsim.Stats{Conversations: map[string]llmsim.Conversation{}, Models: map[string]llmsim.Counts{}}
	for _, o := range outs {
		reqs := []llmsim.Attempt{{N: 1, AtMS: o.Start.Milliseconds(), Model: "m"}}
		if inIncident(o.Start) {
			reqs = append(reqs, llmsim.Attempt{N: 2, AtMS: 16_000, Model: "m"})
		}
		st.Conversations[o.Key] = llmsim.Conversation{Attempts: len(reqs), Requests: reqs}
	}
	for i := 0; i < 300; i++ {
		a := 1
		if i == 160 {
			a += 50 // the incident's retries, after it
		}
		st.Buckets = append(st.Buckets, llmsim.Bucket{StartMS: int64(i * 100), Counts: llmsim.Counts{Arrivals: a},
			Models: map[string]llmsim.Counts{"m": {Arrivals: a}}})
	}
	st.Models["m"] = llmsim.Counts{Arrivals: 350}
	s := Summarize(outs, st, c)
	if len(s.Endpoints) != 1 {
		t.Fatalf("endpoints %+v, want the shared one", s.Endpoints)
	}
	ep := s.Endpoints[0]
	if ep.AmpIncident != 2 || ep.InIncident != 50 || ep.AmpInIncident != 1 {
		t.Errorf("per incident call: %v requests made, %d received in the window (%v per call); want 2, 50 (1)", ep.AmpIncident, ep.InIncident, ep.AmpInIncident)
	}
}

// TestBudgetStretch: calls started in a 10 s incident retry, the last one
// 3 s after it ends; calls started after the incident send one request
// each. The stretch runs from the incident's start to that last retry, and
// counts every request in it (the later calls' first requests earned the
// budget those retries spent) per first request in it. On the sick
// endpoint only, the retry one call sent to the healthy endpoint is left
// out: that endpoint's load, not a storm.
func TestBudgetStretch(t *testing.T) {
	c := StormCase{IncidentStart: 10 * time.Second, IncidentEnd: 20 * time.Second}
	st := llmsim.Stats{Conversations: map[string]llmsim.Conversation{}}
	var outs []Outcome
	add := func(key string, start time.Duration, at ...time.Duration) {
		outs = append(outs, Outcome{Start: start, Result: Result{Key: key}})
		cv := llmsim.Conversation{Attempts: len(at)}
		for i, a := range at {
			model := "sick"
			if key == "before" && i == 1 {
				model = "healthy"
			}
			cv.Requests = append(cv.Requests, llmsim.Attempt{N: i + 1, AtMS: a.Milliseconds(), Model: model})
		}
		st.Conversations[key] = cv
	}
	add("before", 5*time.Second, 5*time.Second, 12*time.Second) // its retry falls in the stretch, on the healthy endpoint
	add("in-1", 11*time.Second, 11*time.Second, 13*time.Second)
	add("in-2", 19*time.Second, 19*time.Second, 23*time.Second) // its retry ends the stretch
	add("after-1", 21*time.Second, 21*time.Second)
	add("after-2", 22*time.Second, 22*time.Second)
	add("later", 30*time.Second, 30*time.Second) // outside
	stretch, firsts, amp, sickAmp := budgetStretch(outs, st, c, []string{"sick"})
	if stretch != 13*time.Second+time.Millisecond {
		t.Errorf("stretch %v, want 13.001s (to the last retry of an incident call)", stretch)
	}
	// In [10 s, 23.001 s): 4 first requests (in-1, in-2, after-1, after-2)
	// and 3 retries (before's, on the healthy endpoint, in-1's, in-2's).
	if firsts != 4 || amp != 7.0/4 || sickAmp != 6.0/4 {
		t.Errorf("%d first requests, amplification %v, on the sick endpoint %v; want 4, 1.75, 1.5", firsts, amp, sickAmp)
	}
	if _, _, _, all := budgetStretch(outs, st, c, nil); all != 7.0/4 {
		t.Errorf("one endpoint: amplification on it %v, want every request's 1.75", all)
	}
}
