package realllm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/realllm"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

const token = "tok-realllm-5d8e2a7c4b1f9e3a6c0d8b2f4e7a1c9d"

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// stack is the whole path against the real server: Ollama (one slot)
// behind its counting proxy, a dev server, a worker configured by the
// one-line quick start and the front door.
type stack struct {
	*rig.Stack
	llm  *realllm.Server
	door *httptest.Server
	oc   openai.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	llm := realllm.Start(t, realllm.Options{NumParallel: 1})

	// The quick start: LLM_BASE_URL and LLM_MODELS, with the model names
	// as a user types them (Ollama lists tiny:latest), checked as the
	// worker checks them at start-up.
	env := map[string]string{config.EnvBaseURL: llm.BaseURL, config.EnvModels: "tiny,tiny-eos"}
	cfg := config.DefaultConfig()
	require.NoError(t, cfg.ApplyEnv(func(k string) string { return env[k] }))
	ends := llmworker.AskModels(context.Background(), cfg, func(string) string { return "" }, 10*time.Second)
	warnings, err := llmworker.CheckModels(ends, false)
	require.NoError(t, err, "the start-up model check refuses LLM_MODELS=tiny,tiny-eos")
	require.Empty(t, warnings)
	require.Equal(t, []string{"tiny-eos:latest", "tiny:latest"}, ends[0].Offered)
	return serve(t, llm, cfg, "realllm-")
}

// serve runs a worker of cfg, on a task queue named from queuePrefix, and
// the front door before it.
func serve(t *testing.T, llm *realllm.Server, cfg *config.Config, queuePrefix string) *stack {
	t.Helper()
	s := rig.New(t, rig.Options{Shared: &shared, Config: cfg, QueuePrefix: queuePrefix})
	_, door := s.Door(token+"=acme", nil)
	return &stack{Stack: s, llm: llm, door: door, oc: rig.OpenAI(door.URL, token)}
}

// ask is a one-question request to model (with maxTokens when positive),
// unique per call so that none is answered from another's result.
func ask(model string, maxTokens int64) openai.ChatCompletionNewParams {
	id := uuid.NewString()[:8]
	p := openai.ChatCompletionNewParams{
		Model: model,
		User:  openai.String("u-" + id),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a support agent."),
			openai.UserMessage("Where is my order " + id + "?"),
		},
	}
	if maxTokens > 0 {
		p.MaxTokens = openai.Int(maxTokens)
	}
	return p
}

// describe is what the test log shows of a call: its attempts and the
// upstream requests the proxy saw.
func (s *stack) describe(r frontdoor.Resilience) string {
	var b strings.Builder
	fmt.Fprintf(&b, "source %s, degraded %v, reason %q; attempts:", r.Source, r.Degraded, r.Reason)
	for _, a := range r.Attempts {
		fmt.Fprintf(&b, " [%d %s %d ms HTTP %d class=%q decision=%q %q]", a.N, a.Model, a.DurationMS, a.Status, a.Class, a.Decision, a.Reason)
	}
	b.WriteString("; upstream requests:")
	for _, q := range s.llm.Completions(r.WorkflowID) {
		mt := "none"
		if q.MaxTokens != nil {
			mt = fmt.Sprint(*q.MaxTokens)
		}
		fmt.Fprintf(&b, " [%s %s stream=%v max_tokens=%s → %d]", q.RequestID, q.Model, q.Stream, mt, q.Status)
	}
	return b.String()
}

// TestRealLLM runs calls through the front door against a real Ollama
// server with tiny random models: answers come from the model, with and
// without the caller's max_tokens, streamed, and several at once on one
// slot; each upstream request is counted by the proxy in front of Ollama.
func TestRealLLM(t *testing.T) {
	s := newStack(t)

	t.Run("plain", func(t *testing.T) {
		resp, err := s.oc.Chat.Completions.New(rig.Context(t, 3*time.Minute), ask("tiny-eos", 1000))
		require.NoError(t, err)
		r := rig.Resilience(t, resp.RawJSON())
		t.Log(s.describe(r))
		require.Equal(t, "model", r.Source, s.describe(r))
		require.False(t, r.Degraded, s.describe(r))
		require.Equal(t, "tiny-eos", resp.Model)
		require.Len(t, resp.Choices, 1)
		require.NotEmpty(t, resp.Choices[0].Message.Content)
		require.Positive(t, resp.Usage.PromptTokens)
		require.Positive(t, resp.Usage.CompletionTokens)
		require.Len(t, s.llm.Completions(r.WorkflowID), 1, "one upstream request with the call's X-Request-ID")
	})

	t.Run("streamed", func(t *testing.T) {
		// tiny writes up to the caller's 1,000 tokens, as they come.
		ctx := rig.Context(t, 3*time.Minute)
		var hr *http.Response
		stream := s.oc.Chat.Completions.NewStreaming(ctx, ask("tiny", 1000), option.WithResponseInto(&hr))
		var acc openai.ChatCompletionAccumulator
		var text strings.Builder
		deltas := 0
		var last openai.ChatCompletionChunk
		for stream.Next() {
			c := stream.Current()
			acc.AddChunk(c)
			if len(c.Choices) > 0 {
				if d := c.Choices[0].Delta.Content; d != "" {
					text.WriteString(d)
					deltas++
				}
				if c.Choices[0].FinishReason != "" {
					last = c
				}
			}
		}
		require.NoError(t, stream.Err())
		id := hr.Header.Get("X-Workflow-Id")
		require.NotEmpty(t, id)
		var res workflows.CallResult
		require.NoError(t, s.Client.GetWorkflow(ctx, id, "").Get(ctx, &res))
		r := rig.Resilience(t, last.RawJSON())
		t.Logf("%d deltas, %d bytes; %s", deltas, text.Len(), s.describe(r))
		require.Equal(t, "model", r.Source, s.describe(r))
		require.Equal(t, workflows.Source("model"), res.Source)
		require.Equal(t, "length", res.FinishReason, "the caller's limit reached")
		require.NotEmpty(t, res.Content)
		require.Equal(t, res.Content, text.String(), "the streamed text is the call's content")
		require.Equal(t, res.Content, acc.Choices[0].Message.Content)
		require.Greater(t, deltas, 1, "the text came in pieces, as the model generated it")
		ups := s.llm.Completions(id)
		require.Len(t, ups, 1, s.describe(r))
		require.True(t, ups[0].Stream, "the upstream call is streamed")
	})

	t.Run("concurrent on one slot", func(t *testing.T) {
		// Four calls at once; Ollama generates for one at a time (one
		// slot), the others wait for it. tiny stops at the caller's 1,000
		// tokens: each takes a while.
		const n = 4
		ctx := rig.Context(t, 3*time.Minute)
		var wg sync.WaitGroup
		results := make([]*openai.ChatCompletion, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = s.oc.Chat.Completions.New(ctx, ask("tiny", 1000))
			}()
		}
		wg.Wait()
		var ups []realllm.Request
		for i := range n {
			require.NoError(t, errs[i], "call %d", i)
			r := rig.Resilience(t, results[i].RawJSON())
			t.Logf("call %d: %s", i, s.describe(r))
			// A call that waits in the queue past the first-token timeout
			// may be answered by the other model.
			require.Contains(t, []string{"model", "fallback_model"}, r.Source, "call %d: %s", i, s.describe(r))
			require.NotEmpty(t, results[i].Choices[0].Message.Content, "call %d", i)
			ups = append(ups, s.llm.Completions(r.WorkflowID)...)
		}
		inFlight := realllm.MaxInFlight(ups)
		t.Logf("%d upstream requests, at most %d at once", len(ups), inFlight)
		require.GreaterOrEqual(t, inFlight, 2, "the calls did not meet at the server: its one slot was never contended")
	})

	t.Run("caller's max_tokens reached", func(t *testing.T) {
		// tiny never ends by itself: it stops at the caller's 16 tokens.
		// That is the caller's answer, as OpenAI gives it: one request,
		// finish_reason length, never retried with a larger limit.
		resp, err := s.oc.Chat.Completions.New(rig.Context(t, 3*time.Minute), ask("tiny", 16))
		require.NoError(t, err)
		r := rig.Resilience(t, resp.RawJSON())
		t.Log(s.describe(r))
		ups := s.llm.Completions(r.WorkflowID)
		require.Len(t, ups, 1, "one upstream request: %s", s.describe(r))
		require.NotNil(t, ups[0].MaxTokens)
		require.Equal(t, 16, *ups[0].MaxTokens, "the caller's limit, sent as it is")
		require.Equal(t, "model", r.Source, s.describe(r))
		require.False(t, r.Degraded, s.describe(r))
		require.Equal(t, "length", resp.Choices[0].FinishReason)
		require.NotEmpty(t, resp.Choices[0].Message.Content)
		require.Equal(t, int64(16), resp.Usage.CompletionTokens)
	})

	t.Run("no max_tokens", func(t *testing.T) {
		// The caller sets no limit; the server's own (num_predict 128 in
		// the Modelfile) would cut a good share of tiny-eos's answers.
		// The policy's default limit goes with the first request instead,
		// and the model ends its answer by itself.
		resp, err := s.oc.Chat.Completions.New(rig.Context(t, 3*time.Minute), ask("tiny-eos", 0))
		require.NoError(t, err)
		r := rig.Resilience(t, resp.RawJSON())
		t.Logf("%d completion tokens; %s", resp.Usage.CompletionTokens, s.describe(r))
		require.Equal(t, "model", r.Source, s.describe(r))
		require.NotEmpty(t, resp.Choices[0].Message.Content)
		require.Equal(t, "stop", resp.Choices[0].FinishReason, s.describe(r))
		ups := s.llm.Completions(r.WorkflowID)
		require.NotEmpty(t, ups)
		require.NotNil(t, ups[0].MaxTokens, "the first request went without a limit: the server's own applies")
		require.Equal(t, s.Config.Limits.DefaultMaxTokens, *ups[0].MaxTokens, "the policy's default limit")
	})
}

// TestRealLLMBusyServerAnswersEveryCall: Ollama with one slot and a queue
// of one (OLLAMA_NUM_PARALLEL=1 OLLAMA_MAX_QUEUE=1) and its model not
// loaded refuses what its queue cannot hold with HTTP 503 "server busy …
// maximum pending requests exceeded" at once. Ten calls at once to a
// one-model ladder: each refusal is backpressure (the model's queue held,
// released with jitter, the same request sent again, no attempt against
// the cap), so every call is answered by the model within its deadline,
// none by the fallback.
func TestRealLLMBusyServerAnswersEveryCall(t *testing.T) {
	llm := realllm.Start(t, realllm.Options{NumParallel: 1, MaxQueue: 1})
	env := map[string]string{config.EnvBaseURL: llm.BaseURL, config.EnvModels: "tiny"}
	cfg := config.DefaultConfig()
	require.NoError(t, cfg.ApplyEnv(func(k string) string { return env[k] }))
	lc := rig.New(t, rig.Options{Shared: &shared, Config: cfg, QueuePrefix: "realllm-busy-"}).Calls

	// Unloaded, the model's requests wait in the scheduler's queue, which
	// OLLAMA_MAX_QUEUE bounds (a loaded model's wait on its slot instead).
	unload, err := http.Post(llm.DirectURL+"/api/generate", "application/json", strings.NewReader(`{"model":"tiny","keep_alive":0}`))
	require.NoError(t, err)
	_ = unload.Body.Close()
	require.Eventually(t, func() bool {
		resp, err := http.Get(llm.DirectURL + "/api/ps")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var ps struct {
			Models []struct {
				Name string `json:"name"`
			} `json:"models"`
		}
		if json.NewDecoder(resp.Body).Decode(&ps) != nil {
			return false
		}
		for _, m := range ps.Models {
			if m.Name == "tiny:latest" {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "the model did not unload")

	const calls = 10
	results := make([]workflows.CallResult, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := workflows.CallRequest{
				UserID: "u-busy-" + uuid.NewString()[:8], SessionID: "s-1", MaxTokens: 200, DeadlineMS: 30000,
				Messages: []request.Message{{Role: "user", Content: fmt.Sprintf("Where is my order %d?", i)}},
			}
			results[i], errs[i] = lc.Call(rig.Context(t, 3*time.Minute), req)
		}()
	}
	wg.Wait()
	busy := 0
	for i, res := range results {
		require.NoError(t, errs[i])
		var b strings.Builder
		for _, q := range llm.Completions(res.RequestID) {
			fmt.Fprintf(&b, " [%s → %d]", q.RequestID, q.Status)
			if q.Status == http.StatusServiceUnavailable {
				busy++
			}
		}
		t.Logf("call %d: %v; upstream:%s", i, res.Decisions(), b.String())
		require.Equal(t, workflows.SourceModel, res.Source, "call %d: %v", i, res.Decisions())
		require.NotEmpty(t, res.Content)
	}
	if busy == 0 {
		// Ollama refuses only while it loads the model (about 0.3 s); calls
		// that reach it more spread out than that (a loaded machine) find
		// it loaded, and its queue limit no longer applies.
		t.Skip("every call was answered by the model, but none reached Ollama while its queue was full: the refusals were not exercised")
	}
}
