package bench

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestCallStepsSplitsTheLatency: a one-attempt history's steps come from
// its event times, and the caller's latency beyond start-to-close is the
// time outside the history; a history of two attempts is not one call's
// steps.
func TestCallStepsSplitsTheLatency(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(typ enumspb.EventType, ms int) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventType: typ, EventTime: timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))}
	}
	history := []*historypb.HistoryEvent{
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 0),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 3),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 10),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 10),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, 12),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 20),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 20),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 60),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 65),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, 65),
	}
	steps, ok := callSteps(history, 90*time.Millisecond)
	if !ok {
		t.Fatal("a one-attempt history was not read")
	}
	want := []time.Duration{3, 7, 2, 8, 40, 5, 25}
	for i, w := range want {
		if steps[i] != w*time.Millisecond {
			t.Errorf("%s: %v, want %v", stepNames[i], steps[i], w*time.Millisecond)
		}
	}
	if len(steps) != len(stepNames) {
		t.Fatalf("%d steps, want %d", len(steps), len(stepNames))
	}
	two := append(append([]*historypb.HistoryEvent{}, history[:7]...), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 21))
	two = append(two, history[7:]...)
	if _, ok := callSteps(two, time.Second); ok {
		t.Error("a history with a second activity was read as one attempt's")
	}
}
