package bench

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// The steps of a call answered at its first attempt, as its history and
// its caller see them, in the order they happen.
var stepNames = []string{
	"start → first workflow task picked up",
	"first workflow task (decisions, local activities)",
	"activity scheduled → picked up",
	"activity (the upstream request)",
	"activity done → workflow task picked up",
	"last workflow task (result, completion)",
	"outside the history (start request, result's delivery)",
}

// StepProfile is where the milliseconds of one workflow's calls went: the
// median of each step over Calls calls, and of their whole latency.
type StepProfile struct {
	Workflow string
	Calls    int
	Steps    []time.Duration // by stepNames
	Total    time.Duration
}

// callSteps splits one call's latency, seen by its caller, into the steps
// of stepNames from the event times of its history: ok is false for a
// history that is not one attempt's (a retry, a hedge, a second activity).
func callSteps(events []*historypb.HistoryEvent, latency time.Duration) (steps []time.Duration, ok bool) {
	var started, closed time.Time
	var wftStarted, wftCompleted []time.Time
	var actScheduled, actStarted, actDone []time.Time
	for _, ev := range events {
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wftStarted = append(wftStarted, t)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			wftCompleted = append(wftCompleted, t)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			actScheduled = append(actScheduled, t)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			actStarted = append(actStarted, t)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			actDone = append(actDone, t)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			closed = t
		}
	}
	if started.IsZero() || closed.IsZero() || len(wftStarted) != 2 || len(wftCompleted) != 2 ||
		len(actScheduled) != 1 || len(actStarted) != 1 || len(actDone) != 1 {
		return nil, false
	}
	inHistory := closed.Sub(started)
	return []time.Duration{
		wftStarted[0].Sub(started),
		wftCompleted[0].Sub(wftStarted[0]),
		actStarted[0].Sub(actScheduled[0]),
		actDone[0].Sub(actStarted[0]),
		wftStarted[1].Sub(actDone[0]),
		closed.Sub(wftStarted[1]),
		latency - inHistory,
	}, true
}

// stepProfile reads the histories of the calls ids (their latencies lat,
// in the same order) and returns the median of each step; at most limit
// histories are read.
func stepProfile(ctx context.Context, c client.Client, name string, ids []string, lat []time.Duration, limit int) (StepProfile, error) {
	p := StepProfile{Workflow: name}
	by := make([][]time.Duration, len(stepNames))
	var totals []time.Duration
	for i, id := range ids {
		if p.Calls >= limit {
			break
		}
		if id == "" {
			continue // refused before a call started: no history
		}
		var events []*historypb.HistoryEvent
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return p, fmt.Errorf("history of %s: %w", id, err)
			}
			events = append(events, ev)
		}
		steps, ok := callSteps(events, lat[i])
		if !ok {
			continue
		}
		for k, d := range steps {
			by[k] = append(by[k], d)
		}
		totals = append(totals, lat[i])
		p.Calls++
	}
	if p.Calls == 0 {
		return p, fmt.Errorf("no call of %s was answered at one attempt", name)
	}
	for _, ds := range by {
		p.Steps = append(p.Steps, Percentile(ds, 0.5))
	}
	p.Total = Percentile(totals, 0.5)
	return p, nil
}

// StepTable returns where each workflow's milliseconds went, side by side,
// with durable-llm's difference from the floor per step.
func (r *OverheadReport) StepTable() Table {
	t := Table{Columns: []string{"step (median, c=1)"}}
	for _, p := range r.Steps {
		t.Columns = append(t.Columns, fmt.Sprintf("%s (%d calls)", p.Workflow, p.Calls))
	}
	diff := len(r.Steps) >= 2 && r.Steps[0].Workflow == NameFloor && r.Steps[1].Workflow == NameDurable
	if diff {
		t.Columns = append(t.Columns, "durable-llm − bare")
	}
	row := func(label string, of func(StepProfile) time.Duration) {
		cells := []string{label}
		for _, p := range r.Steps {
			cells = append(cells, fmtDur(of(p)))
		}
		if diff {
			cells = append(cells, fmtSigned(of(r.Steps[1])-of(r.Steps[0])))
		}
		t.Rows = append(t.Rows, cells)
	}
	for k, name := range stepNames {
		row(name, func(p StepProfile) time.Duration { return p.Steps[k] })
	}
	row("whole call (its median latency)", func(p StepProfile) time.Duration { return p.Total })
	return t
}

// fmtSigned writes a duration with its sign.
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}
