package llmworker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationKeyPool: a model with a pool of keys. A 429 on one key
// sends the next attempt to the other key at once (no Retry-After wait),
// and the next call starts on the free key; a key refused as invalid is
// parked, so the model stays open for calls on its other key.
func TestIntegrationKeyPool(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	t.Setenv("POOL_KEY_A", "sk-pool-a")
	t.Setenv("POOL_KEY_B", "sk-pool-b")
	s := newStack(t, func(c *config.Config) {
		c.Models[0].APIKeyEnv, c.Models[0].APIKeyEnvs = "", []string{"POOL_KEY_A", "POOL_KEY_B"}
	})

	start := time.Now()
	res := s.Call(question("[[sim fault=rate_limited retry_after=5s model=qwen-72b times=1]] Where is my order?"))
	took := time.Since(start)
	require.Equal(t, []string{"qwen-72b:rate_limited:retry (another key)", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	first, second := res.Attempts[0].Key, res.Attempts[1].Key
	require.NotEmpty(t, first)
	require.NotEqual(t, first, second, "the retry went to the same key")
	require.Zero(t, res.Attempts[0].DelayMS, "the retry waited")
	require.Less(t, took, 5*time.Second, "the call waited out the Retry-After of the key that was limited")

	// The limited key is held for its Retry-After: the next call takes the other.
	res = s.Call(question("Where is my parcel?"))
	require.Equal(t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, second, res.Attempts[0].Key)

	// An invalid key is parked, not the model: this call switches, the next
	// one is answered by qwen-72b on its other key.
	res = s.Call(question("[[sim fault=invalid_api_key model=qwen-72b times=1]] Where is my refund?"))
	require.Equal(t, "qwen-72b:auth:switch_model", workflows.CallResult.Decisions(res)[0])
	refused := res.Attempts[0].Key
	for i := range 3 {
		res = s.Call(question("Where is my invoice " + string(rune('A'+i)) + "?"))
		require.Equal(t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res), "the model's breaker opened for one refused key")
		require.NotEqual(t, refused, res.Attempts[0].Key, "a parked key was used")
	}
}

// TestIntegrationKeyPoolHeadroom: an upstream that limits each key on its
// own (llmsim's rate_limit_per_key) and reports each key's headroom. Key A
// is half spent by another client; once one response said so, the calls go
// to key B, which has more room, and key A's last requests are spared for
// its other client — plain rotation sends every other call to A.
func TestIntegrationKeyPoolHeadroom(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	t.Setenv("POOL_KEY_A", "sk-pool-a")
	t.Setenv("POOL_KEY_B", "sk-pool-b")
	models := llmsim.InstantModels()
	// 8 requests a minute per key (a full bucket of 8, refilled one every
	// 7.5 s: the test's instant calls take about a second in all).
	models[0].RateLimit, models[0].Burst, models[0].RateLimitPerKey = 8.0/60, 8, true
	s := newStackWith(t, llmsim.Options{Scenario: &llmsim.Scenario{Name: "per-key", Models: models}}, func(c *config.Config) {
		c.Models[0].APIKeyEnv, c.Models[0].APIKeyEnvs = "", []string{"POOL_KEY_A", "POOL_KEY_B"}
	})
	spend(t, s.Sim.BaseURL, "sk-pool-a", 4) // another client spends 4 of key A's 8 requests
	// One call learns A's headroom (3 of 8 left after it); B, never below
	// 3 of 8 in six calls, takes the rest.
	require.Equal(t, map[string]int{"POOL_KEY_A": 1, "POOL_KEY_B": 5}, s.callsByKey(6))
}

// spend sends n requests with key to the llmsim at base, as another
// client of the same key would.
func spend(t *testing.T, base, key string, n int) {
	t.Helper()
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = base
	other := openai.NewClientWithConfig(cfg)
	for i := range n {
		_, err := other.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "qwen-72b",
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: fmt.Sprintf("spend %d", i)}}})
		require.NoError(t, err)
	}
}

// callsByKey makes n calls that must each be answered at once and counts
// them by the key (or deployment) their attempt used.
func (s *stack) callsByKey(n int) map[string]int {
	s.t.Helper()
	by := map[string]int{}
	for i := range n {
		res := s.Call(question(fmt.Sprintf("Where is my parcel %c?", 'A'+i)))
		require.Equal(s.t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res), "call %d met a refusal", i)
		by[res.Attempts[0].Key]++
	}
	return by
}

// TestIntegrationDeployments: a model served by two deployments, each its
// own llmsim with its own URL and per-key limits. East is half spent by
// another client: once one response said so, the calls are balanced to
// west. Attempts name the deployment. (A 429 moving to another
// deployment at once is the key pool's mechanism, tested above: an
// in-prompt fault would strike both simulators.)
func TestIntegrationDeployments(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	models := llmsim.InstantModels()
	models[0].RateLimit, models[0].Burst, models[0].RateLimitPerKey = 8.0/60, 8, true
	west := rig.Sim(t, llmsim.Options{Scenario: &llmsim.Scenario{Name: "west", Models: models}})
	s := newStackWith(t, llmsim.Options{Scenario: &llmsim.Scenario{Name: "east", Models: models}}, func(c *config.Config) {
		c.Models[0].Deployments = []config.Deployment{
			{Name: "east", BaseURL: c.Models[0].BaseURL},
			{Name: "west", BaseURL: west.BaseURL},
		}
	})
	spend(t, s.Sim.BaseURL, "", 4) // another client spends 4 of east's 8 requests
	require.Equal(t, map[string]int{"east": 1, "west": 5}, s.callsByKey(6))
	require.Equal(t, 5, west.Stats().Totals.Responses["200"], "west's own count of the calls it answered")
}
