package llmworkflow_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworkflow"
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

// AskInput is the input of the test's agent workflow.
type AskInput struct {
	CallsQueue string                `json:"calls_queue"`
	Request    workflows.CallRequest `json:"request"`
}

// Ask is an agent workflow with one turn: the call through Call.
func Ask(ctx workflow.Context, in AskInput) (workflows.CallResult, error) {
	return llmworkflow.Call(ctx, in.Request, llmworkflow.WithTaskQueue(in.CallsQueue))
}

// startWorkers starts llmsim, a durable-llm worker against it and an
// agent worker with agentWorkflows and llmworkflow's activities, each
// worker on a queue of its own, stopped when the test ends.
func startWorkers(t *testing.T, c client.Client, agentWorkflows ...any) (sim *llmsim.Server, callsQueue, agentQueue string) {
	t.Helper()
	calls := rig.New(t, rig.Options{Client: c})

	agentQueue = "agent-test-" + uuid.NewString()[:8]
	aw := worker.New(c, agentQueue, worker.Options{})
	for _, wf := range agentWorkflows {
		aw.RegisterWorkflow(wf)
	}
	llmworkflow.Register(aw, c)
	require.NoError(t, aw.Start())
	t.Cleanup(aw.Stop)
	return calls.Sim, calls.TaskQueue, agentQueue
}

// A parent workflow on a real dev server calls a real durable-llm worker
// (against llmsim) and gets the model's answer; the same parent ID run
// again (a retried or reset agent) attaches to the call's recorded answer
// instead of asking the model again.
func TestIntegrationCallFromWorkflow(t *testing.T) {
	srv := shared.Server(t)
	c := srv.Client()
	sim, callsQueue, agentQueue := startWorkers(t, c, Ask)

	req := workflows.CallRequest{UserID: "u-" + uuid.NewString()[:8], SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "Where is my order 12?"}}}
	agentID := "agent-" + uuid.NewString()[:8]
	ask := func() workflows.CallResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: agentID, TaskQueue: agentQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, Ask, AskInput{CallsQueue: callsQueue, Request: req})
		require.NoError(t, err)
		var res workflows.CallResult
		require.NoError(t, run.Get(ctx, &res))
		return res
	}

	first := ask()
	wantID := agentID + "/" + request.IDs{}.Fingerprint(req)
	require.Equal(t, wantID, first.RequestID)
	require.Equal(t, workflows.SourceModel, first.Source)
	require.False(t, first.Degraded)
	require.NotEmpty(t, first.Content)
	require.Equal(t, 1, sim.Stats().Conversations[wantID].Attempts, "one model request")

	// The call is the parent's child, on the calls' queue.
	desc, err := c.DescribeWorkflowExecution(context.Background(), wantID, "")
	require.NoError(t, err)
	require.Equal(t, agentID, desc.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId())
	require.Equal(t, callsQueue, desc.GetWorkflowExecutionInfo().GetTaskQueue())

	again := ask()
	require.Equal(t, first.Content, again.Content, "the recorded answer")
	require.Equal(t, first.RequestID, again.RequestID)
	require.Equal(t, 1, sim.Stats().Conversations[wantID].Attempts, "no second model request for the same turn")
	require.Equal(t, 1, sim.Stats().Totals.Arrivals)
	attached := false
	it := c.GetWorkflowHistory(context.Background(), agentID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == llmworkflow.AttachActivity {
			attached = true
		}
	}
	require.True(t, attached, "the second run attached through the Attach activity")
}
