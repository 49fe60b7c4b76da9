package llmworker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationDiagnosis: an error body no classifier rule knows (HTTP
// 500, an engine's own code) is diagnosed by llama-8b as queue_full, and
// the call takes queue_full's step (another model) with the diagnosis in
// the attempt's reason. With diagnosis off the same body is a server_error
// retried on the same model.
func TestIntegrationDiagnosis(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, func(c *config.Config) { c.Diagnose.Enabled = true })
	res := s.Call(question("[[sim fault=unknown_error model=qwen-72b times=1]] Where is my order?"))
	require.Equal(t, "qwen-72b:queue_full", workflows.CallResult.Decisions(res)[0][:len("qwen-72b:queue_full")], "%+v", res.Attempts)
	require.Contains(t, res.Attempts[0].Diagnosis, "diagnosed by llama-8b as queue_full", "%+v", res.Attempts)
	require.Equal(t, []string{"qwen-72b:queue_full:switch_model", "qwen-14b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, workflows.SourceFallbackModel, res.Source)

	off := newStack(t, nil)
	res = off.Call(question("[[sim fault=unknown_error model=qwen-72b times=1]] Where is my order?"))
	require.Equal(t, "qwen-72b:server_error:retry", workflows.CallResult.Decisions(res)[0])
	require.Empty(t, res.Attempts[0].Diagnosis)
}
