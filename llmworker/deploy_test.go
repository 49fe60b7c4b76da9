package llmworker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationPinnedDeploy: two builds of the worker side by side in
// one Worker Deployment. A call started while build v1 is current stays
// on v1 to its end, although v2 became current while it ran; the next
// call runs on v2.
func TestIntegrationPinnedDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	s.Worker.Stop() // the stack's worker is not versioned
	name := "durable-llm-" + uuid.NewString()[:6]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(build string) {
		s.StartWorker(func(o *llmworker.Options) { o.Deployment = llmworker.Deployment{Name: name, BuildID: build} })
		require.NoError(t, llmworker.MakeCurrent(ctx, s.Client, client.DefaultNamespace, name, build))
	}
	build := func(id string) string {
		d, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
	}

	start("v1")
	old, err := s.Calls.Start(ctx, question("[[sim fault=latency latency=4s model=qwen-72b times=1]] Where is my order 51?"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return build(old.GetID()) == "v1" }, 10*time.Second, 100*time.Millisecond, "the call did not start on v1")

	start("v2") // v2 is current while the first call still waits for its answer
	fresh := s.Call(question("Where is my order 52?"))
	require.Equal(t, "v2", build(fresh.RequestID), "a new call after the switch")

	var res workflows.CallResult
	require.NoError(t, old.Get(ctx, &res))
	require.Equal(t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, "v1", build(old.GetID()), "the call in flight finished on its build")
}
