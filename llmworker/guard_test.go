package llmworker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationSharedGuardAcrossWorkerProcesses: a breaker opened by the
// failures one worker process saw is honoured by another process that
// never saw them, through the task queue's guard workflow. Worker A
// answers calls whose first model fails until its breaker opens; then A
// stops and worker B, fresh, takes the next call: it skips the model
// without sending it a request. The breaker opens for 30 s here (the
// policy's first open period is 1 s), so that it is still open once B has
// started and read the fleet's view.
func TestIntegrationSharedGuardAcrossWorkerProcesses(t *testing.T) {
	srv := shared.Server(t)
	sim := rig.Sim(t, llmsim.Options{})
	c := srv.Client()
	tq := "llm-guard-" + uuid.NewString()[:8]
	bin := buildWorker(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("breaker:\n  open_for: 30s\n"), 0o600))
	env := []string{"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(), "LLM_BASE_URL=" + sim.BaseURL, "WORKER_TASK_QUEUE=" + tq, "POLICY_FILE=" + policy}
	lc := &llmclient.Client{Temporal: c, TaskQueue: tq}
	ask := func(i int) workflows.CallResult {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := lc.Call(ctx, question(fmt.Sprintf("[[sim fault=server_error model=qwen-72b times=always]] order %d?", i)))
		require.NoError(t, err)
		return res
	}

	a := startWorkerProc(t, bin, env...)
	waitForPoller(t, c, tq, a.pid())
	opened := time.Time{}
	for i := 0; opened.IsZero(); i++ {
		require.Less(t, i, 10, "worker A's breaker of qwen-72b never opened")
		if d := workflows.CallResult.Decisions(ask(i)); slices.Contains(d, "qwen-72b:breaker_open:switch_model") {
			opened = time.Now()
		}
	}
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	<-a.exited

	b := startWorkerProc(t, bin, env...)
	waitForPoller(t, c, tq, b.pid())
	// The fleet's view holds the open breaker once the guard workflow has
	// taken A's last report (B's worker runs it now that A is gone); then
	// three sync intervals later B has read that view. A workflow task
	// handed to A's last poll first times out (10 s).
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, err := c.QueryWorkflow(ctx, workflows.GuardID(tq), "", workflows.QueryGuardView, time.Now())
		var view guard.View
		return err == nil && v.Get(&view) == nil && view.Open["qwen-72b"].After(time.Now())
	}, 40*time.Second, 100*time.Millisecond, "the fleet's view never showed qwen-72b's breaker open")
	time.Sleep(1500 * time.Millisecond)
	before := sim.Stats().Models["qwen-72b"].Arrivals
	res := ask(100)
	require.Equal(t, "qwen-72b:breaker_open:switch_model", workflows.CallResult.Decisions(res)[0], "worker B sent a request to the model whose breaker the fleet opened: %v", workflows.CallResult.Decisions(res))
	require.Equal(t, before, sim.Stats().Models["qwen-72b"].Arrivals, "worker B sent a request to qwen-72b")
	t.Logf("worker B (pid %d) honoured the breaker worker A (pid %d) opened, %v after A saw it open", b.pid(), a.pid(), time.Since(opened).Round(10*time.Millisecond))
}

// waitForPoller waits until the worker process pid polls tq's workflow
// tasks.
func waitForPoller(t *testing.T, c client.Client, tq string, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return pollerPIDs(t, c, tq, enumspb.TASK_QUEUE_TYPE_WORKFLOW)[pid] },
		60*time.Second, 100*time.Millisecond, "worker pid %d never polled %s", pid, tq)
}

// TestIntegrationFleetViewTravelsThroughTheMemo: two workers linked to
// one guard. The guard counts both; a breaker one opens on its own
// failures is open in the other within two sync intervals of the news,
// which is reported at once (not at the routine rate); when the first
// leaves, the other counts a fleet of one again and keeps the whole
// floor. The workers read only the guard's memo (no query).
func TestIntegrationFleetViewTravelsThroughTheMemo(t *testing.T) {
	srv := shared.Server(t)
	c := srv.Client()
	tq := "llm-guard-memo-" + uuid.NewString()[:8]
	cfg := config.DefaultConfig()
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.LLMGuard, workflow.RegisterOptions{Name: workflows.GuardWorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	type member struct {
		sync     *guard.Sync
		breakers *guard.BreakerRegistry
		budgets  *guard.Budgets
		link     *llmworker.GuardLink
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	join := func(name string) member {
		m := member{sync: guard.NewSync(name, 2*time.Second), breakers: guard.NewBreakerRegistry(cfg.Breaker, nil), budgets: guard.NewBudgets(cfg.Budget)}
		m.breakers.SetSync(m.sync)
		m.budgets.SetSync(m.sync)
		m.link = llmworker.NewGuardLink(c, m.sync, llmworker.GuardLinkOptions{TaskQueue: tq, Input: workflows.GuardInput{Breaker: cfg.Breaker}, Interval: 200 * time.Millisecond})
		go m.link.Run(ctx)
		return m
	}
	a, b := join("a"), join("b")
	require.Eventually(t, func() bool { return a.sync.Workers() == 2 && b.sync.Workers() == 2 }, 20*time.Second, 50*time.Millisecond,
		"the workers never learned a fleet of two (a: %d, b: %d)", a.sync.Workers(), b.sync.Workers())
	const ep = "http://upstream.example:8000"
	require.Equal(t, cfg.Budget.Floor/2, b.budgets.For(ep).Remaining(time.Now()), "each worker of two keeps half the floor")

	for range cfg.Breaker.ConsecutiveFailures {
		a.breakers.RecordOutcome("qwen-72b", time.Now(), failure.ServerError)
	}
	opened := time.Now()
	require.Equal(t, guard.BreakerOpen, a.breakers.State("qwen-72b", opened), "a's breaker opened on its own failures")
	require.Eventually(t, func() bool { return b.breakers.State("qwen-72b", time.Now()) == guard.BreakerOpen }, 5*time.Second, 20*time.Millisecond,
		"b never held open the breaker a opened")
	took := time.Since(opened)
	require.Less(t, took, 2*time.Second, "the news took %v to reach the other worker", took)
	t.Logf("a breaker one worker opened was open in the other %v later", took.Round(10*time.Millisecond))

	lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer lcancel()
	require.NoError(t, a.link.Leave(lctx))
	require.Eventually(t, func() bool { return b.sync.Workers() == 1 }, 10*time.Second, 50*time.Millisecond, "b still counts %d workers after a left", b.sync.Workers())
	require.Equal(t, cfg.Budget.Floor, b.budgets.For(ep).Remaining(time.Now()), "alone, a worker keeps the whole floor")
	require.Positive(t, a.link.Reads())
}

// TestIntegrationWorkerCutOffForLongSyncsAgain: a worker whose guard
// could not be reached for long syncs again once it is back. Before it
// starts, its guards record what 40 minutes at 20 attempts a second over
// two models leave to report (48,000 outcomes, which a report keeping
// them all would carry in about 4 MB, past what Temporal takes, so that
// it would be refused and sent again for ever); the last five attempts of
// one model fail. Started, the worker's first report is taken: the
// fleet's view acknowledges it and holds what the worker saw lately (the
// breaker its last failures opened, the budget's window of requests, not
// 40 minutes of them), and the worker reads that view.
func TestIntegrationWorkerCutOffForLongSyncsAgain(t *testing.T) {
	srv := shared.Server(t)
	c := srv.Client()
	tq := "llm-guard-cut-off-" + uuid.NewString()[:8]
	cfg := config.DefaultConfig()
	// Open long enough to be still open when the worker has started.
	cfg.Breaker.OpenFor, cfg.Breaker.OpenForMax = config.Duration(5*time.Minute), config.Duration(5*time.Minute)
	require.NoError(t, cfg.Validate())
	identity := "cut-off-" + uuid.NewString()[:8]
	w, err := llmworker.New(c, llmworker.Options{Config: cfg, TaskQueue: tq, Worker: worker.Options{Identity: identity}})
	require.NoError(t, err)

	breakers := guard.NewBreakerRegistry(cfg.Breaker, nil)
	breakers.SetSync(w.Sync)
	budgets := guard.NewBudgets(cfg.Budget)
	budgets.SetSync(w.Sync)
	const ep, rate = "http://upstream.example:8000", 20
	models := []string{"qwen-72b", "llama-8b"}
	step := time.Second / rate
	total := int(40 * time.Minute / step)
	start := time.Now().Add(-time.Duration(total) * step)
	for i := range total {
		at := start.Add(time.Duration(i) * step)
		m := models[i%len(models)]
		budgets.For(ep).RecordRequest(at)
		class := failure.None
		if m == models[0] && i >= total-5*len(models) {
			class = failure.ServerError
		}
		breakers.RecordOutcome(m, at, class)
	}
	require.Equal(t, guard.BreakerOpen, breakers.State(models[0], time.Now()), "the worker's own breaker opened on the last failures")

	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	var view guard.View
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, err := c.QueryWorkflow(ctx, workflows.GuardID(tq), "", workflows.QueryGuardView, time.Now())
		if err != nil || v.Get(&view) != nil {
			return false
		}
		return view.Open[models[0]].After(time.Now())
	}, 30*time.Second, 200*time.Millisecond, "the fleet's guard never took the report of the worker that was cut off")
	require.Eventually(t, func() bool {
		v, at := w.Sync.View()
		return !at.IsZero() && v.Workers == 1 && v.Open[models[0]].After(time.Now())
	}, 10*time.Second, 100*time.Millisecond, "the worker never read the fleet's view")
}
