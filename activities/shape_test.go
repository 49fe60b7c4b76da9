package activities

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestOwnShapeTimeoutsSpareTheBreaker: an upstream that sends no first
// token in time fails both attempts with read_timeout; the one that asked
// for more than a quarter of the model's context window as max_tokens
// says more about the request than about the model and leaves the
// breaker alone (a tenant's huge requests would otherwise open it for
// everyone), while the ordinary one counts and, with a breaker that opens
// at the first failure, opens it.
func TestOwnShapeTimeoutsSpareTheBreaker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(sse{headerDelay: 2 * time.Second}.serve))
	defer srv.Close()
	cfg := config.DefaultConfig()
	for i := range cfg.Models {
		cfg.Models[i].BaseURL = srv.URL + "/v1"
		cfg.Models[i].FirstTokenTimeout = config.Duration(200 * time.Millisecond)
	}
	cfg.Breaker.ConsecutiveFailures = 1
	brk := guard.NewBreakerRegistry(cfg.Breaker, nil)
	a, err := New(Options{Config: cfg, Breakers: brk})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Models[0] // qwen-72b, 32768 tokens
	attempt := func(maxTokens int) {
		t.Helper()
		if _, err := callAttempt(t, a, "Tell me everything about my order.", callstate.Shape{MaxTokens: maxTokens}, time.Second); err == nil {
			t.Fatal("an upstream with no first token answered")
		}
	}
	attempt(16000) // over 32768 / 4
	if st := brk.State(m.Name, time.Now()); st != guard.BreakerClosed {
		t.Fatalf("a timeout of a 16000-token request counted against %s: breaker %s", m.Name, st)
	}
	attempt(500)
	if st := brk.State(m.Name, time.Now()); st != guard.BreakerOpen {
		t.Fatalf("a timeout of an ordinary request did not count against %s: breaker %s", m.Name, st)
	}
}
