package llmsim_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/llmsim"
)

// start runs a simulator for the test. Without a scenario the models are
// llmsim.InstantModels (answers at once): tests of the generation time
// use startRealistic or set ttft and tokens_per_second.
func start(t *testing.T, opts llmsim.Options) *llmsim.Server {
	t.Helper()
	if opts.Scenario == nil {
		opts.Scenario = &llmsim.Scenario{Models: llmsim.InstantModels()}
	}
	return startRealistic(t, opts)
}

// startRealistic runs a simulator on opts as given: without a scenario,
// the default models with their default generation time.
func startRealistic(t *testing.T, opts llmsim.Options) *llmsim.Server {
	t.Helper()
	s, err := llmsim.NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// startScenario runs a simulator on a YAML scenario; one without models
// gets llmsim.InstantModels.
func startScenario(t *testing.T, yaml string, opts llmsim.Options) *llmsim.Server {
	t.Helper()
	sc, err := llmsim.ParseScenario([]byte(yaml), t.Name()+".yaml")
	if err != nil {
		t.Fatalf("ParseScenario: %v", err)
	}
	if len(sc.Models) == 0 {
		sc.Models = llmsim.InstantModels()
	}
	opts.Scenario = sc
	return start(t, opts)
}

// capture is an http.RoundTripper that keeps the last response's status
// and headers, as the project's activity does by wrapping the client.
type capture struct {
	mu     sync.Mutex
	base   http.RoundTripper
	status int
	header http.Header
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		c.status, c.header = resp.StatusCode, resp.Header.Clone()
		c.mu.Unlock()
	}
	return resp, err
}

func (c *capture) last() (int, http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header
}

// goClient returns a go-openai client on s with its own transport (fresh
// connections) and the capture of its last response.
func goClient(s *llmsim.Server, timeout time.Duration, headers ...string) (*openai.Client, *capture) {
	c := &capture{base: &http.Transport{}}
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = s.BaseURL
	var rt http.RoundTripper = c
	if len(headers) > 0 {
		rt = headerRT{rt, headers}
	}
	cfg.HTTPClient = &http.Client{Transport: rt, Timeout: timeout}
	return openai.NewClientWithConfig(cfg), c
}

// headerRT adds fixed headers (key, value pairs).
type headerRT struct {
	base http.RoundTripper
	kv   []string
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for i := 0; i+1 < len(h.kv); i += 2 {
		r.Header.Set(h.kv[i], h.kv[i+1])
	}
	return h.base.RoundTrip(r)
}

func ask(model, q string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{Model: model, Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "You are a helpful assistant."},
		{Role: openai.ChatMessageRoleUser, Content: q},
	}}
}

// eventually polls cond until it holds or 3 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClock is a settable clock for Options.Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
