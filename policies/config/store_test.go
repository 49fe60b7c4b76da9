package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeployments: a model may list deployments instead of a base URL and
// keys; their names are the key ids, each attempt takes its deployment's
// URL and key; bad lists are refused with the field, never echoing a
// pasted key.
func TestDeployments(t *testing.T) {
	c, err := ParseConfig([]byte(`models:
  - name: gpt
    deployments:
      - {name: eastus, base_url: https://east.example.com/v1, api_key_env: EAST_KEY}
      - {name: westus, base_url: https://west.example.com/v1, api_key_env: WEST_KEY}
`), "ok.yaml")
	require.NoError(t, err)
	m := c.Models[0]
	require.True(t, m.Pooled())
	require.Equal(t, []string{"eastus", "westus"}, m.Keys())
	w := m.WithKey("westus")
	require.Equal(t, "https://west.example.com/v1", w.BaseURL)
	require.Equal(t, "WEST_KEY", w.APIKeyEnv)
	require.Equal(t, "https://west.example.com:443", w.Endpoint())
	require.Equal(t, "https://east.example.com:443", m.Endpoint(), "the model as a whole is its first deployment")

	for _, b := range []struct{ yaml, want string }{
		{"models: [{name: gpt, deployments: [{name: a, base_url: nope}]}]", `models[0].deployments[0].base_url: must be an absolute http(s) URL`},
		{"models: [{name: gpt, deployments: [{name: 'a b', base_url: 'http://x/v1'}]}]", `models[0].deployments[0].name: must be a short id`},
		{"models: [{name: gpt, deployments: [{name: a, base_url: 'http://x/v1'}, {name: a, base_url: 'http://y/v1'}]}]", `models[0].deployments[1].name: names "a" as deployments[0] does`},
		{"models: [{name: gpt, api_key_envs: [A, B], deployments: [{name: a, base_url: 'http://x/v1'}]}]", `models[0].deployments: a model lists deployments (each with its key) or api_key_envs, not both`},
		{"models: [{name: gpt, deployments: [{name: a, base_url: 'http://x/v1', api_key_env: sk-live-123}]}]", `models[0].deployments[0].api_key_env: must be the NAME of the environment variable holding the key (letters, digits, _), not the key itself, got a 11-character value (not shown)`},
	} {
		_, err := ParseConfig([]byte(b.yaml), "bad.yaml")
		require.ErrorContains(t, err, b.want, b.yaml)
		require.NotContains(t, err.Error(), "sk-live-123")
	}

	// LLM_BASE_URL points every model at one endpoint: deployments too.
	c.OverrideEndpoint("http://127.0.0.1:9/v1", "")
	require.False(t, c.Models[0].Pooled())
	require.NoError(t, c.Validate())
}

// TestStoreConfig: the store is memory or postgres, whose URL comes from a
// named environment variable; a URL pasted in its place is refused
// without being echoed.
func TestStoreConfig(t *testing.T) {
	c, err := ParseConfig([]byte("store: {kind: postgres}"), "ok.yaml")
	require.NoError(t, err)
	require.True(t, c.Store.Shared())
	require.Equal(t, "LLM_STORE_DSN", c.Store.DSNEnv)
	for _, b := range []struct{ yaml, want string }{
		{"store: {kind: redis}", `store.kind: must be "memory" or "postgres", got "redis"`},
		{"store: {kind: postgres, dsn_env: 'postgres://u:hunter2@db/x'}", "store.dsn_env: must be the NAME of the environment variable that holds the PostgreSQL URL"},
		{"store: {kind: postgres, usage_flush: 0s}", "store.usage_flush: must be a positive duration"},
	} {
		_, err := ParseConfig([]byte(b.yaml), "bad.yaml")
		require.ErrorContains(t, err, b.want, b.yaml)
		require.NotContains(t, err.Error(), "hunter2")
	}
}
