package llmworker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
	"unicode"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// Metrics is the worker's Prometheus endpoint: the Temporal SDK's metrics
// (through the SDK's tally contrib handler) and durable-llm's own, in one
// registry served at /metrics.
type Metrics struct {
	registry *prom.Registry
	scope    tally.Scope
	closer   func()
	server   *http.Server
	acts     *promActivityMetrics
	// Addr is the address the endpoint listens on (empty when off).
	Addr string
}

// sanitize keeps metric names and label names within Prometheus' rules (as
// the SDK's PrometheusSanitizeOptions do) but leaves label values alone:
// Prometheus allows any UTF-8 there, and an operator filters on the task
// queue "llm-calls" or the model "qwen-72b" as spelled everywhere else, not
// on "llm_calls".
var sanitize = tally.SanitizeOptions{
	NameCharacters:       sdktally.PrometheusSanitizeOptions.NameCharacters,
	KeyCharacters:        sdktally.PrometheusSanitizeOptions.KeyCharacters,
	ValueCharacters:      tally.ValidCharacters{Ranges: []tally.SanitizeRange{{0, unicode.MaxRune}}},
	ReplacementCharacter: tally.DefaultReplacementCharacter,
}

// NewMetrics builds the registry and the SDK handler without serving it.
func NewMetrics(logger *slog.Logger) (*Metrics, error) {
	reg := prom.NewRegistry()
	// Go runtime and process metrics: go_goroutines, process_resident_memory_bytes, …
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter, err := tallyprom.Configuration{TimerType: "histogram"}.NewReporter(tallyprom.ConfigurationOptions{
		Registry: reg,
		OnError: func(err error) {
			logger.Warn("metric registration failed", "error", err)
		},
	})
	if err != nil {
		return nil, err
	}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, time.Second)
	m := &Metrics{
		registry: reg,
		scope:    sdktally.NewPrometheusNamingScope(scope),
		closer:   func() { _ = closer.Close() },
		acts:     newPromActivityMetrics(reg),
	}
	return m, nil
}

// StartMetrics builds the metrics and serves them on addr at /metrics
// (addr "" builds them without serving), with Go's profiles at /debug/pprof/
// when WORKER_PPROF=1.
func StartMetrics(addr string, logger *slog.Logger) (*Metrics, error) {
	m, err := NewMetrics(logger)
	if err != nil || addr == "" {
		return m, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.HTTPHandler())
	if os.Getenv("WORKER_PPROF") == "1" {
		// Go's profiles, for a memory or CPU investigation: opt-in, as
		// they show code paths and can be expensive to take.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	}
	m.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	m.Addr = ln.Addr().String()
	go func() {
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics endpoint stopped", "error", err)
		}
	}()
	return m, nil
}

// HTTPHandler serves the registry in the Prometheus text format.
func (m *Metrics) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Handler is the Temporal SDK metrics handler (client.Options.MetricsHandler).
// Workflow code counts calls through it (llm_calls_total), replay-safely.
func (m *Metrics) Handler() client.MetricsHandler { return sdktally.NewMetricsHandler(m.scope) }

// Activities is the activities' metrics recorder.
func (m *Metrics) Activities() activities.Metrics { return m.acts }

// Init publishes the state a fresh worker starts in, so dashboards and
// alerts see every series from the first scrape: each model's breaker
// closed (0) and the whole retry budget of an empty window.
func (m *Metrics) Init(cfg *config.Config) {
	for _, model := range cfg.Models {
		m.acts.BreakerState(model.Name, guard.BreakerClosed)
	}
	m.acts.Budget(guard.NewRetryBudget(cfg.Budget).Remaining(time.Now()))
}

// Close stops the endpoint and flushes the SDK scope.
func (m *Metrics) Close() {
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = m.server.Shutdown(ctx)
		cancel()
	}
	m.closer()
}

type promActivityMetrics struct {
	attempts  *prom.CounterVec
	latency   *prom.HistogramVec
	refusals  prom.Counter
	remaining *prom.GaugeVec // no labels: absent until known, never a false 0
	breaker   *prom.GaugeVec
	keys      *prom.CounterVec
	hedges    *prom.CounterVec
	diagnoses *prom.CounterVec
}

func newPromActivityMetrics(reg prom.Registerer) *promActivityMetrics {
	m := &promActivityMetrics{
		attempts: prom.NewCounterVec(prom.CounterOpts{
			Name: "llm_attempts_total",
			Help: "Upstream attempts by model and failure class (class=\"ok\" for answers, \"breaker_open\" for models skipped without a request).",
		}, []string{"model", "class"}),
		latency: prom.NewHistogramVec(prom.HistogramOpts{
			Name:    "llm_upstream_latency_seconds",
			Help:    "Duration of upstream attempts by model and outcome.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64},
		}, []string{"model", "outcome"}),
		refusals: prom.NewCounter(prom.CounterOpts{
			Name: "llm_retry_budget_refusals_total",
			Help: "Retries the per-process retry budget refused.",
		}),
		remaining: prom.NewGaugeVec(prom.GaugeOpts{
			Name: "llm_retry_budget_remaining",
			Help: "Retries the per-process retry budget still allows in its sliding window, as of the last retry decision.",
		}, nil),
		breaker: prom.NewGaugeVec(prom.GaugeOpts{
			Name: "llm_breaker_state",
			Help: "Circuit breaker state per model: 0 closed, 1 half-open, 2 open.",
		}, []string{"model"}),
		keys: prom.NewCounterVec(prom.CounterOpts{
			Name: "llm_key_attempts_total",
			Help: "Upstream attempts on models with a key pool, by model, key id (the environment variable that holds it, never the key) and class.",
		}, []string{"model", "key", "class"}),
	}
	m.hedges = prom.NewCounterVec(prom.CounterOpts{
		Name: "llm_hedges_total",
		Help: "Hedges of first attempts by hedge model and outcome: started, or not started for the hedge budget (budget), the model's guards (refused) or a rate-limit hold (held).",
	}, []string{"model", "outcome"})
	m.diagnoses = prom.NewCounterVec(prom.CounterOpts{
		Name: "llm_diagnoses_total",
		Help: "Diagnoses of error bodies no classifier rule recognised, by the class the model named (\"\" for none) and outcome: named, invalid, error, refused.",
	}, []string{"class", "outcome"})
	reg.MustRegister(m.attempts, m.latency, m.refusals, m.remaining, m.breaker, m.keys, m.hedges, m.diagnoses)
	return m
}

// Diagnosis implements activities.DiagnosisMetrics.
func (m *promActivityMetrics) Diagnosis(class, outcome string) {
	m.diagnoses.WithLabelValues(class, outcome).Inc()
}

// Hedge implements activities.HedgeMetrics.
func (m *promActivityMetrics) Hedge(model, outcome string) {
	m.hedges.WithLabelValues(model, outcome).Inc()
}

// KeyAttempt implements activities.KeyMetrics.
func (m *promActivityMetrics) KeyAttempt(model, key, class string) {
	m.keys.WithLabelValues(model, key, class).Inc()
}

func (m *promActivityMetrics) Attempt(model, class string, d time.Duration) {
	m.attempts.WithLabelValues(model, class).Inc()
	if class == string(failure.BreakerOpen) {
		return
	}
	outcome := "ok"
	if class != "ok" {
		outcome = "error"
	}
	m.latency.WithLabelValues(model, outcome).Observe(d.Seconds())
}

func (m *promActivityMetrics) BudgetRefused() { m.refusals.Inc() }
func (m *promActivityMetrics) Budget(remaining int) {
	m.remaining.WithLabelValues().Set(float64(remaining))
}

func (m *promActivityMetrics) BreakerState(model string, s guard.BreakerState) {
	v := 0.0
	switch s {
	case guard.BreakerHalfOpen:
		v = 1
	case guard.BreakerOpen:
		v = 2
	}
	m.breaker.WithLabelValues(model).Set(v)
}
