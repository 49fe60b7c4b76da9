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
