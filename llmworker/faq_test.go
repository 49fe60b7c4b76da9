package llmworker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationTheLibraryNeverGivesARealEndpointTheExampleFAQ:
// llmworker.New used as a library, with a policy that names no faq.file,
// keeps the embedded example FAQ (a made-up shop) only while every model
// goes to the simulator, as the worker binary does: behind a server that
// lists its models as a provider would, a failed call gets a rule's card
// or the placeholder, never the shop's invented delivery policy. New asks
// no endpoint anything (no network I/O in a constructor): Start does.
func TestIntegrationTheLibraryNeverGivesARealEndpointTheExampleFAQ(t *testing.T) {
	sim := rig.Sim(t, llmsim.Options{})
	sc, err := llmsim.BuiltinScenario("class-service_unavailable") // every call falls back at once
	require.NoError(t, err)
	require.NoError(t, sim.SetScenario(sc))
	target, err := url.Parse(sim.BaseURL)
	require.NoError(t, err)
	// front is the simulator behind a proxy that counts the requests for
	// its models and, as provider, lists them as a provider's own.
	front := func(provider bool) (string, *atomic.Int32) {
		var asked atomic.Int32
		proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" {
				asked.Add(1)
				if provider {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"qwen-72b","object":"model","owned_by":"acme"},{"id":"qwen-14b","object":"model","owned_by":"acme"},{"id":"llama-8b","object":"model","owned_by":"acme"}]}`)
					return
				}
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(ts.Close)
		return ts.URL + "/v1", &asked
	}
	for _, c := range []struct {
		name     string
		provider bool
		want     []workflows.Source
	}{
		{"the simulator", false, []workflows.Source{workflows.SourceFAQ}},
		{"a provider", true, []workflows.Source{workflows.SourceRule, workflows.SourcePlaceholder}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, asked := front(c.provider)
			s := rig.New(t, rig.Options{Shared: &shared, Endpoint: base, NoWorker: true})
			require.True(t, s.Config.FAQ.Example(), "the policy names a faq.file")
			w, err := llmworker.New(s.Client, llmworker.Options{Config: s.Config, TaskQueue: s.TaskQueue})
			require.NoError(t, err)
			require.Zero(t, asked.Load(), "New asked the endpoint for its models")
			require.NoError(t, w.Start())
			t.Cleanup(w.Stop)
			res := s.Call(question("Where is my order? I want to track my package."))
			require.Equal(t, []string{"qwen-72b:service_unavailable:fallback"}, res.Decisions())
			require.Contains(t, c.want, res.Source, "fallback %q", res.Content)
		})
	}
}
