package activities

import (
	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/config"
)

// apiKey reads a model's API key from the environment variable it names,
// here and nowhere else.
func (a *Activities) apiKey(m config.ModelConfig) string {
	if m.APIKeyEnv == "" {
		return ""
	}
	return a.getenv(m.APIKeyEnv)
}

// client returns the go-openai client of a model and its key, built once
// over the process's one HTTP client (httpclient.go).
func (a *Activities) client(m config.ModelConfig) *openai.Client {
	key := a.apiKey(m)
	id := m.BaseURL + "\x00" + m.APIKeyEnv + "\x00" + key
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[id]; ok {
		return c
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = m.BaseURL
	oc.HTTPClient = a.http
	c := openai.NewClientWithConfig(oc)
	a.clients[id] = c
	return c
}
