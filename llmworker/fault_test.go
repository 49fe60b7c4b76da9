package llmworker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// buildWorker builds the worker command (the binary operators run).
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin, "../worker")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ../worker:\n%s", out)
	return bin
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// workerProc is a worker process started from the built binary.
type workerProc struct {
	cmd     *exec.Cmd
	log     *lockedBuffer
	metrics string // address of its /metrics
	exited  chan struct{}
}

// startWorkerProc starts the worker binary with env (KEY=value) on top of
// this process's environment, serving metrics on a free port. The test
// prints its log when it fails.
func startWorkerProc(t *testing.T, bin string, env ...string) *workerProc {
	t.Helper()
	p := &workerProc{log: &lockedBuffer{}, metrics: freeAddr(t), exited: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(append(os.Environ(), "METRICS_ADDR="+p.metrics, "LOG_LEVEL=warn"), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if p.alive() {
			_ = p.cmd.Process.Kill()
		}
		<-p.exited
		if t.Failed() {
			t.Logf("worker pid %d output:\n%s", p.cmd.Process.Pid, p.log.String())
		}
	})
	return p
}

func (p *workerProc) pid() int { return p.cmd.Process.Pid }

func (p *workerProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// identityPID reads the process ID out of a Temporal SDK worker identity
// ("<pid>@<host>@…", the SDK's default).
func identityPID(identity string) int {
	pid, err := strconv.Atoi(strings.SplitN(identity, "@", 2)[0])
	if err != nil {
		return -1
	}
	return pid
}

// pollerPIDs are the processes polling a task queue, as Temporal sees them.
func pollerPIDs(t *testing.T, c client.Client, tq string, kind enumspb.TaskQueueType) map[int]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.DescribeTaskQueue(ctx, tq, kind)
	require.NoError(t, err)
	pids := map[int]bool{}
	for _, p := range resp.GetPollers() {
		pids[identityPID(p.GetIdentity())] = true
	}
	return pids
}

// openCalls lists the LLMCall workflows still running on a task queue.
func openCalls(t *testing.T, c client.Client, tq string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("TaskQueue = %q AND WorkflowType = %q AND ExecutionStatus = 'Running'", tq, workflows.WorkflowName),
	})
	require.NoError(t, err)
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}

// requireNoOpenCalls fails unless visibility soon lists no running LLMCall
// on the task queue (visibility trails a workflow's close by a moment).
func requireNoOpenCalls(t *testing.T, c client.Client, tq string) {
	t.Helper()
	var open []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		if open = openCalls(t, c, tq); len(open) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still running on %s after 15s: %v", tq, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestIntegrationKillTheWorkerHoldingTheAttempt runs two worker processes
// on one task queue from the start and SIGKILLs the one whose call
// activity holds the upstream request. The other one resends the same
// attempt (same Idempotency-Key) after the heartbeat timeout, once.
//
// Which process holds the attempt is read from Temporal itself, as an
// operator would: the pending activity's last worker identity, whose
// default form starts with the worker's process ID.
func TestIntegrationKillTheWorkerHoldingTheAttempt(t *testing.T) {
	srv := shared.Server(t)
	sim := rig.Sim(t, llmsim.Options{})
	c := srv.Client()
	tq := "llm-kill-" + uuid.NewString()[:8]
	bin := buildWorker(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("call:\n  heartbeat_timeout: 2s\n"), 0o600))
	env := []string{"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(), "LLM_BASE_URL=" + sim.BaseURL,
		"POLICY_FILE=" + policy, "WORKER_TASK_QUEUE=" + tq}
	procs := map[int]*workerProc{}
	for i := 0; i < 2; i++ {
		p := startWorkerProc(t, bin, env...)
		procs[p.pid()] = p
	}
	require.Eventually(t, func() bool {
		pids := pollerPIDs(t, c, tq, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		for pid := range procs {
			if !pids[pid] {
				return false
			}
		}
		return true
	}, 60*time.Second, 200*time.Millisecond, "both worker processes should poll %s", tq)

	lc := &llmclient.Client{Temporal: c, TaskQueue: tq}
	run, err := lc.Start(context.Background(), question("[[sim fault=latency latency=30s times=1]] Is my refund processed?"))
	require.NoError(t, err)
	id := run.GetID()
	require.Eventually(t, func() bool { return sim.Stats().Conversations[id].Attempts == 1 }, 30*time.Second, 50*time.Millisecond,
		"the first attempt never reached the upstream")

	var holder int
	require.Eventually(t, func() bool {
		holder = identityPID(testenv.PendingActivityWorker(context.Background(), c, id, "CallModel"))
		return holder > 0 // -1 while no worker holds it
	}, 10*time.Second, 50*time.Millisecond, "no pending CallModel activity with a worker identity")
	victim, ok := procs[holder]
	require.True(t, ok, "the attempt is held by pid %d, not one of our workers %v", holder, procs)
	var survivor *workerProc
	for pid, p := range procs {
		if pid != holder {
			survivor = p
		}
	}
	killedAt := time.Now()
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	<-victim.exited

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.CallResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, []string{"qwen-72b:worker_lost:resend", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, workflows.SourceModel, res.Source)
	up := sim.Stats().Conversations[id]
	require.Equal(t, 2, up.Attempts, "exactly one resent attempt: %+v", up.Requests)
	require.Equal(t, id+"/1", up.Requests[0].IdempotencyKey)
	require.Equal(t, up.Requests[0].IdempotencyKey, up.Requests[1].IdempotencyKey, "the resend keeps its Idempotency-Key")
	resentAt := sim.Stats().Start.Add(time.Duration(up.Requests[1].AtMS) * time.Millisecond)
	t.Logf("killed worker pid %d holding the attempt; pid %d resent it %v later (heartbeat timeout 2s)",
		victim.pid(), survivor.pid(), resentAt.Sub(killedAt).Round(10*time.Millisecond))

	// The resend ran on the survivor, which is still alive.
	var starts []int
	iter := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			starts = append(starts, identityPID(a.GetIdentity()))
		}
		if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
			t.Logf("workflow task timed out (%s): it waited on the killed worker's sticky queue", a.GetTimeoutType())
		}
	}
	require.Equal(t, []int{victim.pid(), survivor.pid()}, starts, "activity task started by: the killed worker, then the survivor")
	require.True(t, survivor.alive())
	requireNoOpenCalls(t, c, tq)
}

// TestIntegrationDevServerRestartMidCall stops the Temporal dev server
// while a call waits out a Retry-After, and starts it again on the same
// database file and port: the worker and the waiting client reconnect and
// the call completes.
func TestIntegrationDevServerRestartMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	hostPort := freeAddr(t)
	start := func() interface{ Stop() error } {
		s, err := testenv.StartServer(context.Background(), workflows.SearchAttributes, testenv.ServerOptions{DBFile: db, HostPort: hostPort})
		require.NoError(t, err, "start the dev server on %s with %s", hostPort, db)
		return s
	}
	srv := start()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})

	// Our own client (the server's own dies with it): it reconnects.
	c, err := client.Dial(client.Options{HostPort: hostPort, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s := rig.New(t, rig.Options{Client: c, QueuePrefix: "llm-restart-"})

	run, err := s.Calls.Start(context.Background(), question("[[sim fault=rate_limited retry_after=8s times=1]] When does my order ship?"))
	require.NoError(t, err)
	id := run.GetID()
	type result struct {
		res workflows.CallResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var r result
		r.err = run.Get(ctx, &r.res)
		done <- r
	}()

	// Wait until the call sleeps in its Retry-After timer.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := s.Calls.State(ctx, id)
		return err == nil && len(st.Attempts) == 1 && st.Attempts[0].Decision == "wait retry-after"
	}, 30*time.Second, 100*time.Millisecond, "the call never started waiting out Retry-After")

	down := time.Now()
	require.NoError(t, srv.Stop())
	stopped = true
	time.Sleep(time.Second)
	srv = start()
	stopped = false
	t.Logf("dev server down and back on the same file in %v", time.Since(down).Round(time.Millisecond))

	var r result
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the call did not complete within 3 minutes of the restart")
	}
	require.NoError(t, r.err, "the client waiting for the call across the restart")
	require.Equal(t, []string{"qwen-72b:rate_limited:wait retry-after", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(r.res))
	require.Equal(t, workflows.SourceModel, r.res.Source)
	require.Equal(t, 2, s.Upstream(id).Attempts, "no attempt lost or doubled by the restart")
	requireNoOpenCalls(t, c, s.TaskQueue)
}

// garbagePolicy keeps breakers and the budget out of the way (each case
// must show its own class) and makes timeouts short: 1 s for the first
// token, 4 s for a whole attempt.
const garbagePolicy = `model_defaults:
  timeout: 4s
  first_token_timeout: 1s
models:
  - {name: qwen-72b, base_url: "http://127.0.0.1:9/v1"}
  - {name: qwen-14b, base_url: "http://127.0.0.1:9/v1"}
  - {name: llama-8b, base_url: "http://127.0.0.1:9/v1"}
call:
  heartbeat_timeout: 2s
budget:
  floor: 1000
breaker:
  consecutive_failures: 1000
  min_calls: 1000
  window: 1000
`

// TestIntegrationUpstreamGarbageIsClassified sends calls into resets,
// hangs, slow-drip bodies, malformed JSON and broken bodies. Each attempt is
// classified, each call is answered by a retry, another model or the
// fallback, no workflow stays open, and the worker process lives on.
func TestIntegrationUpstreamGarbageIsClassified(t *testing.T) {
	srv := shared.Server(t)
	sim := rig.Sim(t, llmsim.Options{})
	c := srv.Client()
	tq := "llm-garbage-" + uuid.NewString()[:8]
	bin := buildWorker(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(garbagePolicy), 0o600))
	proc := startWorkerProc(t, bin, "TEMPORAL_ADDRESS="+srv.FrontendHostPort(), "LLM_BASE_URL="+sim.BaseURL,
		"POLICY_FILE="+policy, "WORKER_TASK_QUEUE="+tq)
	lc := &llmclient.Client{Temporal: c, TaskQueue: tq}

	cases := []struct {
		name      string
		directive string
		classes   []string // of the failed attempts, in order
		answered  string   // "model", "fallback_model" or "degraded" ("|" between several)
		// hedged: a hedge may have answered first, its rival cancelled
		// with no class of its own (no failed attempt at all)
		hedged bool
	}{
		// The request was sent, so it may have been processed: not a
		// connect failure to resend at once (docs/how-it-works.md "Failure classes"), but a server error.
		{"reset after the request, before the response", "[[sim fault=reset model=qwen-72b times=always]]",
			[]string{"server_error", "server_error"}, "fallback_model", false},
		// Kept open to the attempt's timeout, then the next model; or, when
		// the endpoint answers the other cases' newer requests in time
		// meanwhile, raced by a hedge on the same model, which answers.
		{"hang: no response headers", "[[sim fault=hang times=1]]",
			[]string{"read_timeout"}, "model|fallback_model", true},
		{"slow-drip body past the attempt timeout", "[[sim fault=slow_drip duration=12s times=1]]",
			[]string{"timeout"}, "model", false},
		{"malformed JSON", "[[sim fault=malformed_json times=1]]",
			[]string{"body_error"}, "model", false},
		{"stream cut after its first chunks", "[[sim fault=stream_break times=1]]",
			[]string{"stream_broken"}, "model", false},
		{"malformed JSON from every model", "[[sim fault=malformed_json times=always]]",
			[]string{"body_error", "body_error", "body_error", "body_error"}, "degraded", false},
		{"every model hangs", "[[sim fault=hang times=always]]",
			// switch, switch, then the last model is retried once, pruned;
			// a hedge that hangs too is one of the four requests
			[]string{"read_timeout", "read_timeout", "read_timeout", "read_timeout"}, "degraded", false},
	}
	var ids []string
	var mu sync.Mutex
	t.Run("cases", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := lc.Call(ctx, question(fmt.Sprintf("%s Where is parcel %d?", tc.directive, i)))
				require.NoError(t, err)
				mu.Lock()
				ids = append(ids, res.RequestID)
				mu.Unlock()
				var classes []string
				for _, a := range res.Attempts {
					if a.Class != "" {
						classes = append(classes, a.Class)
					}
				}
				t.Logf("%s: %v", tc.name, workflows.CallResult.Decisions(res))
				if !(tc.hedged && len(classes) == 0) {
					require.Equal(t, tc.classes, classes, "classes of the failed attempts: %v", workflows.CallResult.Decisions(res))
				}
				switch tc.answered {
				case "degraded":
					require.True(t, res.Degraded)
					require.Contains(t, []workflows.Source{workflows.SourceFAQ, workflows.SourceRule, workflows.SourcePlaceholder}, res.Source)
					require.NotEmpty(t, res.Content)
				default:
					require.Contains(t, strings.Split(tc.answered, "|"), string(res.Source))
					require.Contains(t, res.Content, "["+res.Model+"]", "a model's answer")
				}
				require.GreaterOrEqual(t, sim.Stats().Conversations[res.RequestID].Attempts, len(classes), "every failed attempt reached the upstream")
			})
		}
	})

	require.Len(t, ids, len(cases))
	requireNoOpenCalls(t, c, tq)
	require.True(t, proc.alive(), "the worker process died:\n%s", proc.log.String())
	resp, err := http.Get("http://" + proc.metrics + "/metrics")
	require.NoError(t, err, "the worker no longer serves /metrics")
	_ = resp.Body.Close()
	fams := scrape(t, proc.metrics)
	for _, class := range []string{"server_error", "read_timeout", "timeout", "body_error"} {
		n, _ := sum(fams, "llm_attempts_total", map[string]string{"class": class})
		require.Positive(t, n, "llm_attempts_total{class=%q}", class)
	}
	require.NotContains(t, proc.log.String(), "panic", "the worker logged a panic")
}
