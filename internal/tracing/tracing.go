// Package tracing turns on OpenTelemetry tracing for the worker and the
// front door when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and leaves it off otherwise
// (docs/operating.md "Tracing"): spans go over OTLP/HTTP to a collector or a trace
// viewer, and the Temporal client carries the trace from the front door's
// request through the workflow and its activities to the upstream request.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/durable-llm/durable-llm/policies/config"
	"go.opentelemetry.io/otel/attribute"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// On reports whether the environment asks for tracing.
func On(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider, exporting over OTLP/HTTP as
// the standard OTEL_* variables say, for service (durable-llm-worker,
// durable-llm-frontdoor). It returns the provider's shutdown, which
// flushes the spans not yet sent.
func Setup(ctx context.Context, service string) (func(context.Context) error, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (OTEL_EXPORTER_OTLP_ENDPOINT): %w", err)
	}
	return Use(sdktrace.NewBatchSpanProcessor(exp), service), nil
}

// Use installs a global tracer provider that hands its spans to sp (a
// test's span recorder, or Setup's exporter) and the W3C propagators; it
// returns the provider's shutdown.
func Use(sp sdktrace.SpanProcessor, service string) func(context.Context) error {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(redactURLs{}),
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))),
	)
	otel.SetTracerProvider(tp)
	// Trace context only: a caller's baggage is not carried into the
	// workflow.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown
}

// redactURLs rewrites the URL attributes of every span as it starts, so
// that a key in a base URL's user or query part never reaches a span
// (the HTTP instrumentation drops only a password).
type redactURLs struct{}

func (redactURLs) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	for _, kv := range s.Attributes() {
		if kv.Key == "url.full" || kv.Key == "http.url" {
			s.SetAttributes(attribute.String(string(kv.Key), config.RedactURL(kv.Value.AsString())))
		}
	}
}
func (redactURLs) OnEnd(sdktrace.ReadOnlySpan)      {}
func (redactURLs) Shutdown(context.Context) error   { return nil }
func (redactURLs) ForceFlush(context.Context) error { return nil }

// Interceptor is the Temporal client interceptor that puts the workflow
// and its activities in the caller's trace (create it after Use or Setup).
func Interceptor() (interceptor.ClientInterceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
	if err != nil {
		return nil, fmt.Errorf("tracing: Temporal interceptor: %w", err)
	}
	return i, nil
}

// Handler wraps the front door: a server span per request, which the
// calls it starts carry into their workflows.
func Handler(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "frontdoor", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		path := r.URL.Path
		if strings.HasPrefix(path, "/v1/calls/") {
			path = "/v1/calls/{id}" // one name for every call
		}
		return r.Method + " " + path
	}))
}
