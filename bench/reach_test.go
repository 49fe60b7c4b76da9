package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

// idx lists the calls of the ranges [from, to] given in pairs.
func idx(pairs ...int) []int {
	out := []int{}
	for k := 0; k+1 < len(pairs); k += 2 {
		for i := pairs[k]; i <= pairs[k+1]; i++ {
			out = append(out, i)
		}
	}
	return out
}

// TestReach pins the reachable limit on fixed schedules: 30 calls one
// second apart, a ladder a, b, c.
func TestReach(t *testing.T) {
	second := func(d float64) time.Duration { return time.Duration(d * float64(time.Second)) }
	each := func(d float64) func(int, string) time.Duration {
		return func(int, string) time.Duration { return second(d) }
	}
	incident := []Window{{10 * time.Second, 20 * time.Second}}
	flapping := []Window{{10 * time.Second, 13 * time.Second}, {15 * time.Second, 18 * time.Second}, {20 * time.Second, 23 * time.Second}}
	all := []string{"a", "b", "c"}
	for _, c := range []struct {
		name                     string
		deadline                 float64
		sick                     []string
		down                     []Window
		fault                    ReachFault
		spared                   func(int) bool
		answer                   func(int, string) time.Duration
		reachable, withoutResend []int
	}{
		{name: "a fault on the first model's endpoint of two: every call, by the healthy one",
			deadline: 1.5, sick: []string{"a"}, down: incident, answer: each(1),
			reachable: idx(0, 29), withoutResend: idx(0, 29)},
		{name: "the only endpoint refuses until 20 s, then serves: the calls whose deadline less the fastest answer (c's, 1 s) reaches 20 s",
			deadline: 5, sick: all, down: incident,
			answer: func(_ int, m string) time.Duration {
				if m == "c" {
					return time.Second
				}
				return 2 * time.Second
			},
			reachable: idx(0, 9, 16, 29), withoutResend: idx(0, 9, 16, 29)},
		{name: "a hang longer than the deadline on the only endpoint: the calls before and after it",
			deadline: 1.5, sick: all, down: incident, answer: each(1),
			reachable: idx(0, 9, 20, 29), withoutResend: idx(0, 9, 20, 29)},
		{name: "a fault to a share of the requests: the calls whose first request it spares",
			deadline: 1.5, sick: all, down: incident, answer: each(1), spared: func(i int) bool { return i%4 == 0 },
			reachable: idx(0, 9, 12, 12, 16, 16, 20, 29), withoutResend: idx(0, 9, 12, 12, 16, 16, 20, 29)},
		{name: "flapping: a down window's calls reach the next up window, by a resend",
			deadline: 4, sick: all, down: flapping, answer: each(1),
			reachable: idx(0, 29), withoutResend: idx(0, 9, 13, 14, 18, 29)},
		{name: "flapping whose requests are held and served when the window ends: no resend",
			deadline: 4, sick: all, down: flapping, fault: ReachServedAtEnd, answer: each(1),
			reachable: idx(0, 29), withoutResend: idx(0, 29)},
		{name: "held until 20 s, answer 1 s, deadline 1.5 s: too late",
			deadline: 1.5, sick: all, down: incident, fault: ReachServedAtEnd, answer: each(1),
			reachable: idx(0, 9, 20, 29), withoutResend: idx(0, 9, 20, 29)},
		{name: "a slow first byte below the deadline: every call",
			deadline: 1.5, sick: all, down: incident, fault: ReachLate, answer: each(1),
			reachable: idx(0, 29), withoutResend: idx(0, 29)},
		{name: "an answer slower than the deadline: no call",
			deadline: 1.5, sick: []string{"a"}, down: incident, answer: each(2),
			reachable: []int{}, withoutResend: []int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ReachSchedule{Calls: 30, Interval: time.Second, Deadline: second(c.deadline), Ladder: all,
				Sick: c.sick, Down: c.down, Fault: c.fault, Spared: c.spared, AnswerTime: c.answer}
			reachable, without := []int{}, []int{}
			for i, r := range s.Reach() {
				if r.Reachable {
					reachable = append(reachable, i)
				}
				if r.WithoutResend {
					without = append(without, i)
				}
			}
			if !reflect.DeepEqual(reachable, c.reachable) || !reflect.DeepEqual(without, c.withoutResend) {
				t.Errorf("reachable %v\nwithout a resend %v\nwant %v\nand %v", reachable, without, c.reachable, c.withoutResend)
			}
			n, w := CountReach(s.Reach())
			if n != len(c.reachable) || w != len(c.withoutResend) {
				t.Errorf("counted %d and %d", n, w)
			}
		})
	}
}

// TestStormCaseReach: the storm cases whose schedule gives the limit, and
// its exact counts on three of them (deadline 20 s).
func TestStormCaseReach(t *testing.T) {
	want := map[string]bool{"spike": true, "vllm": true, "metastable": true, "hang": true, "429": false, "429-bare": false, "5xx": false,
		"slow": false, "flap": true, "flap5": true, "two": true, "queuefull": true, "limit": true, "late": false, "sporadic": false}
	for _, name := range StormCaseNames {
		c, err := LoadStormCase(name, 20*time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		reach, ok := c.Reach()
		if ok != want[name] {
			t.Errorf("storm %s: limit computed %v, want %v", name, ok, want[name])
			continue
		}
		if !ok {
			continue
		}
		n, w := CountReach(reach)
		if len(reach) != int(c.Rate*c.Duration.Seconds()) {
			t.Errorf("storm %s: %d calls", name, len(reach))
		}
		switch name {
		case "two", "queuefull", "spike", "vllm", "metastable", "limit":
			// A healthy model on the ladder serves every call.
			if n != len(reach) || w != len(reach) {
				t.Errorf("storm %s: %d and %d of %d calls", name, n, w, len(reach))
			}
		case "hang":
			// A 10 s hang, a 20 s deadline: every call reaches its end.
			if n != len(reach) || w != len(reach) {
				t.Errorf("storm hang: %d and %d of %d calls", n, w, len(reach))
			}
		}
	}
	// The 10 s flap: down 8–18, 28–38 and 48–58 s, 10 calls/s for 100 s,
	// llama-8b's cap 0.5 s. Every call reaches an up window; without a
	// resend, the 700 calls outside the down windows and those whose
	// deadline less 0.5 s reaches 58 s, from 38.5 s: the 100 of the last
	// window (the second ends at 38 s).
	c, _ := LoadStormCase("flap", 20*time.Second, false)
	reach, _ := c.Reach()
	n, w := CountReach(reach)
	if len(reach) != 1000 || n != 1000 || w != 800 {
		t.Errorf("storm flap: %d calls, %d reachable, %d without a resend; want 1000, 1000, 800", len(reach), n, w)
	}
}

// TestSweepShapesHaveALimit: every sweep shape's limit is computed; a
// call before the incident, every call of a two-endpoint shape and of a
// slow first byte, and one spared by a partial fault are reachable
// without a resend; the windows are the shape's incident.
func TestSweepShapesHaveALimit(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		for _, s := range GenerateSweep(seed, 0, 31, testParams(20*time.Second)) {
			c, err := s.Case()
			if err != nil {
				t.Fatal(err)
			}
			sch, ok := c.ReachSchedule()
			if !ok {
				t.Errorf("shape %s (%s): no limit", s.Name(), s.Describe())
				continue
			}
			if first, last := sch.Down[0].Start, sch.Down[len(sch.Down)-1].End; first != SweepLead || last != SweepLead+s.Incident {
				t.Errorf("shape %s: fault from %s to %s, want %s for %s", s.Name(), first, last, SweepLead, s.Incident)
			}
			if (sch.Spared != nil) != (s.Share < 1) || (len(sch.Sick) == 1) != (s.Endpoints == 2) {
				t.Errorf("shape %s: share %.2f, %d endpoints; schedule spares %v, sick %v", s.Name(), s.Share, s.Endpoints, sch.Spared != nil, sch.Sick)
			}
			reach := sch.Reach()
			if len(reach) != s.Calls() {
				t.Errorf("shape %s: %d calls, want %d", s.Name(), len(reach), s.Calls())
			}
			for i, r := range reach {
				at := time.Duration(i) * sch.Interval
				want := at < SweepLead || s.Endpoints == 2 || s.Fault == SweepSlowFirstByte || sch.Spared != nil && sch.Spared(i)
				if r.WithoutResend && !r.Reachable || want && !r.WithoutResend {
					t.Errorf("shape %s (%s), call %d at %s: %+v", s.Name(), s.Describe(), i, at, r)
					break
				}
			}
		}
	}
}

// TestReachDrawsAreLLMSims pins the limit's reading of llmsim's per-request
// draws to the simulator: the first requests of 60 calls, sent while a
// sweep shape's partial refusal is on, meet the fault exactly when the
// limit says they are not spared, and the others take the time to first
// token it predicts.
func TestReachDrawsAreLLMSims(t *testing.T) {
	var shape SweepShape
	for _, s := range GenerateSweep(1, 0, 127, testParams(20*time.Second)) {
		refused := s.Fault == SweepBadGateway || s.Fault == SweepBusy || s.Fault == SweepRateLimited
		if refused && s.Share > 0.3 && s.Share < 0.8 && s.Spread <= 0.5 {
			shape = s
			break
		}
	}
	if shape.Fault == "" {
		t.Fatal("no shape with a partial refusal and σ ≤ 0.5 among seed 1's first 128")
	}
	c, err := shape.Case()
	if err != nil {
		t.Fatal(err)
	}
	sch, ok := c.ReachSchedule()
	if !ok || sch.Spared == nil {
		t.Fatalf("shape %s: limit %v, spared %v", shape.Name(), ok, sch.Spared != nil)
	}
	// The simulator's clock runs from 1 s into the incident.
	var shift atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	sim, err := llmsim.New(llmsim.Options{Scenario: shape.Scenario(), Clock: clock, KeepGenerations: 1000,
		CallNumber: func(conv string) (int, bool) {
			var i int
			_, err := fmt.Sscanf(conv, "call-%d", &i)
			return i, err == nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	at := SweepLead + time.Second
	shift.Store(int64(at))
	const calls = 60
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"model": Model, "messages": []map[string]string{{"role": "user", "content": Question(i)}}})
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("call-%d/1", i))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // generations are recorded as their handlers return
	st := sim.Stats()
	ttft := map[string]time.Duration{}
	for _, g := range sim.Generations("") {
		ttft[g.Conversation] = g.TTFT.D()
	}
	faulted := 0
	for i := range calls {
		key := fmt.Sprintf("call-%d", i)
		cv := st.Conversations[key]
		if len(cv.Requests) != 1 {
			t.Fatalf("call %d: %d requests recorded", i, len(cv.Requests))
		}
		got := cv.Requests[0].Fault
		sc := shape.Scenario()
		if spared := spared(sc, c.Phases, Model, i, at); spared != (got == llmsim.FaultNone) {
			t.Errorf("call %d: the limit says spared %v, llmsim injected %q", i, spared, got)
		}
		if got != llmsim.FaultNone {
			faulted++
			continue
		}
		if want := sch.AnswerTime(i, Model); ttft[key] != want {
			t.Errorf("call %d: time to first token %s, the limit predicts %s", i, ttft[key], want)
		}
	}
	if faulted < 5 || faulted > calls-5 {
		t.Errorf("%d of %d first requests faulted at a share of %.2f", faulted, calls, shape.Share)
	}
}

// TestStormTwoReportsWhereTheStormLands: the two-endpoint storm's table
// opens with the reachable limit (every call: endpoint B is healthy) and
// gives each contender's amplification on the sick endpoint and its load
// on the healthy one; durable-llm's targets judge that load against
// 1 + ratio and its answers against the calls reachable without a resend.
func TestStormTwoReportsWhereTheStormLands(t *testing.T) {
	c, err := LoadStormCase("two", 20*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	var outs []Outcome
	for i := range 600 {
		outs = append(outs, Outcome{I: i, Start: time.Duration(i) * 100 * time.Millisecond, Latency: time.Second,
			Result: Result{ByModel: i%50 != 0, Answered: true}}) // 12 calls not answered by a model
	}
	sum := StormSummary{Calls: 600, IncidentCalls: 100, SickAmpStretch: 0.42,
		Endpoints: []EndpointLoad{{StormEndpoint: StormEndpoint{Name: EndpointA}, AmpIncident: 0.3}, {StormEndpoint: StormEndpoint{Name: EndpointB}, AmpIncident: 1.15}}}
	rep := &StormReport{Case: c, Runs: []StormRun{{Name: NameDurable, Outcomes: outs, Summary: sum}}}
	tab := rep.Table()
	col := func(name string) int {
		for k, c := range tab.Columns {
			if c == name {
				return k
			}
		}
		t.Fatalf("no column %q in %v", name, tab.Columns)
		return -1
	}
	if len(tab.Rows) != 2 || tab.Rows[0][0] != "reachable (limit, no run)" || tab.Rows[0][col("by a model")] != "100.0 %" || tab.Rows[0][col("by a model (incident)")] != "100.0 %" {
		t.Errorf("rows %v", tab.Rows)
	}
	if d := tab.Rows[1]; d[col("amplification on the sick endpoint (budget's stretch)")] != "0.42" || d[col("healthy endpoint: requests per incident call")] != "1.15" {
		t.Errorf("durable-llm's row %v", d)
	}
	targets := strings.Join(rep.Targets(), "\n")
	for _, want := range []string{
		"durable-llm requests on the healthy endpoint per call started in the incident ≤ 1 + ratio = 1.10 (its load, not a storm): 1.15 — MISSED",
		"durable-llm answered by a model ≥ 95 % of the 600 calls reachable without a resend on the sick endpoint: 98.0 % (588) — met",
	} {
		if !strings.Contains(targets, want) {
			t.Errorf("targets lack %q:\n%s", want, targets)
		}
	}
}
