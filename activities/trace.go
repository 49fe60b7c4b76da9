package activities

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// tracerName names this package's spans.
const tracerName = "github.com/durable-llm/durable-llm/activities"

// chatSpan starts the span of one upstream attempt, under the attempt's
// activity span: OpenTelemetry's GenAI attributes (gen_ai.*) and ours
// (llm.*), never prompt or answer text. With tracing off there is none
// (nil).
func (a *Activities) chatSpan(ctx context.Context, in CallInput) (context.Context, trace.Span) {
	if !a.tracing {
		return ctx, nil
	}
	return otel.Tracer(tracerName).Start(ctx, "chat "+in.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "openai"), // the OpenAI-compatible API
			attribute.String("gen_ai.request.model", in.Model),
			attribute.Int("llm.attempt", in.Attempt),
			attribute.Bool("llm.hedge", in.Hedge),
			attribute.String("llm.key", in.Key),
		))
}

// endChatSpan records the attempt's outcome on its span and ends it.
func endChatSpan(span trace.Span, in CallInput, out CallOutcome, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(
		attribute.String("gen_ai.response.model", in.Model),
		attribute.Int("gen_ai.usage.input_tokens", out.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", out.CompletionTokens),
		attribute.Int("http.response.status_code", out.Status),
	)
	if out.FinishReason != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{out.FinishReason}))
	}
	class := out.Class
	if err != nil && class == failure.None {
		class = failure.ServerError
	}
	if err != nil {
		span.SetAttributes(attribute.String("llm.failure_class", string(class)), attribute.String("error.type", string(class)))
		span.SetStatus(codes.Error, string(class))
	}
	span.End()
}

// tracedTransport adds the HTTP client span under the attempt's span.
func tracedTransport(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return r.Method + " " + r.URL.Path
	}),
		// Nothing of the trace goes to a third-party provider.
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()))
}

// noteDecision puts the decision taken after an attempt on the span of
// the local activity that took it (none with tracing off).
func noteDecision(ctx context.Context, class failure.Class, decision, next string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("llm.failure_class", string(class)), attribute.String("llm.decision", decision),
		attribute.String("llm.next_model", next))
}
