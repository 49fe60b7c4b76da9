package llmworker_test

import (
	"testing"

	"github.com/durable-llm/durable-llm/workflows"
	"github.com/stretchr/testify/require"
)

// TestIntegrationDuplicateSpend: a request sent again within the hour is
// counted as duplicate spend: a caller's retry of its call under a new key,
// and the prompt a resumed stream sends again; the same question from
// another user is not.
func TestIntegrationDuplicateSpend(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	first := question("What is your returns policy?")
	res := s.Call(first)
	require.Zero(t, res.Usage.DuplicatePromptTokens, "a first request is no duplicate")

	again := first
	again.IdempotencyKey = "client-retry-1" // a new call: the caller retries
	res = s.Call(again)
	require.Equal(t, res.Usage.PromptTokens, res.Usage.DuplicatePromptTokens, "the caller's retry sent the same request again: %+v", res.Usage)

	other := question("What is your returns policy?") // another user
	require.NotEqual(t, first.UserID, other.UserID)
	res = s.Call(other)
	require.Zero(t, res.Usage.DuplicatePromptTokens, "another user's same question counted as duplicate")

	resumed := question("[[sim fault=cut_stream after=5 times=1]] [[sim tokens=40]] Tell me about delivery times.")
	resumed.Stream = true
	res = s.Call(resumed)
	require.Equal(t, []string{"qwen-72b:stream_broken:resume (continue)", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, res.Attempts[1].PromptTokens, res.Usage.DuplicatePromptTokens, "the resumed attempt's prompt is sent again: %+v", res.Usage)
}
