package activities

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestSlowUpstreamIsWaitedForWhenRetriesFail: an upstream whose first
// token comes after 600 ms, past the model's 200 ms first_token_timeout.
// Normally the attempt is cut there (read_timeout: prune and retry, or
// switch). Once retries after read_timeout fail too often across the
// process (the class breaker is open), or the endpoint's retry budget is
// spent, the step after a cut would be the FAQ: the attempt then keeps
// its request open within its timeout, and the slow model's answer
// reaches the caller.
func TestSlowUpstreamIsWaitedForWhenRetriesFail(t *testing.T) {
	reply := sse{headerDelay: 600 * time.Millisecond, done: true,
		events: []sseEvent{{data: delta("Your parcel ")}, {data: delta("ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	srv := httptest.NewServer(http.HandlerFunc(reply.serve))
	defer srv.Close()
	for _, why := range []string{"", "retries fail", "budget spent"} {
		retriesFail := why != ""
		cfg := config.DefaultConfig()
		for i := range cfg.Models {
			cfg.Models[i].BaseURL = srv.URL + "/v1"
			cfg.Models[i].FirstTokenTimeout = config.Duration(200 * time.Millisecond)
		}
		a, err := New(Options{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		switch why {
		case "budget spent": // every model is on srv's endpoint
			for a.budgets.For(cfg.Models[0].Endpoint()).TryRetry(time.Now()) {
			}
		case "retries fail":
			for range 2 * cfg.Breaker.ClassMinRetries {
				a.classes.Record(failure.ReadTimeout, time.Now(), false)
			}
			if a.classes.Allow(failure.ReadTimeout, time.Now()) {
				t.Fatal("the class breaker did not open for read_timeout")
			}
		}
		v, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 3*time.Second)
		if !retriesFail {
			if err == nil {
				t.Fatal("a first token past first_token_timeout was waited for while retries work")
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: the slow answer was cut: %v", why, err)
		}
		var out CallOutcome
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		if out.Content != "Your parcel ships today." {
			t.Errorf("answer %q, want the slow model's", out.Content)
		}
	}
}
