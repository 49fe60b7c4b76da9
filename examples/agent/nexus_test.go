package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/examples/agent"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmnexus"
	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// askNexus is a one-turn agent through the Nexus service.
func askNexus(ctx workflow.Context, endpoint string, req workflows.CallRequest) (workflows.CallResult, error) {
	return llmworkflow.CallNexus(ctx, endpoint, req)
}

// askNexusQuick is askNexus through the call_quick operation.
func askNexusQuick(ctx workflow.Context, endpoint string, req workflows.CallRequest) (workflows.CallResult, error) {
	return llmworkflow.CallNexus(ctx, endpoint, req, llmworkflow.WithQuickAnswer())
}

// The example agent runs in namespace "agents" and calls durable-llm in
// "default" through the Nexus endpoint: the tool-using conversation
// reaches its answer from the tool's result with one llmsim request per
// turn, each call's tenant is the caller's namespace, and the run's
// history replays. Then the same one-turn request from two namespaces,
// under the same caller workflow ID, with a tenant forged in the request:
// two calls, each tenant its own namespace, each its own model request
// (no shared cache or idempotency across namespaces). Last, a caller
// cancelled mid-call cancels its call, and one whose worker stopped
// mid-call gets its answer from one model request.
func TestIntegrationAgentNexus(t *testing.T) {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{ExtraArgs: []string{"--namespace", "agents", "--namespace", "others"}})
	c := srv.Client()
	sim, callsQueue := startCallsWorker(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	endpoint := "durable-llm-" + uuid.NewString()[:8]
	require.NoError(t, llmnexus.EnsureEndpoint(ctx, c, endpoint, "default", callsQueue))
	require.NoError(t, llmnexus.EnsureEndpoint(ctx, c, endpoint, "default", callsQueue), "an existing endpoint is kept")

	dial := func(ns string) client.Client {
		nc, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Namespace: ns, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
	agents, others := dial("agents"), dial("others")
	agentQueue := "agent-test-" + uuid.NewString()[:8]
	startCaller := func(nc client.Client) worker.Worker {
		w := worker.New(nc, agentQueue, worker.Options{})
		agent.Register(w, nc, &agent.Tools{Orders: orders})
		w.RegisterWorkflow(askNexus)
		w.RegisterWorkflow(askNexusQuick)
		require.NoError(t, w.Start())
		return w
	}
	callerWorker := startCaller(agents)
	t.Cleanup(func() { callerWorker.Stop() })
	t.Cleanup(startCaller(others).Stop)

	id := "agent-nexus-" + uuid.NewString()[:8]
	run, err := agents.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: agentQueue}, agent.WorkflowName,
		agent.Input{UserID: "u-42", SessionID: "s-7", Question: "Where is my order 12?", NexusEndpoint: endpoint})
	require.NoError(t, err)
	var out agent.Output
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, []string{agent.ToolLookupOrder}, out.Tools)
	require.Contains(t, out.Answer, "lookup_order says order 12 is shipped with DHL, tracking DHL-0012", "answered from the tool's result")
	require.Len(t, out.Calls, 2, "two turns: the tool call, the answer")
	st := sim.Stats()
	require.Equal(t, 2, st.Totals.Arrivals, "one model request per turn")
	for _, call := range out.Calls {
		require.Equal(t, 1, st.Conversations[call].Attempts, "call %s", call)
		require.Equal(t, "agents", tenantOf(t, c, call), "the caller's namespace is the tenant")
	}
	h, err := replay.Fetch(ctx, agents, id, run.GetRunID())
	require.NoError(t, err)
	require.NoError(t, replayAgentAs(h, agent.Agent, id), "the Nexus path replays")
	// (A Nexus command's input is not compared on replay: an agent that
	// calls the same operation with another request still replays.)
	err = replayAgentAs(h, childCalls, id)
	require.Error(t, err, "an agent that moved its calls to child workflows must not replay the recorded history")
	require.True(t, replay.IsNonDeterminism(err), "%v", err)

	// One request, same caller workflow ID, from both namespaces, each
	// claiming the other's tenant.
	req := workflows.CallRequest{UserID: "u-1", SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{{Role: "user", Content: "What are your opening hours?"}}}
	caller := "asker-" + uuid.NewString()[:8]
	ask := func(nc client.Client, forged string) workflows.CallResult {
		r := req
		r.Tenant = forged
		run, err := nc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: caller, TaskQueue: agentQueue}, askNexus, endpoint, r)
		require.NoError(t, err)
		var res workflows.CallResult
		require.NoError(t, run.Get(ctx, &res))
		return res
	}
	before := sim.Stats().Totals.Arrivals
	a := ask(agents, "others")
	b := ask(others, "agents")
	require.NotEqual(t, a.RequestID, b.RequestID, "two namespaces never share a call")
	require.Equal(t, "agents", tenantOf(t, c, a.RequestID), "a tenant in the request is not believed")
	require.Equal(t, "others", tenantOf(t, c, b.RequestID))
	require.Equal(t, before+2, sim.Stats().Totals.Arrivals, "each namespace's call asked the model: no answer crossed namespaces")
	require.True(t, strings.HasPrefix(a.RequestID, request.KeyPrefix))

	// call_quick: a short call is the start response's own result (the
	// caller's history has no NexusOperationStarted: no callback came);
	// one longer than the handler's wait goes on asynchronously, as call,
	// on the same run. One model request each.
	for _, tc := range []struct {
		question string
		sync     bool
	}{{"When do you open on Sunday? (quick)", true}, {"[[sim fault=latency latency=7s]] When do you close on Sunday? (quick)", false}} {
		before := sim.Stats().Totals.Arrivals
		id := "quick-" + uuid.NewString()[:8]
		run, err := agents.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: agentQueue}, askNexusQuick, endpoint,
			workflows.CallRequest{UserID: "u-4", SessionID: "s-4", Messages: []request.Message{{Role: "user", Content: tc.question}}})
		require.NoError(t, err)
		var res workflows.CallResult
		require.NoError(t, run.Get(ctx, &res))
		require.Equal(t, workflows.SourceModel, res.Source)
		require.Equal(t, before+1, sim.Stats().Totals.Arrivals, "one model request: %s", tc.question)
		require.Equal(t, "agents", tenantOf(t, c, res.RequestID))
		h, err := replay.Fetch(ctx, agents, id, run.GetRunID())
		require.NoError(t, err)
		started, completed := 0, 0
		for _, e := range h.GetEvents() {
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED:
				started++
			case enumspb.EVENT_TYPE_NEXUS_OPERATION_COMPLETED:
				completed++
			}
		}
		require.Equal(t, 1, completed, tc.question)
		if tc.sync {
			require.Zero(t, started, "a quick answer comes in the start response")
		} else {
			require.Equal(t, 1, started, "a long call goes on asynchronously")
		}
	}

	// The caller's worker stopped mid-call and another started: the turn
	// completes once, with one model request.
	mid := workflows.CallRequest{UserID: "u-3", SessionID: "s-3",
		Messages: []request.Message{{Role: "user", Content: "[[sim fault=latency latency=3s]] Are you still there?"}}}
	midCaller := "mid-" + uuid.NewString()[:8]
	before = sim.Stats().Totals.Arrivals
	mrun, err := agents.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: midCaller, TaskQueue: agentQueue}, askNexus, endpoint, mid)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return sim.Stats().Totals.Arrivals > before }, 30*time.Second, 50*time.Millisecond, "the call reached the model")
	callerWorker.Stop()
	callerWorker = startCaller(agents)
	var midRes workflows.CallResult
	require.NoError(t, mrun.Get(ctx, &midRes))
	require.Equal(t, workflows.SourceModel, midRes.Source)
	require.Equal(t, before+1, sim.Stats().Totals.Arrivals, "one model request for the turn")
	require.Equal(t, 1, sim.Stats().Conversations[midRes.RequestID].Attempts)

	// Cancelling the caller cancels its call through the operation.
	slow := workflows.CallRequest{UserID: "u-2", SessionID: "s-2",
		Messages: []request.Message{{Role: "user", Content: "[[sim fault=latency latency=60s]] Will you answer slowly?"}}}
	canceller := "canceller-" + uuid.NewString()[:8]
	crun, err := agents.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: canceller, TaskQueue: agentQueue}, askNexus, endpoint, slow)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(canceller + "\x00" + request.IDs{}.Fingerprint(slow)))
	callID := request.IDs{}.Scoped("agents", "nx-"+hex.EncodeToString(sum[:]))
	require.Eventually(t, func() bool {
		desc, err := c.DescribeWorkflowExecution(ctx, callID, "")
		return err == nil && desc.GetPendingActivities() != nil && len(desc.GetPendingActivities()) > 0
	}, 30*time.Second, 100*time.Millisecond, "the call %s runs its attempt", callID)
	require.NoError(t, agents.CancelWorkflow(ctx, canceller, ""))
	var ignored workflows.CallResult
	require.Error(t, crun.Get(ctx, &ignored), "the cancelled caller ends without an answer")
	require.Eventually(t, func() bool {
		desc, err := c.DescribeWorkflowExecution(ctx, callID, "")
		return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, 30*time.Second, 100*time.Millisecond, "the call is cancelled with its caller")
}

// tenantOf is the tenant in the call's memo.
func tenantOf(t *testing.T, c client.Client, id string) string {
	t.Helper()
	desc, err := c.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	var tenant string
	require.NoError(t, desc.GetMemoValue(llmclient.MemoTenant, &tenant))
	return tenant
}

// replayAgentAs replays h against wf registered as the agent, under the
// recorded agent's workflow ID id.
func replayAgentAs(h *historypb.History, wf func(workflow.Context, agent.Input) (agent.Output, error), id string) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: agent.WorkflowName})
	return r.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), h,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}})
}

// childCalls is the agent changed to call durable-llm as child workflows.
func childCalls(ctx workflow.Context, in agent.Input) (agent.Output, error) {
	in.NexusEndpoint = ""
	return agent.Agent(ctx, in)
}

// README's Nexus subsection shows askNexus as this test runs it.
func TestREADMEShowsTheNexusCaller(t *testing.T) {
	block := blockAfter(t, "../../README.md", "### From a workflow in another namespace (Nexus)", "go")
	src, err := os.ReadFile("nexus_test.go")
	require.NoError(t, err)
	require.Contains(t, string(src), block, "README's caller is the test's")
}
