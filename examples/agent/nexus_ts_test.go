package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmnexus"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// The TypeScript caller: testdata/ts-nexus/workflows.ts, run by
// testdata/ts-nexus/worker.mjs with the TypeScript SDK's worker (versions
// pinned in its package-lock.json).
const tsNexusDir = "testdata/ts-nexus"

// requireTSNexus skips the test unless node (20 or later) and the
// TypeScript SDK are installed, and returns node's path.
func requireTSNexus(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("cross-language test: needs the Temporal dev server (skipped in -short mode)")
	}
	if _, err := os.Stat(filepath.Join(tsNexusDir, "node_modules", "@temporalio", "worker", "package.json")); err != nil {
		t.Skip("cross-language test: the TypeScript SDK is not installed; run `npm ci --prefix examples/agent/testdata/ts-nexus` (.ci/run does)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("cross-language test: node is not on PATH (Node 20 or later is needed)")
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if major < 20 {
		t.Skipf("cross-language test: node %s is too old (the TypeScript SDK needs 20 or later)", strings.TrimSpace(string(out)))
	}
	return node
}

// lockedBuffer collects a subprocess's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startTSWorker runs worker.mjs on taskQueue in namespace until the test
// ends, and returns once it prints "ready" (its bundle is built and it
// polls). The returned func is its stderr so far.
func startTSWorker(t *testing.T, node, hostPort, namespace, taskQueue string) func() string {
	t.Helper()
	cmd := exec.Command(node, "worker.mjs", hostPort, namespace, taskQueue)
	cmd.Dir = tsNexusDir
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.TrimSpace(sc.Text()) == "ready" {
				signalled = true
				close(ready)
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("worker.mjs exited before it was ready: %v\n%s", err, stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("worker.mjs not ready after 90 s\n%s", stderr.String())
	}
	return stderr.String
}

// A TypeScript workflow in namespace "agents" (testdata/ts-nexus's
// askNexus, run by the TypeScript SDK's worker) asks durable-llm in
// "default" through the Nexus endpoint: the operation call answers with
// the model's answer from one attempt and one model request, the call's
// tenant is the caller's namespace, and the caller's history holds the
// operation on durable-llm's service.
func TestIntegrationTypeScriptNexusCaller(t *testing.T) {
	node := requireTSNexus(t)
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{ExtraArgs: []string{"--namespace", "agents"}})
	c := srv.Client()
	sim, callsQueue := startCallsWorker(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	endpoint := "durable-llm-" + uuid.NewString()[:8]
	require.NoError(t, llmnexus.EnsureEndpoint(ctx, c, endpoint, "default", callsQueue))

	agentQueue := "ts-agent-test-" + uuid.NewString()[:8]
	stderr := startTSWorker(t, node, srv.FrontendHostPort(), "agents", agentQueue)
	agents, err := client.NewClientFromExisting(c, client.Options{Namespace: "agents"})
	require.NoError(t, err)
	t.Cleanup(agents.Close)

	req := workflows.CallRequest{UserID: "u-ts", SessionID: "s-ts", Scenario: "customer_service",
		Messages: []request.Message{{Role: "user", Content: "Which languages does your support speak?"}}}
	id := "ts-agent-" + uuid.NewString()[:8]
	run, err := agents.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: agentQueue}, "askNexus", endpoint, req)
	require.NoError(t, err)
	var res workflows.CallResult
	require.NoError(t, run.Get(ctx, &res), "the TypeScript caller's run\n%s", stderr())

	t.Logf("call %s: %s answered %q in %d attempt(s)", res.RequestID, res.Model, res.Content, len(res.Attempts))
	require.Equal(t, workflows.SourceModel, res.Source, "the preferred model answered")
	require.False(t, res.Degraded)
	require.Len(t, res.Attempts, 1, "one attempt")
	require.Equal(t, 1, res.Attempts[0].N)
	require.Equal(t, res.Model, res.Attempts[0].Model)
	st := sim.Stats()
	require.Equal(t, 1, st.Totals.Arrivals, "one model request")
	require.Equal(t, 1, st.Conversations[res.RequestID].Attempts)
	gens := sim.Generations(res.RequestID)
	require.Len(t, gens, 1)
	require.Contains(t, res.Content, "Re: Which languages does your support speak?", "the answer is to the question the workflow sent")
	require.Equal(t, gens[0].Text, res.Content, "the model's answer reached the TypeScript workflow")
	require.Equal(t, res.Model, gens[0].Model)
	require.True(t, strings.HasPrefix(res.RequestID, request.KeyPrefix), "%s", res.RequestID)
	require.Equal(t, "agents", tenantOf(t, c, res.RequestID), "the caller's namespace is the tenant")

	// The caller's history: one operation on durable-llm's service, scheduled
	// and completed.
	var scheduled, completed int
	it := agents.GetWorkflowHistory(ctx, id, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:
			a := ev.GetNexusOperationScheduledEventAttributes()
			require.Equal(t, endpoint, a.GetEndpoint())
			require.Equal(t, workflows.NexusService, a.GetService())
			require.Equal(t, workflows.NexusOperationCall, a.GetOperation())
			scheduled++
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_COMPLETED:
			completed++
		}
	}
	require.Equal(t, 1, scheduled)
	require.Equal(t, 1, completed)
}

// docs/nexus.md's TypeScript caller is testdata/ts-nexus/workflows.ts's,
// the workflow TestIntegrationTypeScriptNexusCaller runs.
func TestDocsShowTheTypeScriptNexusCaller(t *testing.T) {
	block := blockAfter(t, "../../docs/nexus.md", "## The caller (TypeScript)\n", "ts")
	src, err := os.ReadFile(filepath.Join(tsNexusDir, "workflows.ts"))
	require.NoError(t, err)
	require.Contains(t, string(src), block, "docs/nexus.md's TypeScript caller is workflows.ts's")
}
