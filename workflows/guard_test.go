package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestGuardReportsOfOneTaskAreApartEach: reports that reach the guard in
// one workflow task are each decoded afresh. Decoded into one value, a
// field a report leaves out (Leave, Outcomes and Holds are omitted when
// empty) kept the previous report's: a staying worker's report right
// after a leaving worker's was taken as a leave too, and it dropped out of
// the count until its next keep-alive (the 300-worker fleet benchmark
// counted 299).
func TestGuardReportsOfOneTaskAreApartEach(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.LLMGuard, workflow.RegisterOptions{Name: workflows.GuardWorkflowName})
	cfg := config.DefaultConfig()
	t0 := env.Now()
	// signal delivers rs in one workflow task, as a busy server does.
	signal := func(rs ...guard.Report) {
		for _, r := range rs[:len(rs)-1] {
			env.SignalWorkflowSkippingWorkflowTask(workflows.SignalGuardReport, r)
		}
		env.SignalWorkflow(workflows.SignalGuardReport, rs[len(rs)-1])
	}
	// Three workers announce themselves; "a" carries an outcome.
	env.RegisterDelayedCallback(func() {
		signal(guard.Report{Worker: "a", Seq: 1, At: t0.Add(time.Second), Outcomes: []guard.ModelOutcome{{Model: "m", At: t0.Add(time.Second), Class: failure.ServerError}}},
			guard.Report{Worker: "b", Seq: 1, At: t0.Add(time.Second)},
			guard.Report{Worker: "c", Seq: 1, At: t0.Add(time.Second)})
	}, time.Second)
	// "a" leaves; "b" and "c" report in the same task, staying.
	env.RegisterDelayedCallback(func() {
		signal(guard.Report{Worker: "a", Seq: 2, At: t0.Add(2 * time.Second), Leave: true},
			guard.Report{Worker: "b", Seq: 2, At: t0.Add(2 * time.Second)},
			guard.Report{Worker: "c", Seq: 2, At: t0.Add(2 * time.Second)})
	}, 2*time.Second)
	var got guard.View
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.QueryGuardView, t0.Add(3*time.Second))
		require.NoError(t, err)
		require.NoError(t, v.Get(&got))
	}, 3*time.Second)
	env.ExecuteWorkflow(workflows.GuardWorkflowName, workflows.GuardInput{Breaker: cfg.Breaker, ReportsPerRun: 100})
	require.Equal(t, 2, got.Workers, "b and c stay; only a left")
}
