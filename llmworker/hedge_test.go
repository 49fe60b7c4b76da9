package llmworker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// hedged turns hedging on for every call: llama-8b after delay.
func hedged(delay string) func(*config.Config) {
	return func(c *config.Config) {
		c.Hedge.After, c.Hedge.Model, c.Hedge.Budget = delay, "llama-8b", 1
	}
}

// TestIntegrationHedgeWins: the first model has no first token after the
// hedge delay, so llama-8b is asked too; its answer answers the call well
// before the first model's would have, and the first model's attempt is
// cancelled and recorded as such.
func TestIntegrationHedgeWins(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, hedged("500ms"))

	start := time.Now()
	res := s.Call(question("[[sim fault=latency latency=6s model=qwen-72b times=1]] Where is my order?"))
	took := time.Since(start)
	require.Equal(t, []string{"qwen-72b:ok:cancelled", "llama-8b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.True(t, res.Attempts[1].Hedge, "the answer is the hedge's")
	require.Equal(t, "llama-8b", res.Model)
	require.NotEmpty(t, res.Content)
	require.Less(t, took, 4*time.Second, "the call waited for the slow first model")

	// A first model that answers in time is not hedged.
	res = s.Call(question("Where is my parcel?"))
	require.Equal(t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
}

// TestIntegrationHedgeLoses: the hedge starts, but the first model's answer
// comes first; the hedge is cancelled.
func TestIntegrationHedgeLoses(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, hedged("300ms"))
	res := s.Call(question("[[sim fault=latency latency=1s model=qwen-72b times=1]] [[sim fault=latency latency=8s model=llama-8b times=1]] Where is my refund?"))
	require.Equal(t, []string{"llama-8b:ok:cancelled", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.True(t, res.Attempts[0].Hedge)
	require.Equal(t, "qwen-72b", res.Model)
}

// TestIntegrationHedgeLoserIsCut: the hedge answers first and the first
// model's request, which would have generated for 8 s, is closed within a
// second of the answer (a provider bills what it generates), not at the
// attempt's next heartbeat.
func TestIntegrationHedgeLoserIsCut(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	// An upstream that stops generating when its client goes (vLLM aborts
	// the request), so its slot says whether the request is still open.
	keep := false
	s := newStackWith(t, llmsim.Options{Scenario: &llmsim.Scenario{ContinueOnDisconnect: &keep}}, hedged("300ms"))
	res := s.Call(question("[[sim fault=latency latency=8s model=qwen-72b times=1]] Where is my invoice?"))
	answered := time.Now()
	require.Equal(t, []string{"qwen-72b:ok:cancelled", "llama-8b:ok:answer"}, workflows.CallResult.Decisions(res))
	for {
		if n, _ := s.Sim.InFlight("qwen-72b"); n == 0 {
			break
		}
		require.Less(t, time.Since(answered), 5*time.Second, "the losing request is still open")
		time.Sleep(20 * time.Millisecond)
	}
	open := time.Since(answered)
	t.Logf("the losing request closed %v after the call answered", open.Round(time.Millisecond))
	require.Less(t, open, time.Second, "the losing request stayed open after the hedge answered")
}

// TestIntegrationHedgeBudget: with a tiny hedge budget only the one hedge
// per window every budget allows starts; the next slow call is not hedged
// and says why.
func TestIntegrationHedgeBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, func(c *config.Config) {
		hedged("300ms")(c)
		c.Hedge.Budget = 0.0001 // one hedge a window, the floor
	})
	res := s.Call(question("[[sim fault=latency latency=2s model=qwen-72b times=1]] Where is my order 1?"))
	require.Equal(t, "llama-8b", res.Model, "the window's one hedge did not start")
	res = s.Call(question("[[sim fault=latency latency=2s model=qwen-72b times=1]] Where is my order 2?"))
	require.Equal(t, []string{"llama-8b:ok:skip", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Contains(t, res.Attempts[0].Reason, "hedge budget spent")
}

// TestIntegrationStreamedHedge: on a streamed call the first attempt to
// produce a token wins; the other is cancelled and none of its text
// reaches the subscriber, though both were generating for a while.
func TestIntegrationStreamedHedge(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, hedged("300ms"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := question("[[sim tokens=80]] [[sim fault=latency latency=3s model=qwen-72b times=1]] Tell me about order 17.")
	req.Stream = true
	var text string
	models := map[string]int{}
	res, err := s.Calls.Stream(ctx, req, func(it llmclient.StreamItem) error {
		if it.Delta != nil {
			text += it.Delta.Text
			models[it.Delta.Model]++
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "llama-8b", res.Model, "%+v", res.Attempts)
	require.Equal(t, res.Content, text, "the deltas add up to the hedge's answer")
	require.Equal(t, []string{"llama-8b"}, keys(models), "deltas of the cancelled attempt reached the subscriber")
	require.Equal(t, []string{"qwen-72b:ok:cancelled", "llama-8b:ok:answer"}, workflows.CallResult.Decisions(res))
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// replacing turns on hedging with hedge.replace.
func replacing(delay string) func(*config.Config) {
	return func(c *config.Config) {
		hedged(delay)(c)
		c.Hedge.Replace = true
	}
}

// TestIntegrationHedgeReplaced: under hedge.replace the hedge's answer is
// the caller's first answer, marked replaceable, long before the slow
// first model's; the first model keeps answering, and its answer is the
// call's final result, which records the quick answer it replaced.
func TestIntegrationHedgeReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, replacing("400ms"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	start := time.Now()
	// The first model is far slower than the hedge, so the race is not
	// decided by a slow machine's scheduling (and under its 8 s
	// first_token_timeout).
	req := question("[[sim fault=latency latency=6s model=qwen-72b times=1]] Where is my order 31?")
	quick := s.Call(req)
	took := time.Since(start)
	require.True(t, quick.Replaceable, "%+v", quick)
	require.Equal(t, "llama-8b", quick.Model)
	require.NotEmpty(t, quick.Content)
	require.Less(t, took, 5*time.Second, "the quick answer waited for the slow first model")

	final, err := s.Calls.Result(ctx, quick.RequestID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 6*time.Second, "the final answer came before the first model's could")
	require.False(t, final.Replaceable)
	require.Equal(t, "qwen-72b", final.Model)
	require.Equal(t, "model", string(final.Source), "the first model's answer is not degraded")
	require.False(t, final.Degraded)
	require.NotNil(t, final.Replaced)
	require.Equal(t, "llama-8b", final.Replaced.Model)
	require.Equal(t, quick.Content, final.Replaced.Content)
	require.Less(t, final.Replaced.AtMS, int64(5000))
	require.Equal(t, []string{"llama-8b:ok:replaced", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(final))
	require.Greater(t, final.Usage.CompletionTokens, quick.Usage.CompletionTokens, "both answers were billed")

	// The same request again attaches to the finished call: its final answer.
	again := s.Call(req)
	require.Equal(t, final.RequestID, again.RequestID)
	require.Equal(t, final.Content, again.Content)
	require.False(t, again.Replaceable)
}

// TestIntegrationHedgeReplaceFails: under hedge.replace, when the first
// model fails after the quick answer, the quick answer is the final one.
func TestIntegrationHedgeReplaceFails(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, replacing("400ms"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quick := s.Call(question("[[sim fault=invalid_api_key latency=3s model=qwen-72b times=1]] Where is my order 32?"))
	require.True(t, quick.Replaceable)
	final, err := s.Calls.Result(ctx, quick.RequestID)
	require.NoError(t, err)
	require.Equal(t, "llama-8b", final.Model)
	require.Equal(t, quick.Content, final.Content)
	require.False(t, final.Replaceable)
	require.Nil(t, final.Replaced)
	require.Equal(t, []string{"qwen-72b:auth:raced", "llama-8b:ok:answer"}, workflows.CallResult.Decisions(final))
}

// TestIntegrationStreamedHedgeReplaced: a streamed call under
// hedge.replace streams the hedge's text (it had the first token); the
// first model goes on, and its answer reaches the subscriber as a
// replaced event with the whole new text, which is the call's content.
func TestIntegrationStreamedHedgeReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, replacing("300ms"))
	text, models, replaced, res := s.followReplacement("[[sim tokens=20]] [[sim fault=latency latency=3s model=qwen-72b times=1]] Tell me about order 33.")
	require.Equal(t, []string{"llama-8b"}, keys(models), "deltas of the first model reached the stream before its answer was whole")
	require.NotNil(t, replaced, "no replaced event")
	require.Equal(t, "qwen-72b", replaced.Model)
	require.Equal(t, "qwen-72b", res.Model)
	require.Equal(t, replaced.Content, res.Content)
	require.NotEqual(t, text, res.Content)
	require.NotNil(t, res.Replaced)
	require.Equal(t, text, res.Replaced.Content, "the quick answer recorded is the text streamed")
}

// TestIntegrationStreamedHedgeCutByTheReplacement: the hedge streams first
// and slowly; the first model answers while the hedge is still streaming:
// the hedge is cancelled, the replaced event carries the first model's
// answer, and nothing of the hedge reaches the subscriber after it.
func TestIntegrationStreamedHedgeCutByTheReplacement(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, replacing("300ms"))
	hedgeText, _, replaced, res := s.followReplacement("[[sim tokens=20]] [[sim fault=slow_drip duration=8s model=llama-8b times=1]] [[sim fault=latency latency=1500ms model=qwen-72b times=1]] Tell me about order 34.")
	require.NotEmpty(t, hedgeText, "the hedge streamed nothing before it was cut")
	require.NotNil(t, replaced)
	require.Equal(t, "qwen-72b", res.Model)
	require.Equal(t, replaced.Content, res.Content)
	require.NotNil(t, res.Replaced)
	require.Equal(t, "llama-8b", res.Replaced.Model)
	require.Equal(t, []string{"llama-8b:ok:cancelled", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
}

// followReplacement streams question and returns the text streamed before
// the replaced event, the deltas per model, that event and the result; a
// delta after the replacement fails the call.
func (s *stack) followReplacement(q string) (string, map[string]int, *workflows.Event, workflows.CallResult) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := question(q)
	req.Stream = true
	var text string
	var replaced *workflows.Event
	models := map[string]int{}
	res, err := s.Calls.Stream(ctx, req, func(it llmclient.StreamItem) error {
		switch {
		case it.Delta != nil && replaced != nil:
			return fmt.Errorf("a delta of %s after the replacement: %q", it.Delta.Model, it.Delta.Text)
		case it.Delta != nil:
			text += it.Delta.Text
			models[it.Delta.Model]++
		case it.Event != nil && it.Event.Type == workflows.EventReplaced:
			replaced = it.Event
		}
		return nil
	})
	require.NoError(s.t, err)
	return text, models, replaced, res
}
