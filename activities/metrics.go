package activities

import (
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// Metrics receives what the activities observe. The worker provides a
// Prometheus implementation; NopMetrics discards everything.
type Metrics interface {
	// Attempt counts one upstream attempt (or a model skipped by its
	// breaker) by model and class ("ok" on success).
	Attempt(model, class string, d time.Duration)
	// BudgetRefused counts a retry the budget refused; Budget reports the
	// retries left in the window.
	BudgetRefused()
	Budget(remaining int)
	// BreakerState reports a model's breaker state change.
	BreakerState(model string, s guard.BreakerState)
}

// NopMetrics is a Metrics that records nothing.
type NopMetrics struct{}

// Attempt implements Metrics.
func (NopMetrics) Attempt(string, string, time.Duration) {}

// BudgetRefused implements Metrics.
func (NopMetrics) BudgetRefused() {}

// Budget implements Metrics.
func (NopMetrics) Budget(int) {}

// BreakerState implements Metrics.
func (NopMetrics) BreakerState(string, guard.BreakerState) {}

// classLabel is the class label of an attempt in the metrics: its class,
// "ok" on success.
func classLabel(c failure.Class) string {
	if c == failure.None {
		return "ok"
	}
	return string(c)
}
