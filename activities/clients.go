package activities

import (
	"context"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/config"
)

// upstream is a model's server as an attempt calls it, in the chat
// completions shape whatever its wire: go-openai's types are the
// activities' one language for a request and its answer.
type upstream interface {
	// create sends req and waits for the whole answer.
	create(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error)
	// openStream sends req streamed; its error is the reply's when the
	// server refused it before the stream began.
	openStream(ctx context.Context, req openai.ChatCompletionRequest) (chunkStream, error)
}

// chunkStream is a streamed answer, chunk by chunk, in the chat
// completions shape; Recv ends with io.EOF.
type chunkStream interface {
	Recv() (openai.ChatCompletionStreamResponse, error)
	Close() error
}

// openaiUpstream is an OpenAI-compatible server, through go-openai.
type openaiUpstream struct{ c *openai.Client }

func (u openaiUpstream) create(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	return u.c.CreateChatCompletion(ctx, req)
}

func (u openaiUpstream) openStream(ctx context.Context, req openai.ChatCompletionRequest) (chunkStream, error) {
	return u.c.CreateChatCompletionStream(ctx, req)
}

// apiKey reads a model's API key from the environment variable it names,
// here and nowhere else.
func (a *Activities) apiKey(m config.ModelConfig) string {
	if m.APIKeyEnv == "" {
		return ""
	}
	return a.getenv(m.APIKeyEnv)
}

// client returns the upstream client of a model and its key, by the
// model's API, built once over the process's one HTTP client
// (httpclient.go), which records every reply for the classifier.
func (a *Activities) client(m config.ModelConfig) upstream {
	key := a.apiKey(m)
	id := string(m.Wire()) + "\x00" + m.BaseURL + "\x00" + m.APIKeyEnv + "\x00" + key
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[id]; ok {
		return c
	}
	c := newUpstream(m, key, a.http)
	a.clients[id] = c
	return c
}

// newUpstream is the client of model m (one base URL) with key, over hc.
func newUpstream(m config.ModelConfig, key string, hc *http.Client) upstream {
	if m.Wire() == config.APIAnthropic {
		opts := []option.RequestOption{
			// Only what the policy says: no key, base URL or profile
			// read from the environment behind its back, and no retries
			// of the SDK's own (the call decides every resend).
			option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.BaseURL),
			option.WithHTTPClient(hc), option.WithMaxRetries(0),
		}
		if key != "" {
			opts = append(opts, option.WithAPIKey(key))
		}
		return anthropicUpstream{c: anthropic.NewClient(opts...)}
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = m.BaseURL
	oc.HTTPClient = hc
	return openaiUpstream{c: openai.NewClientWithConfig(oc)}
}

// Ping sends model m (one base URL, as WithKey gives it) one request for
// one token on its API, with key: the doctor's check that a rung answers.
// An error reply is an *openai.APIError whatever the API.
func Ping(ctx context.Context, m config.ModelConfig, key string) (openai.ChatCompletionResponse, error) {
	return newUpstream(m, key, http.DefaultClient).create(ctx, openai.ChatCompletionRequest{
		Model: m.Name, MaxTokens: 1, Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "ping"}},
	})
}
