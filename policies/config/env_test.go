package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestApplyEnv: LLM_MODELS makes the ladder, in order, on LLM_BASE_URL
// with LLM_API_KEY; a name the ladder had keeps its settings; the hedge
// and diagnosis rungs move to the last model; bad lists name the variable.
func TestApplyEnv(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.ApplyEnv(env(map[string]string{
		EnvBaseURL: "https://api.example.com/v1", EnvAPIKey: "sk-x", EnvModels: " gpt-4o , gpt-4o-mini,qwen-14b",
	})))
	names := []string{}
	for _, m := range c.Models {
		names = append(names, m.Name)
		require.Equal(t, "https://api.example.com/v1", m.BaseURL, m.Name)
		require.Equal(t, EnvAPIKey, m.APIKeyEnv, m.Name)
	}
	require.Equal(t, []string{"gpt-4o", "gpt-4o-mini", "qwen-14b"}, names)
	require.Equal(t, DefaultConfig().Models[1].ContextWindow, c.Models[2].ContextWindow, "qwen-14b kept its settings")
	require.Equal(t, DefaultConfig().ModelDefaults.ContextWindow, c.Models[0].ContextWindow, "a new name starts from model_defaults")
	require.Equal(t, "qwen-14b", c.Hedge.Model)
	require.Equal(t, "qwen-14b", c.Diagnose.Model)

	// Without LLM_BASE_URL the new names stay on the ladder's endpoint,
	// and LLM_API_KEY leaves the policy's keys alone.
	c = DefaultConfig()
	c.Models[0].APIKeyEnvs, c.Models[0].APIKeyEnv = []string{"POOL_A", "POOL_B"}, ""
	require.NoError(t, c.ApplyEnv(env(map[string]string{EnvModels: "qwen-72b,gpt-4o", EnvAPIKey: "sk-x"})))
	require.Equal(t, DefaultConfig().Models[0].BaseURL, c.Models[1].BaseURL)
	require.Equal(t, []string{"POOL_A", "POOL_B"}, c.Models[0].APIKeyEnvs, "the pool collapsed into LLM_API_KEY")

	// Nothing set: unchanged.
	c = DefaultConfig()
	require.NoError(t, c.ApplyEnv(env(nil)))
	require.Equal(t, DefaultConfig().Models, c.Models)

	for list, want := range map[string]string{
		"gpt-4o,,mini":  "LLM_MODELS: model 2 of \"gpt-4o,,mini\" is empty",
		"gpt-4o,gpt-4o": `LLM_MODELS: model "gpt-4o" is named twice`,
		"gpt 4o":        `LLM_MODELS: model 1, "gpt 4o", holds a space or a quote`,
		"gpt-4o,":       "is empty",
	} {
		err := DefaultConfig().ApplyEnv(env(map[string]string{EnvModels: list}))
		require.ErrorContains(t, err, want, list)
	}
	err := DefaultConfig().ApplyEnv(env(map[string]string{EnvBaseURL: "ftp://x", EnvModels: "a"}))
	require.ErrorContains(t, err, "LLM_BASE_URL, LLM_MODELS:")
	require.ErrorContains(t, err, "base_url: must be an absolute http(s) URL")
}

// TestRedactURL: what logs, messages and traces show of a base URL keeps
// the endpoint and loses every place a key can hide.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "https://api.example.com/v1", "https://api.example.com/v1"},
		{"user and password", "https://key-user:sk-in-password@api.example.com/v1", "https://api.example.com/v1"},
		{"query and fragment", "https://gw.example.com/v1?api-key=sk-in-query#frag", "https://gw.example.com/v1"},
		{"path parameter", "http://127.0.0.1:8000/v1;key=abc123", "http://127.0.0.1:8000/v1"},
		{"key in the path", "https://gw.example.com/k/sk-proj-4fQ9x2LmZ7/v1", "https://gw.example.com/k/[redacted]/v1"},
		{"token-like segment", "https://gw.example.com/AbCdEf0123456789GhIj/v1", "https://gw.example.com/[redacted]/v1"},
		{"model name kept", "https://x.openai.azure.com/openai/deployments/Meta-Llama-3.1-70B-Instruct", "https://x.openai.azure.com/openai/deployments/Meta-Llama-3.1-70B-Instruct"},
		{"ipv6", "http://[::1]:8000/v1", "http://[::1]:8000/v1"},
		{"no scheme, a key as user", "sk-abc123456@api.example.com/v1", "<not an http(s) URL, not shown>"},
		{"no scheme, user and password", "user:sk-secret@api.example.com", "<not an http(s) URL, not shown>"},
		{"relative path shown", "/v1", "/v1"},
		{"unparsable", "https://user:sk-x@host:port\x7f/v1", "<not an http(s) URL, not shown>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RedactURL(tc.in); got != tc.want {
				t.Fatalf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestBadBaseURLIsNotEchoed: a base URL the policy refuses is named, but
// what may be a key inside it is not shown.
func TestBadBaseURLIsNotEchoed(t *testing.T) {
	c := DefaultConfig()
	err := c.ApplyEnv(func(k string) string {
		return map[string]string{EnvBaseURL: "sk-live-9aF3kQ@api.example.com/v1"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "base_url: must be an absolute http(s) URL") {
		t.Fatalf("want the base_url refused, got %v", err)
	}
	if strings.Contains(err.Error(), "sk-live-9aF3kQ") {
		t.Fatalf("the error shows the key: %v", err)
	}
}

// TestWindowAssumed: a model named only in LLM_MODELS, or a models entry
// that leaves context_window out, has the default policy's window marked
// as assumed (the worker learns it from the server); a window the file
// writes, for the model or in model_defaults, is not.
func TestWindowAssumed(t *testing.T) {
	c := DefaultConfig()
	require.True(t, c.ModelDefaults.WindowAssumed)
	for _, m := range c.Models {
		require.False(t, m.WindowAssumed, "%s: the default policy names its window", m.Name)
	}
	require.NoError(t, c.ApplyEnv(env(map[string]string{EnvBaseURL: "http://127.0.0.1:11434/v1", EnvModels: "tiny,qwen-14b"})))
	require.True(t, c.Models[0].WindowAssumed, "tiny: only named in LLM_MODELS")
	require.Equal(t, c.ModelDefaults.ContextWindow, c.Models[0].ContextWindow)
	require.False(t, c.Models[1].WindowAssumed, "qwen-14b kept the default policy's window")

	c, err := ParseConfig([]byte(`models:
  - {name: a, base_url: "http://h/v1"}
  - {name: b, base_url: "http://h/v1", context_window: 2048}
`), "p.yaml")
	require.NoError(t, err)
	require.True(t, c.Models[0].WindowAssumed)
	require.False(t, c.Models[1].WindowAssumed)
	require.Equal(t, 2048, c.Models[1].ContextWindow)

	c, err = ParseConfig([]byte(`model_defaults: {context_window: 16384}
models:
  - {name: a, base_url: "http://h/v1"}
`), "p.yaml")
	require.NoError(t, err)
	require.False(t, c.ModelDefaults.WindowAssumed)
	require.False(t, c.Models[0].WindowAssumed, "model_defaults set the window")
	c.UseModels([]string{"a", "z"})
	require.False(t, c.Models[1].WindowAssumed, "a new name starts from the file's model_defaults")
}
