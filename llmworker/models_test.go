package llmworker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
)

// TestModelCheckNeverEchoesTheKey: a gateway that refuses the key and
// quotes it (whole, or cut) in its error does not put it in the worker's
// start-up warning.
func TestModelCheckNeverEchoesTheKey(t *testing.T) {
	const key = "sk-live-0123456789abcdefghij"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + key + ` (also known as ` + key[:14] + `...)","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	defer srv.Close()
	cfg := config.DefaultConfig()
	cfg.OverrideEndpoint(srv.URL+"/v1", "LLM_API_KEY")
	ends := llmworker.AskModels(context.Background(), cfg, func(k string) string {
		if k == "LLM_API_KEY" {
			return key
		}
		return ""
	}, 5*time.Second)
	if len(ends) == 0 || ends[0].Err == nil {
		t.Fatalf("a refused key gave no error: %+v", ends)
	}
	msg := ends[0].Err.Error()
	if !strings.Contains(msg, "HTTP 401") || !strings.Contains(msg, "Incorrect API key provided") {
		t.Errorf("the warning lost what the gateway said: %s", msg)
	}
	for i := 0; i+8 <= len(key); i++ {
		if strings.Contains(msg, key[i:i+8]) {
			t.Fatalf("the warning shows part of the key (%q): %s", key[i:i+8], msg)
		}
	}
	warnings, _ := llmworker.CheckModels(ends, false)
	for _, w := range warnings {
		if strings.Contains(w, key[:8]) {
			t.Fatalf("a start-up warning shows the key: %s", w)
		}
	}
}

// TestOffers: a ladder name without a tag is offered by an endpoint that
// lists it with Ollama's default tag, and only with that one.
func TestOffers(t *testing.T) {
	for _, c := range []struct {
		name    string
		offered []string
		want    bool
	}{
		{"tiny", []string{"tiny"}, true},
		{"tiny", []string{"other", "tiny:latest"}, true},
		{"tiny:latest", []string{"tiny:latest"}, true},
		{"tiny:latest", []string{"tiny"}, false},
		{"tiny", []string{"tiny:q4"}, false},
		{"tiny", []string{"tiny-eos:latest"}, false},
		{"tiny:q4", []string{"tiny:latest"}, false},
		{"gpt-4o", nil, false},
	} {
		if got := llmworker.Offers(c.offered, c.name); got != c.want {
			t.Errorf("Offers(%q, %q) = %v, want %v", c.offered, c.name, got, c.want)
		}
	}
}

// TestModelCheckAcceptsOllamasLatestTag: LLM_MODELS=tiny passes the
// start-up check against an endpoint that lists "tiny:latest", as Ollama
// does; a name it does not list is still refused.
func TestModelCheckAcceptsOllamasLatestTag(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"tiny:latest","object":"model","created":1,"owned_by":"library"},{"id":"tiny-eos:latest","object":"model","created":1,"owned_by":"library"}]}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		models  string
		missing string
	}{
		{"tiny", ""},
		{"tiny,tiny-eos:latest", ""},
		{"tiny,small", "small"},
	} {
		cfg := config.DefaultConfig()
		env := map[string]string{config.EnvBaseURL: srv.URL + "/v1", config.EnvModels: c.models}
		if err := cfg.ApplyEnv(func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		_, err := llmworker.CheckModels(llmworker.AskModels(context.Background(), cfg, func(string) string { return "" }, 5*time.Second), false)
		switch {
		case c.missing == "" && err != nil:
			t.Errorf("LLM_MODELS=%s: refused: %v", c.models, err)
		case c.missing != "" && (err == nil || !strings.Contains(err.Error(), "does not offer "+c.missing)):
			t.Errorf("LLM_MODELS=%s: want %s refused, got %v", c.models, c.missing, err)
		}
	}
}

// TestModelCheckWarnsOnAnEmptyList: an endpoint whose /v1/models list is
// empty (some gateways list nothing) is a warning, as the worker's help
// says, not a refusal to start; a list that lacks a ladder model is still
// refused.
func TestModelCheckWarnsOnAnEmptyList(t *testing.T) {
	for _, c := range []struct {
		name, body string
		refused    bool
	}{
		{"empty list", `{"object":"list","data":[]}`, false},
		{"null list", `{"object":"list","data":null}`, false},
		{"list without the ladder's model", `{"object":"list","data":[{"id":"other","object":"model"}]}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			cfg := config.DefaultConfig()
			env := map[string]string{config.EnvBaseURL: srv.URL + "/v1", config.EnvModels: "qwen-72b"}
			if err := cfg.ApplyEnv(func(k string) string { return env[k] }); err != nil {
				t.Fatal(err)
			}
			warnings, err := llmworker.CheckModels(llmworker.AskModels(context.Background(), cfg, func(string) string { return "" }, 5*time.Second), false)
			if c.refused != (err != nil) {
				t.Fatalf("refused = %v (%v), want %v", err != nil, err, c.refused)
			}
			if !c.refused && (len(warnings) != 1 || !strings.Contains(warnings[0], "lists no models")) {
				t.Errorf("warnings %q, want one saying the endpoint lists no models", warnings)
			}
		})
	}
}
