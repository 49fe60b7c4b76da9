package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// flapping is a flapping endpoint in miniature: every model on it answers
// 503 for 3 s, twice, with 4 s up between and after.
const flapping = `
name: flap-test
seed: 7
load: {rate: 10, duration: 16s, client_timeout: 1s}
models:
  - {name: qwen-72b, context_window: 32768, slots: 200, queue: 200, latency: {dist: lognormal, median: 400ms, sigma: 0.2, max: 1200ms}}
  - {name: qwen-14b, context_window: 8192, slots: 200, queue: 200, latency: {dist: lognormal, median: 250ms, sigma: 0.2, max: 800ms}}
  - {name: llama-8b, context_window: 4096, slots: 200, queue: 200, latency: {dist: lognormal, median: 150ms, sigma: 0.2, max: 500ms}}
phases:
  - {name: up-1, duration: 2s}
  - {name: down-1, duration: 3s, faults: [{kind: unavailable}]}
  - {name: up-2, duration: 4s}
  - {name: down-2, duration: 3s, faults: [{kind: unavailable}]}
  - {name: recovered}
`

// TestIntegrationFlappingEndpointServesItsUpWindows runs durable-llm (one
// worker, the default policy, LLMCall on a dev server) against an endpoint
// that flaps, 10 calls a second, and checks what a user notices: a model
// answers ≥ 98 % of the calls started while the endpoint works (its up
// windows included), a model answers again within 2 s of each recovery,
// and the run costs at most the retry budget's share of extra requests.
func TestIntegrationFlappingEndpointServesItsUpWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c, err := stormCaseFrom("flap-test", []byte(flapping), 20*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunStorm(ctx, c, StormOptions{Temporal: srv.Client(), Contenders: []string{KeyDurable}})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Runs[0].Summary
	t.Logf("by a model: %.1f %% of %d calls while the endpoint works, %.1f %% in the incident; amplification %.2f in the incident, %.2f over the run; recoveries %s",
		s.WorkingByModelPct, s.WorkingCalls, s.IncidentByModelPct, s.AmpIncident, s.AmpOverall, s.RecoveryString())
	for _, o := range rep.Runs[0].Outcomes {
		if working, _ := c.Working(o.Start); working && !(o.ByModel && o.Latency <= c.Deadline) {
			// When its first request reached llmsim, on llmsim's clock: a
			// call due in an up window whose request arrived in a down
			// phase was late to leave (a busy machine), not refused, and
			// the summary judges it with that fault.
			first := "no request"
			if cv := rep.Runs[0].Stats.Conversations[o.Key]; len(cv.Requests) > 0 {
				f := cv.Requests[0]
				first = fmt.Sprintf("first request at %d ms of llmsim's clock: %s %s", f.AtMS, f.Outcome, f.Fault)
			}
			t.Logf("call %d started at %s while the endpoint works, ended after %s: source %q, %s, path %s, error %v",
				o.I, fmtDur(o.Start), fmtDur(o.Latency), o.Source, first, o.Path, o.Err)
		}
	}
	if s.WorkingCalls < 90 || s.UpCalls < 30 {
		t.Fatalf("%d calls while the endpoint works, %d in its up window: the run did not flap as written", s.WorkingCalls, s.UpCalls)
	}
	if s.WorkingByModelPct < 98 {
		t.Errorf("a model answered %.1f %% of the %d calls started while the endpoint works (%.1f %% of the %d in the up window between the faults), want ≥ 98 %%",
			s.WorkingByModelPct, s.WorkingCalls, s.UpByModelPct, s.UpCalls)
	}
	if len(s.Recoveries) != 2 {
		t.Fatalf("%d fault ends judged, want 2", len(s.Recoveries))
	}
	for _, r := range s.Recoveries {
		if !r.Recovered || r.After > 2*time.Second {
			t.Errorf("after the fault that ended at %s: recovered %v, %s later; want model answers within 2 s", fmtDur(r.At), r.Recovered, fmtDur(r.After))
		}
	}
	if s.AnsweredPct != 100 {
		t.Errorf("%.1f %% answered within the deadline, want every call (the FAQ for the rest)", s.AnsweredPct)
	}
	// The retry budget bounds the retries of any stretch by 10 % of its
	// requests plus the floor: over the run, then. (Over the incident's
	// calls alone the bench's bound can be passed by the calls that wait
	// out the incident and are answered after it, paid for by the traffic
	// after it: docs/benchmarks.md.)
	if limit := 1.10 + 10/float64(s.Calls); s.AmpOverall > limit {
		t.Errorf("%.2f upstream requests per call over the run, want ≤ %.2f (the retry budget)", s.AmpOverall, limit)
	}
}
