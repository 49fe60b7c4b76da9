package llmworker_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zaptest"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// scrape reads a /metrics endpoint and parses the Prometheus text format.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "the /metrics text does not parse:\n%s", body)
	return fams
}

// sample is one series: labels and value (a histogram's value is its count).
type sample struct {
	labels map[string]string
	value  float64
}

func samples(f *dto.MetricFamily) []sample {
	var out []sample
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		s := sample{labels: map[string]string{}}
		for _, l := range m.GetLabel() {
			s.labels[l.GetName()] = l.GetValue()
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			s.value = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			s.value = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			s.value = float64(m.GetHistogram().GetSampleCount())
		}
		out = append(out, s)
	}
	return out
}

// sum adds the series of a family whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	total, found := 0.0, false
	for _, s := range samples(fams[name]) {
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			total += s.value
			found = true
		}
	}
	return total, found
}

// TestIntegrationMetricsAfterRealCalls runs real calls through a worker that
// serves its metrics, then reads /metrics as Prometheus would: the SDK's
// metrics and ours, with Prometheus names, counting what the calls did.
func TestIntegrationMetricsAfterRealCalls(t *testing.T) {
	srv := shared.Server(t)
	m, err := llmworker.StartMetrics("127.0.0.1:0", slog.New(zapslog.NewHandler(zaptest.NewLogger(t).Core())))
	require.NoError(t, err)
	t.Cleanup(m.Close)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), MetricsHandler: m.Handler(), Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s := rig.New(t, rig.Options{Client: c, QueuePrefix: "llm-metrics-", NoWorker: true, Policy: func(cfg *config.Config) {
		cfg.Budget.Floor, cfg.Budget.Ratio = 1, 0.01 // one retry, then the budget refuses
		cfg.Breaker.ConsecutiveFailures = 2          // qwen-72b opens after the second failure
	}})
	m.Init(s.Config)
	tq := s.TaskQueue

	// Before any call: every model's breaker is closed and the whole
	// budget is left (not an alarming 0).
	fams := scrape(t, m.Addr)
	for _, model := range []string{"qwen-72b", "qwen-14b", "llama-8b"} {
		v, ok := sum(fams, "llm_breaker_state", map[string]string{"model": model})
		require.True(t, ok, "llm_breaker_state{model=%q} is not published before the first call", model)
		require.Zero(t, v)
	}
	v, ok := sum(fams, "llm_retry_budget_remaining", nil)
	require.True(t, ok, "llm_retry_budget_remaining is not published before the first call")
	require.Equal(t, 1.0, v)

	s.StartWorker(func(o *llmworker.Options) { o.Metrics = m.Activities() })
	call := func(q string) workflows.CallResult { return s.Call(question(q)) }

	ok1 := call("Where is my order?")
	require.Equal(t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(ok1))
	sc, err := llmsim.ParseScenario([]byte("name: down\nphases:\n  - faults: [{kind: server_error}]\n"), "down")
	require.NoError(t, err)
	require.NoError(t, s.Sim.SetScenario(sc)) // every model answers 500 from now on
	failing := call("How do I get a refund for my order?")
	require.Equal(t, workflows.SourceFAQ, failing.Source)
	t.Logf("failing call: %v", workflows.CallResult.Decisions(failing))
	for _, a := range failing.Attempts {
		t.Logf("  %s:%s:%s %s", a.Model, a.Class, a.Decision, a.Reason)
	}
	budgetRefused := 0
	for _, a := range failing.Attempts {
		if strings.Contains(a.Reason, "budget") {
			budgetRefused++
		}
	}
	require.Positive(t, budgetRefused, "the budget should have refused a retry: %+v", failing.Attempts)
	byModelClass := map[string]float64{}
	attempts := 0.0
	for _, r := range append(ok1.Attempts, failing.Attempts...) {
		if r.Decision == "skip" {
			continue // a model a guard left out (budget, hold): no attempt, not counted
		}
		attempts++
		class := r.Class
		if class == "" {
			class = "ok"
		}
		byModelClass[r.Model+"/"+class]++
	}

	// The SDK reports through tally every second: wait until every counter
	// checked below has counted both calls (one flush may take some of
	// them and not the others).
	var n, done, tried float64
	if !assert.Eventually(t, func() bool {
		fams = scrape(t, m.Addr)
		n, _ = sum(fams, "llm_calls_total", map[string]string{"task_queue": tq})
		done, _ = sum(fams, "temporal_workflow_completed_total", map[string]string{"task_queue": tq, "workflow_type": workflows.WorkflowName})
		tried, _ = sum(fams, "llm_attempts_total", nil)
		return n == 2 && done == 2 && tried == attempts
	}, 20*time.Second, 200*time.Millisecond) {
		t.Fatalf("the counters never counted the two calls: llm_calls_total %v, temporal_workflow_completed_total %v, llm_attempts_total %v (want 2, 2, %v):\n%s",
			n, done, tried, attempts, metricText(fams, "llm_calls_total", "temporal_workflow_completed_total", "llm_attempts_total"))
	}

	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	t.Logf("metric families: %v", names)

	// The SDK's own metrics, with Prometheus suffixes.
	for _, name := range []string{
		"temporal_workflow_completed_total",
		"temporal_workflow_endtoend_latency_seconds",
		"temporal_activity_execution_latency_seconds",
		"temporal_activity_execution_failed_total",
		"temporal_local_activity_total",
		"temporal_workflow_task_execution_latency_seconds",
		"temporal_request_total",
	} {
		require.Contains(t, fams, name, "SDK metric %s missing", name)
	}
	n, _ = sum(fams, "temporal_workflow_completed_total", map[string]string{"task_queue": tq, "workflow_type": workflows.WorkflowName})
	require.Equal(t, 2.0, n, "temporal_workflow_completed_total")

	// Ours.
	for mc, want := range byModelClass {
		model, class, _ := strings.Cut(mc, "/")
		got, _ := sum(fams, "llm_attempts_total", map[string]string{"model": model, "class": class})
		require.Equal(t, want, got, "llm_attempts_total{model=%q,class=%q}", model, class)
	}
	got, _ := sum(fams, "llm_attempts_total", nil)
	require.Equal(t, attempts, got, "llm_attempts_total, all series")

	calls := map[string]float64{}
	for _, s := range samples(fams["llm_calls_total"]) {
		calls[s.labels["outcome"]+"/"+s.labels["source"]] += s.value
	}
	require.Equal(t, map[string]float64{"answered/model": 1, "degraded/faq": 1}, calls, "llm_calls_total by outcome/source")

	// Tokens by kind, as the results count them (the 500s generated
	// nothing: their retries are no duplicate spend).
	require.Zero(t, failing.Usage.DuplicatePromptTokens, "%+v", failing.Usage)
	for kind, want := range map[string]int{
		"prompt":     ok1.Usage.PromptTokens + failing.Usage.PromptTokens,
		"completion": ok1.Usage.CompletionTokens + failing.Usage.CompletionTokens,
		"failed":     ok1.Usage.FailedAttemptTokens + failing.Usage.FailedAttemptTokens,
		"duplicate":  ok1.Usage.DuplicatePromptTokens + failing.Usage.DuplicatePromptTokens,
	} {
		got, _ := sum(fams, "llm_tokens_total", map[string]string{"kind": kind, "task_queue": tq})
		require.Equal(t, float64(want), got, "llm_tokens_total{kind=%q}", kind)
	}

	got, _ = sum(fams, "llm_retry_budget_refusals_total", nil)
	require.Equal(t, float64(budgetRefused), got, "llm_retry_budget_refusals_total")
	got, ok = sum(fams, "llm_retry_budget_remaining", nil)
	require.True(t, ok)
	require.Zero(t, got, "the only retry of the window was spent")

	got, _ = sum(fams, "llm_breaker_state", map[string]string{"model": "qwen-72b"})
	// Open (2), or half-open (1) if the call's wait for the trials
	// outlasted the open period (the trial it got was refused by the
	// spent budget): not closed.
	require.GreaterOrEqual(t, got, 1.0, "qwen-72b's breaker is open (2) or half-open (1)")
	require.Equal(t, dto.MetricType_GAUGE, fams["llm_breaker_state"].GetType())

	lat := fams["llm_upstream_latency_seconds"]
	require.NotNil(t, lat)
	require.Equal(t, dto.MetricType_HISTOGRAM, lat.GetType())
	okN, _ := sum(fams, "llm_upstream_latency_seconds", map[string]string{"model": "qwen-72b", "outcome": "ok"})
	require.Equal(t, 1.0, okN)
	errN, _ := sum(fams, "llm_upstream_latency_seconds", map[string]string{"outcome": "error"})
	require.Equal(t, float64(upstreamFailures(failing)), errN)

	// Conventions: counters end in _total, nothing else does; durations
	// are in seconds.
	for name, f := range fams {
		if f.GetType() == dto.MetricType_COUNTER {
			require.True(t, strings.HasSuffix(name, "_total"), "counter %s lacks _total", name)
		} else {
			require.False(t, strings.HasSuffix(name, "_total"), "%s %s ends in _total", f.GetType(), name)
		}
		if strings.Contains(name, "latency") {
			require.True(t, strings.HasSuffix(name, "_seconds"), "latency %s is not in seconds", name)
		}
	}
}

// upstreamFailures counts a result's failed attempts that reached the
// upstream (breaker skips make no request).
func upstreamFailures(res workflows.CallResult) int {
	n := 0
	for _, a := range res.Attempts {
		if a.Class != "" && a.Class != string(failure.BreakerOpen) {
			n++
		}
	}
	return n
}

// metricText shows the named families, for failure messages.
func metricText(fams map[string]*dto.MetricFamily, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		f, ok := fams[n]
		if !ok {
			fmt.Fprintf(&b, "%s: absent\n", n)
			continue
		}
		_, _ = expfmt.MetricFamilyToText(&b, f)
	}
	return b.String()
}
