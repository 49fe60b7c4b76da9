package realllm_test

import (
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	openai "github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/realllm"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestRealLLMContextWindow: pointed at Ollama with LLM_MODELS only, the
// worker learns the window requests get (OLLAMA_CONTEXT_LENGTH=1024, below
// the model's trained 2,048) from the server at start, instead of the
// assumed 8,192, and prunes a long conversation to it: the server gets
// the whole prompt it is sent, where with the assumed window it would cut
// the prompt silently (HTTP 200, "truncating input prompt" in its log).
func TestRealLLMContextWindow(t *testing.T) {
	const window = 1024
	llm := realllm.Start(t, realllm.Options{Models: []realllm.Model{realllm.Tiny}, ContextLength: window})
	env := map[string]string{config.EnvBaseURL: llm.BaseURL, config.EnvModels: "tiny"}
	cfg := config.DefaultConfig()
	require.NoError(t, cfg.ApplyEnv(func(k string) string { return env[k] }))
	require.True(t, cfg.Models[0].WindowAssumed)
	assumed := cfg.Models[0].ContextWindow
	require.Greater(t, assumed, window)

	// As the worker does at its start.
	start := time.Now()
	ws := llmworker.LearnWindows(context.Background(), cfg, func(string) string { return "" }, llmworker.WindowProbeTimeout)
	t.Logf("learned in %v: %v", time.Since(start), ws)
	require.Equal(t, []llmworker.Window{{Model: "tiny", Tokens: window, Source: llmworker.WindowServer,
		From: "from the server's /api/ps (the loaded model's context_length)"}}, ws)
	llmworker.ApplyWindows(cfg, ws)
	require.Equal(t, window, cfg.Models[0].ContextWindow)

	s := serve(t, llm, cfg, "realllm-window-")

	// Eight rounds of text the model's tokenizer spends a token per byte
	// on (it has no merges), and the worker's count no fewer than about
	// three per four bytes: some 7,000 of the model's tokens in all, far
	// over its window and well within the assumed one.
	rng := rand.New(rand.NewSource(7))
	text := func() string {
		var b strings.Builder
		for range 100 {
			b.WriteRune(rune(0x1D538 + rng.Intn(26))) // 𝔸…: 4 bytes each
		}
		return b.String()
	}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a support agent.")}
	for range 8 {
		msgs = append(msgs, openai.UserMessage(text()), openai.AssistantMessage(text()))
	}
	msgs = append(msgs, openai.UserMessage("Where is my order "+uuid.NewString()[:8]+"?"))
	// The answer's room (max_tokens) leaves a margin for the tokenizers'
	// difference within the window.
	resp, err := s.oc.Chat.Completions.New(rig.Context(t, 3*time.Minute), openai.ChatCompletionNewParams{
		Model: "tiny", Messages: msgs, MaxTokens: openai.Int(400), User: openai.String("u-window"),
	})
	require.NoError(t, err)
	r := rig.Resilience(t, resp.RawJSON())
	t.Logf("usage: %d prompt tokens; %s", resp.Usage.PromptTokens, s.describe(r))
	require.Equal(t, "model", r.Source, s.describe(r))
	last := r.Attempts[len(r.Attempts)-1]
	require.Less(t, last.Messages, len(msgs), "the conversation was pruned: %s", s.describe(r))
	require.LessOrEqual(t, last.PromptTokens+400, window, "pruned to fit the learned window with the answer's room")
	require.Less(t, resp.Usage.PromptTokens, int64(window), "the server got a prompt within its window")
	log, err := os.ReadFile(filepath.Join(llm.Dir, "server.log"))
	require.NoError(t, err)
	require.NotContains(t, string(log), "truncating input prompt", "the server cut the prompt: it was not pruned for its window")
}
