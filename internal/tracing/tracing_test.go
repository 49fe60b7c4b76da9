package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/durable-llm/durable-llm/internal/tracing"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// secret is text only the prompt holds: no span may carry it.
const secret = "PARCEL-7731-SECRET"

// TestTraceLinksTheFrontDoorToTheUpstreamRequest: one call through the
// front door makes one trace: the front door's server span, the workflow
// start, the workflow, the attempt's activity, its GenAI span and the
// HTTP request to the upstream, each the parent of the next; the GenAI
// span carries the semantic-convention attributes, and no span holds
// prompt text.
func TestTraceLinksTheFrontDoorToTheUpstreamRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	rec := tracetest.NewSpanRecorder()
	shutdown := tracing.Use(rec, "durable-llm-test")
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	ti, err := tracing.Interceptor()
	require.NoError(t, err)
	srv := shared.Server(t)
	c, err := client.NewClientFromExisting(srv.Client(), client.Options{Interceptors: []interceptor.ClientInterceptor{ti}})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	s := rig.New(t, rig.Options{Client: c, QueuePrefix: "llm-trace-",
		Sim:    llmsim.Options{Scenario: &llmsim.Scenario{Name: "trace", Models: llmsim.InstantModels()}},
		Worker: func(o *llmworker.Options) { o.Tracing = true }})
	h := s.FrontDoor("tok-acme-5e8a1c3f7b9d2e4a6c8f0b1d3e5a7c9f=acme", nil)
	ts := httptest.NewServer(tracing.Handler(h))
	t.Cleanup(ts.Close)

	body := fmt.Sprintf(`{"model":"qwen-72b","messages":[{"role":"user","content":"Where is my parcel %s?"}]}`, secret)
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok-acme-5e8a1c3f7b9d2e4a6c8f0b1d3e5a7c9f")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// The spans end as their work does: the upstream request's first.
	var spans []sdktrace.ReadOnlySpan
	var upstream, server sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		spans = rec.Ended()
		upstream, server = nil, nil
		for _, s := range spans {
			switch {
			case s.SpanKind() == trace.SpanKindClient && s.Name() == "POST /v1/chat/completions":
				upstream = s
			case s.SpanKind() == trace.SpanKindServer && s.Name() == "POST /v1/chat/completions":
				server = s
			}
		}
		return upstream != nil && server != nil
	}, 30*time.Second, 100*time.Millisecond, "the upstream request's and the front door's spans")

	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	var chain []string
	for s := upstream; s != nil; s = byID[s.Parent().SpanID()] {
		require.Equal(t, server.SpanContext().TraceID(), s.SpanContext().TraceID(), "span %q is in another trace", s.Name())
		chain = append(chain, s.Name())
		if s == server {
			break
		}
	}
	t.Logf("upstream request → front door: %s", strings.Join(chain, " ← "))
	require.Equal(t, "POST /v1/chat/completions", chain[len(chain)-1], "the chain does not reach the front door's span: %v", chain)
	for _, want := range []string{"chat qwen-72b", "RunActivity:CallModel", "StartActivity:CallModel", "RunWorkflow:LLMCall", "StartWorkflow:LLMCall"} {
		require.Contains(t, chain, want, "the chain from the upstream request to the front door: %v", chain)
	}

	chat := byID[upstream.Parent().SpanID()]
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range chat.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	require.Equal(t, "chat", attrs["gen_ai.operation.name"].AsString())
	require.Equal(t, "openai", attrs["gen_ai.provider.name"].AsString())
	require.Equal(t, "qwen-72b", attrs["gen_ai.request.model"].AsString())
	require.Equal(t, "qwen-72b", attrs["gen_ai.response.model"].AsString())
	require.Positive(t, attrs["gen_ai.usage.input_tokens"].AsInt64())
	require.Positive(t, attrs["gen_ai.usage.output_tokens"].AsInt64())
	require.Equal(t, []string{"stop"}, attrs["gen_ai.response.finish_reasons"].AsStringSlice())
	require.EqualValues(t, 1, attrs["llm.attempt"].AsInt64())

	for _, s := range spans {
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.Emit(), secret, "span %q attribute %s holds prompt text", s.Name(), kv.Key)
		}
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				require.NotContains(t, kv.Value.Emit(), secret, "span %q event %q holds prompt text", s.Name(), e.Name)
			}
		}
	}
}

// TestURLsAreRedacted: a key in a URL's user or query part never reaches
// a span.
func TestURLsAreRedacted(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	shutdown := tracing.Use(rec, "durable-llm-test")
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	_, span := otel.Tracer("test").Start(context.Background(), "GET", trace.WithAttributes(
		attribute.String("url.full", "https://key-user:sk-in-password@api.example.com/v1/models?api-key=sk-in-query")))
	span.End()
	got := rec.Ended()[0].Attributes()
	require.Len(t, got, 1)
	require.Equal(t, "https://api.example.com/v1/models", got[0].Value.AsString())
}
