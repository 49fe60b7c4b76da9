package llmworker_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// onAnthropic puts every model of the ladder on the Anthropic wire: the
// simulator's Messages API, at its root.
func onAnthropic(c *config.Config) {
	for i := range c.Models {
		c.Models[i].API, c.Models[i].Continuation = config.APIAnthropic, config.ContinueAuto
		c.Models[i].BaseURL = strings.TrimSuffix(c.Models[i].BaseURL, "/v1")
	}
}

// TestIntegrationAnthropicLadder: a ladder of models on Anthropic's wire,
// called through Anthropic's Go SDK. An answer is the model's whole
// answer, every request went by the Messages API with the call's
// Idempotency-Key; a 529 overloaded_error is backpressure on that model
// (queue_full): the call moves to the next rung at once; an
// overloaded_error event in the middle of a 200 stream is a cut stream,
// resumed; a 429 waits its retry-after.
func TestIntegrationAnthropicLadder(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, onAnthropic)
	t.Run("answered", func(t *testing.T) {
		const q = "Where is my order?"
		res := s.Call(question("[[sim tokens=40]] " + q))
		require.Equal(t, []string{"qwen-72b:ok:answer"}, res.Decisions())
		require.Equal(t, workflows.SourceModel, res.Source)
		require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 40), res.Content)
		up := s.Upstream(res.RequestID)
		require.Equal(t, 1, up.Attempts)
		require.Equal(t, llmsim.WireAnthropic, up.Requests[0].Wire)
	})
	t.Run("529 overloaded", func(t *testing.T) {
		res := s.Call(question("[[sim fault=overloaded times=1]] Where is parcel 7?"))
		require.Equal(t, []string{"qwen-72b:queue_full:switch_model", "qwen-14b:ok:answer"}, res.Decisions(), "%+v", res.Attempts)
		require.Equal(t, workflows.SourceFallbackModel, res.Source)
	})
	t.Run("overloaded_error inside the stream", func(t *testing.T) {
		const q = "Read me the whole returns policy."
		res := s.Call(question("[[sim fault=stream_error after=50 times=1]] [[sim tokens=150]] " + q))
		require.Equal(t, []string{"qwen-72b:stream_broken:resume", "qwen-72b:ok:answer"}, res.Decisions(), "%+v", res.Attempts)
		require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 150), res.Content, "nothing repeated, nothing lost")
		gens := s.Sim.Generations(res.RequestID)
		require.Len(t, gens, 2)
		require.Equal(t, 50, gens[0].SentTokens, "the first stream was cut after 50 tokens")
		// No caller had the first 50 tokens (the call is not streamed to
		// one): the answer is asked for again whole. A streamed caller's
		// text is continued instead (frontdoor's TestStreamContinuesAnAnthropicOverload).
		require.False(t, gens[1].Continuation)
	})
	t.Run("a tool-use loop", func(t *testing.T) {
		// A chat caller's tools go to a Claude model as tools with an
		// input_schema; its tool_use comes back as a tool call; the tool's
		// result goes back as a tool_result block, and the model answers.
		req := question("Where is parcel 9? Use the tracker.")
		req.Tools = []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "track_parcel", Description: "Track a parcel",
			Parameters: json.RawMessage(`{"type":"object","properties":{"parcel":{"type":"integer"}},"required":["parcel"]}`)}}}
		res := s.Call(req)
		require.Equal(t, []string{"qwen-72b:ok:answer"}, res.Decisions(), "%+v", res.Attempts)
		require.Equal(t, "tool_calls", res.FinishReason)
		require.Len(t, res.ToolCalls, 1)
		call := res.ToolCalls[0]
		require.Equal(t, "track_parcel", call.Function.Name)
		require.True(t, strings.HasPrefix(call.ID, "toolu_"), "Anthropic's tool_use id: %q", call.ID)
		require.True(t, json.Valid([]byte(call.Function.Arguments)), "%q", call.Function.Arguments)

		req.UserID += "-2"
		req.Messages = append(req.Messages,
			request.Message{Role: request.RoleAssistant, ToolCalls: res.ToolCalls},
			request.Message{Role: "tool", ToolCallID: call.ID, Content: `{"parcel":9,"status":"in Lyon"}`})
		res = s.Call(req)
		require.Equal(t, []string{"qwen-72b:ok:answer"}, res.Decisions(), "%+v", res.Attempts)
		require.Equal(t, "stop", res.FinishReason)
		require.Empty(t, res.ToolCalls)
		require.NotEmpty(t, res.Content)
		gens := s.Sim.Generations(res.RequestID)
		require.Len(t, gens, 1)
		require.Equal(t, llmsim.WireAnthropic, gens[0].Wire)
	})
	t.Run("429 retry-after", func(t *testing.T) {
		res := s.Call(question("[[sim fault=rate_limited retry_after=2s times=1]] Where is my order?"))
		require.Equal(t, []string{"qwen-72b:rate_limited:wait retry-after", "qwen-72b:ok:answer"}, res.Decisions())
		require.Equal(t, int64(2000), res.Attempts[0].DelayMS)
	})
}
