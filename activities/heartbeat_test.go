package activities

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
)

// TestMain: the SDK's activity test environment has no client to send
// heartbeats with (its mock server stops the process at the first call),
// so the package's tests give them to the SDK.
func TestMain(m *testing.M) {
	sendBeat = sdkBeat
	os.Exit(m.Run())
}

func sdkBeat(actx, _ context.Context, details any) error {
	activity.RecordHeartbeat(actx, details)
	return nil
}

// withBeat makes send the package's heartbeat sender until t ends.
func withBeat(t *testing.T, send beatSender) {
	sendBeat = send
	t.Cleanup(func() { sendBeat = sdkBeat })
}

// TestHeartbeatBeatsUntilStopped: the timer records a heartbeat every
// third of the timeout with the current details, and none once stopped.
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

// TestHeartbeatBeatsEverySecondAndHandsItsEndToTheSDK: with a 10 s
// heartbeat timeout, an activity heartbeats every second (a cancel must
// reach its request within 2 s), sent directly, not held back by the SDK's
// throttle; a transient error is left to the next heartbeat, and one that
// says the activity is gone (its workflow closed) is recorded through the
// SDK, which cancels the activity's context with the server's reason.
func TestHeartbeatBeatsEverySecondAndHandsItsEndToTheSDK(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	var viaSDK atomic.Int64
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { viaSDK.Add(1) })
	var sent atomic.Int64
	withBeat(t, func(actx, ctx context.Context, details any) error {
		switch sent.Add(1) {
		case 1:
			return serviceerror.NewUnavailable("busy")
		case 2:
			return nil
		}
		return serviceerror.NewNotFound("workflow execution already completed")
	})
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		stop := heartbeat(ctx, 10*time.Second, func() any { return Progress{Attempt: 1} })
		time.Sleep(2700 * time.Millisecond)
		if n := sent.Load(); n != 2 || viaSDK.Load() != 0 {
			t.Errorf("after 2.7 s: %d heartbeats sent, %d through the SDK; want 2 sent, none through the SDK", n, viaSDK.Load())
		}
		time.Sleep(800 * time.Millisecond)
		stop()
		if viaSDK.Load() != 1 {
			t.Errorf("the end of the activity was recorded through the SDK %d times, want once", viaSDK.Load())
		}
		return nil
	}, activity.RegisterOptions{Name: "beat"})
	if _, err := env.ExecuteActivity("beat"); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeatYieldsToASlowServer: against a server that takes 400 ms to
// answer, heartbeats come every 4 round trips (checkpointShare), not one
// per second back to back, and never less often than a third of the
// heartbeat timeout.
func TestHeartbeatYieldsToASlowServer(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    time.Duration // between two heartbeats' starts
	}{
		{10 * time.Second, 1600 * time.Millisecond},
		{3 * time.Second, time.Second},
	} {
		every, alive := beatTimes(c.timeout)
		if got := nextBeat(every, alive, 400*time.Millisecond); got != c.want {
			t.Errorf("timeout %v: next heartbeat %v after the last, want %v", c.timeout, got, c.want)
		}
		if got := nextBeat(every, alive, 10*time.Millisecond); got != min(time.Second, c.timeout/3) {
			t.Errorf("timeout %v: next heartbeat %v after a quick one, want %v", c.timeout, got, min(time.Second, c.timeout/3))
		}
	}
}
