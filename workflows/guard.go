package workflows

import (
	"bytes"
	"cmp"
	"encoding/json"
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
	// query passes (a time.Time: the asking worker's now), for operators
	// (`temporal workflow query`); workers read the memo instead.
	QueryGuardView = "view"
	// GuardMemo is the memo key under which the guard publishes its
	// guard.View whenever it changes. Workers read it with
	// DescribeWorkflowExecution, which the server answers from the
	// workflow's state without a workflow task: a fleet's reads never
	// queue behind the guard's work, and cost its history nothing.
	GuardMemo = "view"
	// guardReportsPerRun bounds a run's history (about 5 events a report)
	// before it continues as new with its state.
	guardReportsPerRun = 200
	// guardMemoVersion is the change that made the guard publish its view
	// in its memo (runs from before it only took reports and queries).
	guardMemoVersion = "guard-memo"
	// guardFreshReportsVersion is the change that decodes each report of
	// a workflow task into a new value: into one, a field a report leaves
	// out kept the previous report's (a leave, outcomes, holds).
	guardFreshReportsVersion = "guard-fresh-reports"
)

// GuardID is the workflow ID of the guard of the workers of taskQueue.
func GuardID(taskQueue string) string { return "llm-guard:" + taskQueue }

// GuardInput starts a guard: the policy's breaker settings (of the worker
// that started it), and the state a previous run carried.
type GuardInput struct {
	Breaker config.BreakerConfig `json:"breaker"`
	State   guard.FleetState     `json:"state"`
	// ReportsPerRun before continuing as new; 0: 200.
	ReportsPerRun int `json:"reports_per_run,omitempty"`
}

// LLMGuard keeps the guard state every worker of a task queue shares: each
// worker signals what its breakers and rate-limit holds saw
// (SignalGuardReport: at once when it is news, otherwise at a rate that
// keeps the fleet's reports near ten a second whatever its size; see
// guard.Sync), and the guard publishes the fleet's view in its memo
// (GuardMemo) when it changes, which the workers read. The state is a
// pure function of the reports and their instants, so the workflow is
// deterministic; after guardReportsPerRun reports it continues as new
// with its state in a few bytes.
func LLMGuard(ctx workflow.Context, in GuardInput) error {
	// The Fleet ranges over maps only to fill maps or sorted lists, so its
	// results never depend on the order (hence the workflowcheck:ignore).
	f := guard.NewFleet(in.Breaker)
	//workflowcheck:ignore
	f.Restore(in.State)
	if err := workflow.SetQueryHandler(ctx, QueryGuardView, func(asked time.Time) (guard.View, error) {
		// workflow.Now in a query is the instant of the last workflow task
		// (the last report), so the view is judged at the asker's instant
		// when that is later. A query writes no history, so this does not
		// touch determinism.
		//workflowcheck:ignore
		return f.View(latest(asked, workflow.Now(ctx), f.Latest())), nil
	}); err != nil {
		return err
	}
	memo := &guardMemo{f: f, on: workflow.GetVersion(ctx, guardMemoVersion, workflow.DefaultVersion, 1) >= 1}
	// fresh: each report of a batch is decoded into a new value (below);
	// a run started before keeps its old decoding on replay.
	fresh := workflow.GetVersion(ctx, guardFreshReportsVersion, workflow.DefaultVersion, 1) >= 1
	if err := memo.publish(ctx); err != nil {
		return err
	}
	reports := workflow.GetSignalChannel(ctx, SignalGuardReport)
	if err := receiveReports(ctx, reports, f, cmp.Or(in.ReportsPerRun, guardReportsPerRun), fresh, memo); err != nil {
		return err
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

// guardMemo writes the fleet's view to the workflow's memo when it
// changed (on: the run's version writes one).
type guardMemo struct {
	f    *guard.Fleet
	on   bool
	last []byte
}

func (m *guardMemo) publish(ctx workflow.Context) error {
	if !m.on {
		return nil
	}
	//workflowcheck:ignore
	v := m.f.View(latest(workflow.Now(ctx), m.f.Latest()))
	v.At = time.Time{} // a reader judges freshness by when it read
	// json.Marshal writes map keys sorted: its output is a function of
	// the view alone, whatever the maps' order (hence the ignore).
	//workflowcheck:ignore
	b, err := json.Marshal(v)
	if err != nil || bytes.Equal(b, m.last) {
		return err
	}
	m.last = b
	return workflow.UpsertMemo(ctx, map[string]any{GuardMemo: v})
}

// receiveReports applies n reports to f, with one memo write for the
// reports of each workflow task.
func receiveReports(ctx workflow.Context, reports workflow.ReceiveChannel, f *guard.Fleet, n int, fresh bool, memo *guardMemo) error {
	for n > 0 {
		var r guard.Report
		reports.Receive(ctx, &r)
		//workflowcheck:ignore
		f.Apply(r)
		n--
		// The reports that came with it, in the same workflow task. Each
		// is decoded into a new Report: JSON keeps the fields a report
		// leaves out (Leave, Outcomes and Holds are omitted when empty)
		// as the previous report had them, so a staying worker's report
		// after a leaving one's left too.
		for n > 0 {
			next := r // runs from before the fix decode into the last report
			if fresh {
				next = guard.Report{}
			}
			if !reports.ReceiveAsync(&next) {
				break
			}
			r = next
			//workflowcheck:ignore
			f.Apply(r)
			n--
		}
		if err := memo.publish(ctx); err != nil {
			return err
		}
	}
	return nil
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
