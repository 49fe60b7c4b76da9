package llmworker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// TestARealEndpointNeverGetsTheExampleFAQ: a worker whose policy names no
// faq.file keeps the example FAQ while its models go to the simulator, and
// turns the FAQ off when a model goes to any other server (one that lists
// its models as a provider would, or one that cannot be asked): a failed
// call then gets a rule's card or the placeholder, never the made-up
// shop's delivery policy. Until Start decides (decide), the FAQ is off.
func TestARealEndpointNeverGetsTheExampleFAQ(t *testing.T) {
	sim, err := llmsim.NewServer(llmsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"qwen-72b","object":"model","owned_by":"acme"},{"id":"qwen-14b","object":"model","owned_by":"acme"},{"id":"llama-8b","object":"model","owned_by":"acme"}]}`)
	}))
	defer provider.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	const question = "Where is my order? I want to track my package."
	fallback := func(t *testing.T, a *activities.Activities) string {
		req := request.Request{Scenario: "support", Messages: []request.Message{{Role: request.RoleUser, Content: question}}}
		ans, err := a.Fallback(context.Background(), activities.FallbackInput{Request: req, Reason: "every model failed"})
		if err != nil {
			t.Fatal(err)
		}
		return ans.Source
	}
	for _, c := range []struct {
		name    string
		base    string
		faqFile string
		want    string // the fallback's source
	}{
		{"the simulator", sim.BaseURL, "", "faq"},
		{"a provider", provider.URL + "/v1", "", "placeholder"},
		{"a server that cannot be asked", gone.URL + "/v1", "", "placeholder"},
		{"the FAQ turned off, on the simulator", sim.BaseURL, config.FAQOff, "placeholder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.OverrideEndpoint(c.base, "")
			cfg.FAQ.File = c.faqFile
			a, err := activities.New(activities.Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			if e := holdExampleFAQ(a, cfg, os.Getenv, nil); e != nil {
				if got := fallback(t, a); got != "placeholder" {
					t.Fatalf("before Start decided: fallback from %s, want placeholder", got)
				}
				e.decide(a, slog.New(slog.DiscardHandler))
			}
			if got := fallback(t, a); got != c.want {
				t.Fatalf("fallback from %s, want %s", got, c.want)
			}
		})
	}
}
