package llmworker_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/bench"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// summaries counts the summary requests llmsim saw for a call, and reports
// whether the call's answering request recalled the planted fact.
func summaries(sim *llmsim.Server, id string) (n int, recalled bool) {
	for _, g := range sim.Generations(id) {
		if g.Summary {
			n++
		} else if g.Recall != "" {
			recalled = g.Recalled
		}
	}
	return n, recalled
}

// TestIntegrationContextRefinerKeepsADroppedFact: a 12-round conversation
// with an order number told in its fourth round is refused over 1,300
// tokens by the first model (context_length_exceeded). With summarize on,
// llama-8b summarises the 9 rounds the retry drops, the retry carries the
// summary with the order number (llmsim sees it: Recalled) and answers
// from it, with fewer prompt tokens than the refused attempt; the
// session's second call is refused too and reuses the summary: no second
// summary request reaches llmsim. Without summarize the same retry loses
// the fact.
func TestIntegrationContextRefinerKeepsADroppedFact(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, func(c *config.Config) {
		cp := c.Classes[failure.ContextLengthExceeded]
		cp.Summarize = true
		c.Classes[failure.ContextLengthExceeded] = cp
	})
	req := bench.LongConversation("refiner", 12, 1300, "What was my order number?")
	res := s.Call(req)
	require.Equal(t, []string{"qwen-72b:context_length_exceeded:prune+summary+resend", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res), "%+v", res.Attempts)
	require.Contains(t, res.Content, "Recalled: ZX-4711.")
	require.Contains(t, res.Attempts[1].Reason, "context refiner: llama-8b summarized 9 round(s)")
	require.Equal(t, 1+1+3*2+1, res.Attempts[1].Messages, "system + summary + last 3 rounds + question")
	require.Less(t, res.Attempts[1].PromptTokens, res.Attempts[0].PromptTokens/3)
	n, recalled := summaries(s.Sim, res.RequestID)
	require.Equal(t, 1, n, "one summary request")
	require.True(t, recalled, "the retry's request holds the fact of a dropped round")

	// The session's next call: one more round; refused again, it reuses
	// the summary (the round after the ones it covers is sent as it is).
	next := req
	next.Messages = append(append([]request.Message{}, req.Messages[:len(req.Messages)-1]...),
		request.Message{Role: "user", Content: "when will it arrive?"},
		request.Message{Role: "assistant", Content: "soon."},
		req.Messages[len(req.Messages)-1])
	res2 := s.Call(next)
	require.Equal(t, []string{"qwen-72b:context_length_exceeded:prune+summary+resend", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res2), "%+v", res2.Attempts)
	require.Contains(t, res2.Attempts[1].Reason, "the session's summary by llama-8b replaces 9 round(s)")
	n, recalled = summaries(s.Sim, res2.RequestID)
	require.Zero(t, n, "no second summary request")
	require.True(t, recalled)
	require.Contains(t, res2.Content, "Recalled: ZX-4711.")

	plain := newStack(t, nil)
	res = plain.Call(bench.LongConversation("plain", 12, 1300, "What was my order number?")) // another user: another call
	require.Equal(t, []string{"qwen-72b:context_length_exceeded:prune+resend", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Contains(t, res.Content, "Not in context: ZX-4711.", "plain pruning drops the fact")
}

// TestIntegrationOutputTruncatedContinues: a 600-token answer under the
// policy's limit of 300 (limits.default_max_tokens: the request sets none;
// a caller's own limit reached would be its answer) is cut at 300
// (finish_reason length). With continue (the
// default) the next attempt sends those 300 tokens for the model to
// continue and asks for up to 556 new ones: two attempts, the answer is
// exactly llmsim's whole answer (no token twice), and the second attempt
// generated only the missing 300. bump_tokens regenerates it whole with
// 556, then 812 max_tokens: three attempts, twice the completion tokens.
func TestIntegrationOutputTruncatedContinues(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	const q = "Explain the delivery options in detail."
	// At llmsim's real pace (the first token after about 300 ms, then 40
	// tokens/s, streamed): each attempt generates for seconds.
	limit300 := func(c *config.Config) { c.Limits.DefaultMaxTokens = 300 }
	s := newStack(t, limit300)
	req := question("[[sim tokens=600]] " + q)
	res := s.Call(req)
	require.Equal(t, []string{"qwen-72b:output_truncated:continue", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res), "%+v", res.Attempts)
	whole := llmsim.AnswerTokens("qwen-72b", q, 600)
	require.Equal(t, whole, res.Content)
	gens := s.Sim.Generations(res.RequestID)
	require.Len(t, gens, 2)
	require.True(t, gens[1].Continuation && gens[1].PrefixMatched, "%+v", gens[1])
	require.Equal(t, 300, gens[1].CompletionTokens, "only the missing part is generated")
	require.False(t, strings.Contains(res.Content[len(gens[1].Prefix):], gens[1].Prefix[:40]), "no text twice")
	completion := gens[0].CompletionTokens + gens[1].CompletionTokens

	// The baseline's tokens do not depend on the pace: instant models.
	instant := llmsim.Options{Scenario: &llmsim.Scenario{Name: "instant", Models: llmsim.InstantModels()}}
	old := newStackWith(t, instant, func(c *config.Config) {
		limit300(c)
		cp := c.Classes[failure.OutputTruncated]
		cp.Action = config.ActionBumpTokens
		c.Classes[failure.OutputTruncated] = cp
	})
	req.UserID += "-old" // another call, not the recorded one
	res = old.Call(req)
	require.Equal(t, []string{"qwen-72b:output_truncated:more tokens+retry", "qwen-72b:output_truncated:more tokens+retry", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, whole, res.Content)
	oldCompletion := 0
	for _, g := range old.Sim.Generations(res.RequestID) {
		oldCompletion += g.CompletionTokens
	}
	require.Less(t, 2*completion, oldCompletion+completion/2, "continue: %d completion tokens, bump_tokens %d", completion, oldCompletion)
}

// TestIntegrationExhaustedTruncationAnswersWithModelText: a 5,000-token
// answer under the policy's limit of 50 (the request sets none) is cut at
// every attempt, continued each time, until the call's attempts run out.
// The caller gets the text the models wrote, the longest of it, marked
// degraded and cut (finish_reason length), never the FAQ.
func TestIntegrationExhaustedTruncationAnswersWithModelText(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	const q = "Explain the delivery options in detail."
	instant := llmsim.Options{Scenario: &llmsim.Scenario{Name: "instant", Models: llmsim.InstantModels()}}
	s := newStackWith(t, instant, func(c *config.Config) { c.Limits.DefaultMaxTokens = 50 })
	res := s.Call(question("[[sim tokens=5000]] " + q))
	decisions := workflows.CallResult.Decisions(res)
	require.Equal(t, workflows.SourceModel, res.Source, "%v: %s", decisions, res.Reason)
	require.True(t, res.Degraded, "a cut answer is marked degraded")
	require.Equal(t, "length", res.FinishReason)
	require.Empty(t, res.FAQID, "no canned answer")
	require.Contains(t, res.Reason, "answered with the longest text a model wrote")
	gens := s.Sim.Generations(res.RequestID)
	require.Greater(t, len(gens), 1, "the truncated answer was retried")
	longest := 0
	for _, g := range gens {
		longest = max(longest, g.CompletionTokens)
	}
	require.NotEmpty(t, res.Content)
	require.True(t, strings.HasPrefix(llmsim.AnswerTokens(res.Model, q, 5000), res.Content), "the answer is the model's own text, from its start: %q", res.Content)
	require.Greater(t, len(res.Content), len(llmsim.AnswerTokens(res.Model, q, 50)), "more than one attempt's text: the continuations are kept (%v)", decisions)
	t.Logf("%v: %d characters of model text, %d upstream requests (longest generation %d tokens)", decisions, len(res.Content), len(gens), longest)
}

// TestIntegrationSystemPromptDroppedIsSaid: llama-8b takes no system
// role: its attempt sends the user turns only and the result says so.
func TestIntegrationSystemPromptDroppedIsSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	req := question("Where is my order?")
	req.Model = "llama-8b"
	res := s.Call(req)
	require.Equal(t, workflows.SourceModel, res.Source, "%+v", res)
	require.Contains(t, res.Reason, "system prompt dropped: llama-8b takes no system role")
	require.Contains(t, res.Attempts[0].Reason, "system prompt dropped: llama-8b takes no system role")
	require.Equal(t, 1, res.Attempts[0].Messages, "the question only")
}
