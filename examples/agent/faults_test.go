package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/examples/agent"
	"github.com/durable-llm/durable-llm/llmnexus"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// The fault tests run each worker as a process of its own (this test
// binary, re-run as TestFaultWorkerProcess) so that a kill is a SIGKILL:
// no graceful stop, no drained activity, no sticky queue handed back.
const (
	envRole      = "AGENT_FAULT_ROLE" // "agent" or "llm"
	envAddress   = "AGENT_FAULT_ADDRESS"
	envNamespace = "AGENT_FAULT_NAMESPACE"
	envQueue     = "AGENT_FAULT_QUEUE"
	envSimURL    = "AGENT_FAULT_SIM_URL"
	envHeartbeat = "AGENT_FAULT_HEARTBEAT"
)

// slowQuestion makes the first request of each turn wait 3 s in llmsim
// before it answers (times=1: a resend of the same turn answers at once),
// so a kill lands while the upstream request is open.
const slowQuestion = "[[sim fault=latency latency=3s]] Where is my order 12?"

// TestFaultWorkerProcess is not a test: it is the worker process the
// fault tests start and kill. It runs the agent worker or the durable-llm
// worker that its environment names until it is killed or its stdin
// closes (the test that started it has gone).
func TestFaultWorkerProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("the worker process of the fault tests; they start it")
	}
	c, err := client.Dial(client.Options{HostPort: os.Getenv(envAddress), Namespace: os.Getenv(envNamespace),
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	queue := os.Getenv(envQueue)
	switch role {
	case "agent":
		w := worker.New(c, queue, worker.Options{})
		agent.Register(w, c, &agent.Tools{Orders: orders})
		require.NoError(t, w.Start())
		defer w.Stop()
	case "llm":
		rig.New(t, rig.Options{Client: c, Endpoint: os.Getenv(envSimURL), TaskQueue: queue, Policy: func(cfg *config.Config) {
			// These tests judge what a fault costs in requests and
			// answers, not deadlines: a loaded machine can take tens of
			// seconds to bring its workers back after the dev server
			// returns, and a call whose default 30 s deadline ran out
			// meanwhile would answer from the FAQ, hiding what the test
			// looks for.
			cfg.Call.Deadline = config.Duration(2 * time.Minute)
			cfg.Call.MaxDeadline = max(cfg.Call.MaxDeadline, cfg.Call.Deadline)
			if hb := os.Getenv(envHeartbeat); hb != "" {
				d, err := time.ParseDuration(hb)
				require.NoError(t, err)
				cfg.Call.HeartbeatTimeout = config.Duration(d)
			}
		}, Worker: func(o *llmworker.Options) { o.Logger = slog.New(slog.DiscardHandler) }})
	default:
		t.Fatalf("unknown role %q", role)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// workerProcess is a worker started as a process of its own.
type workerProcess struct {
	role   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workerSpec says which worker a process runs and where.
type workerSpec struct {
	role, address, namespace, queue, simURL, heartbeat string
}

// startWorkerProcess starts the worker spec names and waits until it
// polls. The test kills it when it ends and prints its output if it
// failed.
func startWorkerProcess(t *testing.T, spec workerSpec) *workerProcess {
	t.Helper()
	p := &workerProcess{role: spec.role, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestFaultWorkerProcess$", "-test.timeout=0")
	p.cmd.Env = append(os.Environ(), envRole+"="+spec.role, envAddress+"="+spec.address, envNamespace+"="+spec.namespace,
		envQueue+"="+spec.queue, envSimURL+"="+spec.simURL, envHeartbeat+"="+spec.heartbeat)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.cmd.Stderr = p.out
	_, err = p.cmd.StdinPipe() // closed when this test binary exits: the process then ends
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
			_, _ = p.out.Write(append(sc.Bytes(), '\n'))
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s worker pid %d output:\n%s", p.role, p.cmd.Process.Pid, p.out.String())
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("the %s worker exited before it polled:\n%s", spec.role, p.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the %s worker did not poll within a minute:\n%s", spec.role, p.out.String())
	}
	return p
}

// kill SIGKILLs the process and waits until it is gone.
func (p *workerProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// killDevServer SIGKILLs the Temporal dev server serving hostPort, as a
// crash would: the process of the Temporal CLI whose command line has
// --port with hostPort's port.
func killDevServer(t *testing.T, hostPort string) {
	t.Helper()
	cli, err := testenv.TemporalCLI()
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(hostPort)
	require.NoError(t, err)
	procs, err := os.ReadDir("/proc")
	require.NoError(t, err, "the dev server's process is found through /proc")
	killed := 0
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if args[0] != cli {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--port" && args[i+1] == port {
				proc, err := os.FindProcess(pid)
				require.NoError(t, err)
				require.NoError(t, proc.Kill())
				killed++
			}
		}
	}
	require.Equal(t, 1, killed, "one dev server process serves %s", hostPort)
	require.Eventually(t, func() bool {
		conn, err := net.DialTimeout("tcp", hostPort, 100*time.Millisecond)
		if err == nil {
			_ = conn.Close()
		}
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the killed dev server still accepts connections on %s", hostPort)
}

// faultPath is one way the agent reaches durable-llm.
type faultPath struct {
	name      string
	namespace string // the agent's
	nexus     bool
}

var faultPaths = []faultPath{
	{name: "child workflow", namespace: "default"},
	{name: "nexus", namespace: "agents", nexus: true},
}

// conversation is one agent run of a fault test, with its own workers.
type conversation struct {
	t          *testing.T
	path       faultPath
	calls      client.Client // the durable-llm namespace
	agents     client.Client // the agent's namespace
	sim        *llmsim.Server
	llmSpec    workerSpec
	agentSpec  workerSpec
	llm, agent *workerProcess
	in         agent.Input
	run        client.WorkflowRun
}

// newConversation starts a durable-llm worker and an agent worker as
// processes for path on the dev server at address, the agent's calls
// going to sim (through a Nexus endpoint made for it on the Nexus path).
// heartbeat is the durable-llm worker's call.heartbeat_timeout ("": the
// default policy's). start starts the agent.
func newConversation(t *testing.T, address string, path faultPath, sim *llmsim.Server, heartbeat string) *conversation {
	t.Helper()
	cv := &conversation{t: t, path: path, sim: sim, calls: dialNamespace(t, address, "default"), agents: dialNamespace(t, address, path.namespace)}
	callsQueue := "llm-fault-" + uuid.NewString()[:8]
	agentQueue := "agent-fault-" + uuid.NewString()[:8]
	cv.llmSpec = workerSpec{role: "llm", address: address, namespace: "default", queue: callsQueue, simURL: sim.BaseURL, heartbeat: heartbeat}
	cv.agentSpec = workerSpec{role: "agent", address: address, namespace: path.namespace, queue: agentQueue}
	in := agent.Input{UserID: "u-42", SessionID: "s-7", Question: slowQuestion, CallsQueue: callsQueue}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if path.nexus {
		endpoint := "durable-llm-" + uuid.NewString()[:8]
		require.NoError(t, llmnexus.EnsureEndpoint(ctx, cv.calls, endpoint, "default", callsQueue))
		in.CallsQueue, in.NexusEndpoint = "", endpoint
	}
	cv.llm = startWorkerProcess(t, cv.llmSpec)
	cv.agent = startWorkerProcess(t, cv.agentSpec)
	cv.in = in
	return cv
}

// start starts the agent on slowQuestion.
func (cv *conversation) start() {
	cv.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := cv.agents.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "agent-fault-" + uuid.NewString()[:8], TaskQueue: cv.agentSpec.queue},
		agent.WorkflowName, cv.in)
	require.NoError(cv.t, err)
	cv.run = run
}

func dialNamespace(t *testing.T, address, ns string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: address, Namespace: ns, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// openRequests are the upstream requests llmsim has not answered yet.
func openRequests(sim *llmsim.Server) int {
	open := 0
	for _, cv := range sim.Stats().Conversations {
		for _, r := range cv.Requests {
			if r.Outcome == "" {
				open++
			}
		}
	}
	return open
}

// waitFirstTurnOpen waits until the first turn's upstream request has
// arrived and is still open: the moment to kill.
func (cv *conversation) waitFirstTurnOpen() {
	cv.t.Helper()
	require.Eventually(cv.t, cv.firstTurnOpen, 60*time.Second, 20*time.Millisecond, "the first turn's request reached the model")
}

// firstTurnOpen reports that the first turn's upstream request, and no
// other, has arrived and is still open.
func (cv *conversation) firstTurnOpen() bool {
	return cv.sim.Stats().Totals.Arrivals == 1 && openRequests(cv.sim) == 1
}

// resend is what a turn's upstream request goes through after a fault.
type resend int

const (
	// notResent: one upstream request, answered.
	notResent resend = iota
	// resentAfterKill: the durable-llm worker died with the request open.
	// The request was cut (llmsim saw its client go) and the new worker
	// sent it once more: two requests, one answer.
	resentAfterKill
	// mayResendAfterOutage: the server was down past the call's
	// heartbeat timeout while the request was open. The model answered a
	// worker that could not report it, and the server, back, timed the
	// attempt out: it may be sent once more, and then the model answers
	// twice.
	mayResendAfterOutage
)

// logCalls logs each call's source, reason and attempts.
func (cv *conversation) logCalls(ctx context.Context, ids []string) {
	for _, id := range ids {
		var res workflows.CallResult
		if err := cv.calls.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			cv.t.Logf("call %s: %v", id, err)
			continue
		}
		cv.t.Logf("call %s: source %s, reason %q, attempts %v", id, res.Source, res.Reason, res.Decisions())
	}
}

// finish waits for the agent's answer and checks what a user would: the
// conversation ran its two turns (the tool call, the answer) and ran the
// tool once; each turn started one call, completed once and took one
// answer from the model; and each turn sent one upstream request, but for
// the turns in resent (see resend), which sent it at most twice, the
// second time as a worker_lost resend with the same Idempotency-Key. It
// returns the upstream requests per turn.
func (cv *conversation) finish(resent map[int]resend) []int {
	t := cv.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out agent.Output
	require.NoError(t, cv.run.Get(ctx, &out))
	if !strings.Contains(out.Answer, "lookup_order says order 12 is shipped with DHL, tracking DHL-0012") {
		cv.logCalls(ctx, out.Calls) // why a turn did not get the model's answer
	}
	require.Equal(t, []string{agent.ToolLookupOrder}, out.Tools, "the tool ran once")
	require.Contains(t, out.Answer, "lookup_order says order 12 is shipped with DHL, tracking DHL-0012", "answered from the tool's result")
	require.Len(t, out.Calls, 2, "two turns: the tool call, the answer")

	// The agent's history: two calls started and two completed, one tool
	// run, whatever died on the way.
	counts := map[enumspb.EventType]int{}
	iter := cv.agents.GetWorkflowHistory(ctx, cv.run.GetID(), cv.run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		counts[ev.GetEventType()]++
	}
	started, completed := enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
	if cv.path.nexus {
		started, completed = enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED, enumspb.EVENT_TYPE_NEXUS_OPERATION_COMPLETED
	}
	require.Equal(t, 2, counts[started], "calls the agent started")
	require.Equal(t, 2, counts[completed], "calls that completed in the agent")
	require.Equal(t, 1, counts[enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED], "tool runs")

	st := cv.sim.Stats()
	require.Len(t, st.Conversations, 2, "llmsim saw the agent's two calls and no other: %v", st.Conversations)
	perTurn := make([]int, len(out.Calls))
	total := 0
	for i, id := range out.Calls {
		turn := i + 1
		up, ok := st.Conversations[id]
		require.True(t, ok, "turn %d's call %s reached llmsim", turn, id)
		answered := 0
		for _, r := range up.Requests {
			if r.Outcome == "200" {
				answered++
			}
			require.Equal(t, id+"/1", r.IdempotencyKey, "turn %d: every request is its first attempt's", turn)
		}
		var res workflows.CallResult
		require.NoError(t, cv.calls.GetWorkflow(ctx, id, "").Get(ctx, &res))
		require.Equal(t, workflows.SourceModel, res.Source, "turn %d", turn)
		once, twice := []string{"qwen-72b:ok:answer"}, []string{"qwen-72b:worker_lost:resend", "qwen-72b:ok:answer"}
		switch resent[turn] {
		case notResent:
			require.Equal(t, 1, up.Attempts, "turn %d: upstream requests: %+v", turn, up.Requests)
			require.Equal(t, 1, answered, "turn %d: model answers: %+v", turn, up.Requests)
			require.Equal(t, once, res.Decisions(), "turn %d", turn)
		case resentAfterKill:
			require.Equal(t, 2, up.Attempts, "turn %d: upstream requests: %+v", turn, up.Requests)
			require.Equal(t, llmsim.OutcomeClientGone, up.Requests[0].Outcome, "turn %d: the killed worker's request was cut open", turn)
			require.Equal(t, 1, answered, "turn %d: model answers: %+v", turn, up.Requests)
			require.Equal(t, twice, res.Decisions(), "turn %d", turn)
		case mayResendAfterOutage:
			require.Contains(t, []int{1, 2}, up.Attempts, "turn %d: upstream requests: %+v", turn, up.Requests)
			require.Equal(t, up.Attempts, answered, "turn %d: model answers: %+v", turn, up.Requests)
			require.Equal(t, [][]string{once, twice}[up.Attempts-1], res.Decisions(), "turn %d", turn)
		}
		perTurn[i] = up.Attempts
		total += up.Attempts
	}
	require.Equal(t, total, st.Totals.Arrivals, "every upstream request belongs to a turn")
	return perTurn
}

// TestIntegrationAgentWorkerKilledMidCall SIGKILLs, while the agent's
// first model request is open upstream, either the agent's worker or the
// durable-llm worker, on each path (child workflow in the same namespace;
// Nexus from namespace "agents"), and starts a new one in its place.
//
// The agent's worker killed: the call runs on without its caller and
// answers; the new worker replays the agent, which takes the answer and
// goes on. One upstream request per turn.
//
// The durable-llm worker killed: its open request dies with it; after the
// heartbeat timeout (2 s here) the new worker resends the same attempt
// once (worker_lost, same Idempotency-Key). That turn sends two upstream
// requests and gets one answer; the other turn sends one.
func TestIntegrationAgentWorkerKilledMidCall(t *testing.T) {
	t.Parallel()
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{ExtraArgs: []string{"--namespace", "agents"}})
	for _, path := range faultPaths {
		for _, victim := range []string{"agent", "durable-llm"} {
			t.Run(path.name+"/"+victim+" worker killed", func(t *testing.T) {
				t.Parallel()
				sim := rig.Sim(t, llmsim.Options{})
				cv := newConversation(t, srv.FrontendHostPort(), path, sim, "2s")
				cv.start()
				cv.waitFirstTurnOpen()
				killed := time.Now()
				if victim == "agent" {
					cv.agent.kill()
					cv.agent = startWorkerProcess(t, cv.agentSpec)
				} else {
					cv.llm.kill()
					cv.llm = startWorkerProcess(t, cv.llmSpec)
				}
				want := map[int]resend{}
				if victim == "durable-llm" {
					want[1] = resentAfterKill
				}
				perTurn := cv.finish(want)
				t.Logf("%s worker killed with turn 1's request open: upstream requests per turn %v; answered %v after the kill",
					victim, perTurn, time.Since(killed).Round(100*time.Millisecond))
			})
		}
	}
}

// TestIntegrationAgentDevServerKilledMidCall SIGKILLs the Temporal dev
// server (file-backed) while the first model request of four agents is
// open upstream, keeps it down until the model has answered them all
// (each answer reaches a live durable-llm worker with no server to report
// it to: about 3 s), and starts it again on the same file and port. The
// workers live on and reconnect. There is an agent on each path for each
// of two durable-llm workers: one with a heartbeat timeout of 30 s, longer
// than the outage and the restart however slow a loaded machine makes it
// (the default policy's 10 s was not: a restart can take several seconds),
// one with 3 s, shorter (the server stays down at least 4.5 s).
//
// Within the heartbeat timeout each turn completes once with one
// upstream request: the worker reports the answer it kept once the
// server is back. Past it, the server, back, times the attempt out before
// the worker's report arrives and the first turn is resent once
// (worker_lost, same Idempotency-Key): the model answers that turn twice,
// the agent still takes one answer per turn.
func TestIntegrationAgentDevServerKilledMidCall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("the dev server's process is found through /proc")
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	hostPort := "127.0.0.1:" + testenv.FreePort(t)
	opts := testenv.ServerOptions{DBFile: db, HostPort: hostPort, ExtraArgs: []string{"--namespace", "agents"}}
	srv, err := testenv.StartServer(context.Background(), workflows.SearchAttributes, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })

	type outageCase struct {
		name      string
		heartbeat string
		first     resend // what the first turn's request goes through
		conv      *conversation
	}
	var cases []*outageCase
	for _, path := range faultPaths {
		cases = append(cases,
			&outageCase{name: path.name + "/within the heartbeat timeout", heartbeat: "30s", first: notResent},
			&outageCase{name: path.name + "/past the heartbeat timeout", heartbeat: "3s", first: mayResendAfterOutage})
		for _, oc := range cases[len(cases)-2:] {
			sim := rig.Sim(t, llmsim.Options{})
			oc.conv = newConversation(t, hostPort, path, sim, oc.heartbeat)
		}
	}
	for _, oc := range cases {
		oc.conv.start()
	}
	for _, oc := range cases {
		oc.conv.waitFirstTurnOpen()
	}
	for _, oc := range cases {
		require.True(t, oc.conv.firstTurnOpen(), "%s: the first request is still open at the kill", oc.name)
	}
	down := time.Now()
	killDevServer(t, hostPort)
	_ = srv.Stop() // reaps the killed process
	for _, oc := range cases {
		require.Eventually(t, func() bool { return openRequests(oc.conv.sim) == 0 }, 30*time.Second, 20*time.Millisecond,
			"%s: the model answered the first turn", oc.name)
	}
	// Down well past the short heartbeat timeout (3 s), well within the
	// default (10 s), however fast the model answered: a loaded machine
	// must not blur which side of it the outage falls.
	time.Sleep(time.Until(down.Add(4500 * time.Millisecond)))
	srv, err = testenv.StartServer(context.Background(), workflows.SearchAttributes, opts)
	require.NoError(t, err, "start the dev server again on %s with its file", hostPort)
	t.Logf("dev server killed and back on the same file in %v", time.Since(down).Round(100*time.Millisecond))
	for _, oc := range cases {
		t.Run(oc.name, func(t *testing.T) {
			oc.conv.t = t
			perTurn := oc.conv.finish(map[int]resend{1: oc.first})
			t.Logf("dev server killed with turn 1's request open: upstream requests per turn %v; answered %v after the kill",
				perTurn, time.Since(down).Round(100*time.Millisecond))
		})
	}
}
