package activities

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
)

// TestHeartbeatBeatsUntilStopped: the timer records a heartbeat every
// third of the timeout with the current details (the SDK throttles what it
// sends; details() counts what the timer records), and none once stopped.
func TestHeartbeatBeatsUntilStopped(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	var beats, afterStop, sent atomic.Int64
	var stopped atomic.Bool
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p Progress
		if err := d.Get(&p); err != nil || p.Attempt != 7 {
			t.Errorf("heartbeat details %+v (%v)", p, err)
		}
		sent.Add(1)
	})
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		stop := heartbeat(ctx, 300*time.Millisecond, func() any {
			beats.Add(1)
			if stopped.Load() {
				afterStop.Add(1)
			}
			return Progress{Attempt: 7, Tokens: 1}
		})
		time.Sleep(550 * time.Millisecond)
		stop()
		stopped.Store(true)
		time.Sleep(300 * time.Millisecond)
		return nil
	}, activity.RegisterOptions{Name: "beat"})
	if _, err := env.ExecuteActivity("beat"); err != nil {
		t.Fatal(err)
	}
	if n := beats.Load(); n < 3 {
		t.Errorf("%d heartbeats in 550 ms at one per 100 ms", n)
	}
	if sent.Load() == 0 {
		t.Error("no heartbeat reached the SDK")
	}
	if n := afterStop.Load(); n != 0 {
		t.Errorf("%d heartbeats after stop", n)
	}
}
