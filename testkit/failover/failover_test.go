package failover_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// The endpoints' scenarios. Endpoint A serves only primary, B only
// backup; phases start when the case's first call is made.
const (
	healthyA = `
name: healthy-a
models: [{name: primary}]
`
	healthyB = `
name: healthy-b
models: [{name: backup}]
`
	// lostA loses every request: no byte comes back until the client
	// gives up (hang, not pause: nothing is served later).
	lostA = `
name: lost-a
models: [{name: primary}]
phases:
  - name: lost
    faults: [{kind: hang}]
`
	// busyA refuses every request with Ollama's 503 "server busy".
	busyA = `
name: busy-a
models: [{name: primary}]
phases:
  - name: busy
    faults: [{kind: server_busy}]
`
)

// busy12s is the scenario of an endpoint serving model that refuses every
// request with Ollama's 503 "server busy" for 12 s, then serves.
func busy12s(model string) string {
	return fmt.Sprintf(`
name: busy-12s-%[1]s
models: [{name: %[1]s}]
phases:
  - {name: busy, duration: 12s, faults: [{kind: server_busy}]}
  - {name: recovered}
`, model)
}

// failoverCase is one case: the two endpoints' scenarios, how many calls
// at 2 a second with which deadline, and what the outcome must be.
type failoverCase struct {
	name     string
	a, b     string // scenarios of endpoints A and B
	calls    int
	deadline time.Duration
	check    func(t *testing.T, o outcome)
}

// call is one call's result as its caller saw it.
type call struct {
	res  workflows.CallResult
	err  error
	took time.Duration
}

// outcome is what a case observed.
type outcome struct {
	calls      []call
	byModel    int
	bySource   map[string]int
	requestsA  int
	requestsB  int
	responsesA map[string]int
	responsesB map[string]int
	wall       time.Duration
}

// failoverRun is a case set up and ready to drive.
type failoverRun struct {
	c     failoverCase
	a, b  *llmsim.Server
	stack *rig.Stack
	out   outcome
}

// TestIntegrationFailover: a ladder of two models on two endpoints,
// primary on A and backup on B, default guard settings otherwise (the
// policy is a file, loaded as the worker binary loads --policy). Calls
// start at 2 a second, each its own goroutine.
//
//   - lost: A loses every request, B is healthy; 40 calls, deadline 20 s:
//     at least 38 answered by a model.
//   - busy: A answers every request 503 "server busy" (Ollama's words), B
//     is healthy; 40 calls, deadline 20 s: all 40 answered by a model.
//   - busy-then-recovered: A and B both answer 503 "server busy" for the
//     first 12 s, then serve; 20 calls, deadline 25 s: at least 19
//     answered by a model, with at most 1.5 × calls + 10 requests on the
//     two endpoints together.
//
// The cases are driven at once (each with its own llmsim servers, worker
// and task queue, so their guards never meet), then each is reported in
// its own subtest: answered by a model, by source, requests on A and B,
// and the path of every call a model did not answer.
func TestIntegrationFailover(t *testing.T) {
	cases := []failoverCase{
		{name: "lost", a: lostA, b: healthyB, calls: 40, deadline: 20 * time.Second, check: func(t *testing.T, o outcome) {
			assert.GreaterOrEqual(t, o.byModel, 38, "calls answered by a model while A loses every request")
		}},
		{name: "busy", a: busyA, b: healthyB, calls: 40, deadline: 20 * time.Second, check: func(t *testing.T, o outcome) {
			assert.Equal(t, 40, o.byModel, "calls answered by a model while A is busy")
		}},
		{name: "busy-then-recovered", a: busy12s("primary"), b: busy12s("backup"), calls: 20, deadline: 25 * time.Second, check: func(t *testing.T, o outcome) {
			assert.GreaterOrEqual(t, o.byModel, 19, "calls answered by a model when both endpoints are busy for 12 s")
			limit := 3*len(o.calls)/2 + 10
			assert.LessOrEqual(t, o.requestsA+o.requestsB, limit, "requests on A and B together (at most 1.5 × calls + 10)")
		}},
	}
	runs := make([]*failoverRun, len(cases))
	for i, c := range cases {
		runs[i] = setUp(t, c)
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); r.drive() }()
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.c.name, func(t *testing.T) {
			r.report(t)
			r.c.check(t, r.out)
		})
	}
}

// setUp starts a case's two llmsim servers and a worker whose policy file
// names them.
func setUp(t *testing.T, c failoverCase) *failoverRun {
	t.Helper()
	sim := func(yaml, which string) *llmsim.Server {
		sc, err := llmsim.ParseScenario([]byte(yaml), c.name+"-"+which)
		require.NoError(t, err)
		return rig.Sim(t, llmsim.Options{Scenario: sc})
	}
	r := &failoverRun{c: c, a: sim(c.a, "a"), b: sim(c.b, "b")}
	policy := fmt.Sprintf(`# %s: primary on endpoint A, backup on endpoint B; the guard's defaults.
models:
  - name: primary
    base_url: %s
  - name: backup
    base_url: %s
`, c.name, r.a.BaseURL, r.b.BaseURL)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(policy), 0o644))
	cfg, err := config.LoadConfigOrDefault(path) // as the worker binary loads --policy
	require.NoError(t, err)
	r.stack = rig.New(t, rig.Options{Shared: &shared, Config: cfg, QueuePrefix: "failover-" + c.name + "-"})
	return r
}

// drive makes the case's calls at 2 a second, each in its own goroutine,
// and waits for them all. It uses no *testing.T: it runs beside the other
// cases.
func (r *failoverRun) drive() {
	c := r.c
	r.out.calls = make([]call, c.calls)
	run := uuid.NewString()[:8]
	r.a.Reset() // the scenarios' phases start with the first call
	r.b.Reset()
	begin := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := range c.calls {
		if i > 0 {
			<-tick.C
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := workflows.CallRequest{
				UserID: fmt.Sprintf("u-%s-%d", run, i), SessionID: "s-" + run, Scenario: "customer_service",
				DeadlineMS: c.deadline.Milliseconds(),
				Messages: []request.Message{
					{Role: "system", Content: "You are a support agent."},
					{Role: "user", Content: fmt.Sprintf("Case %s, call %d (%s): what colour is the sky on planet %d?", c.name, i, run, i)},
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline+time.Minute)
			defer cancel()
			start := time.Now()
			res, err := r.stack.Calls.Call(ctx, req)
			r.out.calls[i] = call{res: res, err: err, took: time.Since(start)}
		}()
	}
	wg.Wait()
	r.out.wall = time.Since(begin)
	r.out.bySource = map[string]int{}
	for _, cl := range r.out.calls {
		src := string(cl.res.Source)
		if cl.err != nil {
			src = "error"
		}
		r.out.bySource[src]++
		if answeredByModel(cl) {
			r.out.byModel++
		}
	}
	sa, sb := r.a.Stats(), r.b.Stats()
	r.out.requestsA, r.out.requestsB = sa.Totals.Arrivals, sb.Totals.Arrivals
	r.out.responsesA, r.out.responsesB = sa.Totals.Responses, sb.Totals.Responses
}

func answeredByModel(c call) bool {
	return c.err == nil && (c.res.Source == workflows.SourceModel || c.res.Source == workflows.SourceFallbackModel)
}

// report logs what the case saw, so that a failing run says why.
func (r *failoverRun) report(t *testing.T) {
	o := r.out
	t.Logf("%s: %d calls (deadline %v) in %v: answered by a model %d/%d; by source %v",
		r.c.name, len(o.calls), r.c.deadline, o.wall.Round(time.Millisecond), o.byModel, len(o.calls), o.bySource)
	t.Logf("requests: A (primary) %d %v, B (backup) %d %v, together %d",
		o.requestsA, o.responsesA, o.requestsB, o.responsesB, o.requestsA+o.requestsB)
	took := make([]time.Duration, 0, len(o.calls))
	for _, c := range o.calls {
		took = append(took, c.took)
	}
	slices.Sort(took)
	q := func(f float64) time.Duration { return took[int(f*float64(len(took)-1))].Round(10 * time.Millisecond) }
	t.Logf("call durations: p50 %v, p90 %v, max %v", q(0.5), q(0.9), q(1))
	paths := map[string]int{}
	for _, c := range o.calls {
		paths[string(c.res.Source)+" ← "+strings.Join(c.res.Decisions(), " > ")]++
	}
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("  %3d × %s", paths[k], k)
	}
	for i, c := range o.calls {
		if answeredByModel(c) {
			continue
		}
		if c.err != nil {
			t.Logf("unanswered call %d after %v: error %v", i, c.took.Round(time.Millisecond), c.err)
			continue
		}
		t.Logf("unanswered call %d after %v: source %s, path %v, reason %q",
			i, c.took.Round(time.Millisecond), c.res.Source, c.res.Decisions(), c.res.Reason)
		for _, a := range c.res.Attempts {
			t.Logf("    #%d %s:%s:%s status %d after %d ms (delay %d ms, hedge %v): %s",
				a.N, a.Model, cmp.Or(a.Class, "ok"), a.Decision, a.Status, a.DurationMS, a.DelayMS, a.Hedge, a.Reason)
		}
	}
}
