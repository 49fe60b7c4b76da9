package workflows

import (
	"cmp"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// The shared guards of a fleet of workers (docs/how-it-works.md "Shared guards").
const (
	// GuardWorkflowName is the workflow type of the fleet's guard: one
	// run per task queue, ID GuardID(task queue).
	GuardWorkflowName = "LLMGuard"
	// SignalGuardReport carries a worker's guard.Report.
	SignalGuardReport = "report"
	// QueryGuardView returns the fleet's guard.View at the instant the
	// query passes (a time.Time: the asking worker's now). A query without
	// one gets the view at the guard's last report, which while the fleet
	// is quiet is in the past: budgets not refilled, open breakers not yet
	// half-open.
	QueryGuardView = "view"
	// guardReportsPerRun bounds a run's history (about 4 events a report)
	// before it continues as new with its state.
	guardReportsPerRun = 200
)

// GuardID is the workflow ID of the guard of the workers of taskQueue.
func GuardID(taskQueue string) string { return "llm-guard:" + taskQueue }

// GuardInput starts a guard: the policy's budget and breaker settings (of
// the worker that started it), and the state a previous run carried.
type GuardInput struct {
	Budget  config.BudgetConfig  `json:"budget"`
	Breaker config.BreakerConfig `json:"breaker"`
	State   guard.FleetState     `json:"state"`
	// ReportsPerRun before continuing as new; 0: 200.
	ReportsPerRun int `json:"reports_per_run,omitempty"`
}

// LLMGuard keeps the guard state of every worker of a task queue: each
// worker signals what its budgets, breakers and rate-limit holds saw
// (SignalGuardReport, at most every sync interval, only when it saw
// something) and queries the fleet's view (QueryGuardView, which writes no
// history). The state is a pure function of the reports and their
// instants, so the workflow is deterministic; after guardReportsPerRun
// reports it continues as new with its state in a few bytes.
func LLMGuard(ctx workflow.Context, in GuardInput) error {
	// The Fleet ranges over maps only to fill maps or sorted lists, so its
	// results never depend on the order (hence the workflowcheck:ignore).
	f := guard.NewFleet(in.Budget, in.Breaker)
	//workflowcheck:ignore
	f.Restore(in.State)
	if err := workflow.SetQueryHandler(ctx, QueryGuardView, func(asked time.Time) (guard.View, error) {
		// workflow.Now in a query is the instant of the last workflow task
		// (the last report), so the view is judged at the asker's instant
		// when that is later: a quiet fleet's budget refills and its
		// breakers turn half-open on time. A query writes no history, so
		// this does not touch determinism.
		//workflowcheck:ignore
		return f.View(latest(asked, workflow.Now(ctx), f.Latest())), nil
	}); err != nil {
		return err
	}
	reports := workflow.GetSignalChannel(ctx, SignalGuardReport)
	for range cmp.Or(in.ReportsPerRun, guardReportsPerRun) {
		var r guard.Report
		reports.Receive(ctx, &r)
		//workflowcheck:ignore
		f.Apply(r)
	}
	for {
		var r guard.Report
		if !reports.ReceiveAsync(&r) {
			break
		}
		//workflowcheck:ignore
		f.Apply(r)
	}
	//workflowcheck:ignore
	at := latest(workflow.Now(ctx), f.Latest())
	//workflowcheck:ignore
	st := f.State(at)
	in.State = st
	return workflow.NewContinueAsNewError(ctx, GuardWorkflowName, in)
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var t time.Time
	for _, u := range ts {
		if u.After(t) {
			t = u
		}
	}
	return t
}
