package llmworker_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationHistoryGuardActs: on a real server, a call with a
// 400 KB conversation whose upstream fails every attempt records the
// prompt with each attempt; with call.max_history_bytes at 1 MiB the
// history passes it after the first attempts and the call falls back
// instead of recording it again, saying why. The same failing call with a
// short prompt retries as the policy says.
func TestIntegrationHistoryGuardActs(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, func(c *config.Config) { c.Call.MaxHistoryBytes = 1 << 20 })
	long := question("[[sim fault=server_error times=always]] Where is my order?")
	long.Messages = append(long.Messages[:1],
		append([]request.Message{
			{Role: "user", Content: strings.Repeat("An earlier question about the parcel and its route. ", 7700)},
			{Role: "assistant", Content: "Noted."},
		}, long.Messages[1:]...)...)
	res := s.Call(long)
	t.Logf("400 KB prompt: %v; %s", workflows.CallResult.Decisions(res), res.Reason)
	require.True(t, res.Degraded)
	require.Contains(t, res.Reason, "history guard")
	require.Less(t, len(res.Attempts), s.Config.Call.MaxAttempts, "the guard let every attempt record the prompt: %v", workflows.CallResult.Decisions(res))

	short := s.Call(question("[[sim fault=server_error times=always]] Where is my parcel?"))
	require.NotContains(t, short.Reason, "history guard")
	require.Greater(t, len(short.Attempts), len(res.Attempts), "a short call retries further: %v", workflows.CallResult.Decisions(short))
}
