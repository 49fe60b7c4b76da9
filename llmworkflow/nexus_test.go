package llmworkflow_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// CallNexus's key is a function of the caller's workflow ID and the turn:
// the same turn from the same caller is one key (its retries and replays
// reach one call), another caller, another turn or another request a new one.
func TestNexusKey(t *testing.T) {
	req := ask("Where is my order 12?")
	sum := func(parent, turn string) string {
		h := sha256.Sum256([]byte(parent + "\x00" + turn))
		return "nx-" + hex.EncodeToString(h[:])
	}
	keyed := req
	keyed.IdempotencyKey = "order-12-status"
	for _, tc := range []struct {
		name   string
		parent string
		req    workflows.CallRequest
		opts   []llmworkflow.Option
		want   string
	}{
		{"the request's fingerprint", parentID, req, nil, sum(parentID, request.IDs{}.Fingerprint(req))},
		{"another caller", "agent-8", req, nil, sum("agent-8", request.IDs{}.Fingerprint(req))},
		{"another request", parentID, ask("Where is my order 13?"), nil, sum(parentID, request.IDs{}.Fingerprint(ask("Where is my order 13?")))},
		{"a named turn", parentID, req, []llmworkflow.Option{llmworkflow.WithTurn("plan")}, sum(parentID, "plan")},
		{"the request's own key", parentID, keyed, nil, "order-12-status"},
		{"WithIdempotencyKey", parentID, req, []llmworkflow.Option{llmworkflow.WithIdempotencyKey("k-1")}, "k-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: tc.parent})
			env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
				return llmworkflow.NexusKey(ctx, tc.req, tc.opts...)
			})
			require.NoError(t, env.GetWorkflowError())
			var got string
			require.NoError(t, env.GetWorkflowResult(&got))
			require.Equal(t, tc.want, got)
			require.NoError(t, request.ValidateKey(got), "a valid idempotency key")
		})
	}
}
