package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Progress is the call activity's heartbeat: the attempt and the
// completion tokens received so far (streamed attempts).
type Progress struct {
	Attempt int `json:"attempt"`
	Tokens  int `json:"tokens"`
	// Text is a live attempt's text so far, all of it handed to its
	// followers (liveAttempt): after a lost worker the call continues it.
	Text string `json:"text,omitempty"`
	Live bool   `json:"live,omitempty"`
}

// beatAtLeastEvery is the longest time between two heartbeats of an
// activity against a server that answers them promptly: cancellation
// reaches an activity only in the answer to a heartbeat, and a cancelled
// call's upstream request must be cut within 2 s, whatever its attempt is
// waiting for (a first token, the rest of a whole answer).
const beatAtLeastEvery = time.Second

// beatTimes are the heartbeat schedule of an activity with heartbeat
// timeout: every, the interval (a third of the timeout, at most
// beatAtLeastEvery, at least 100 ms), and alive, the longest it grows to
// against a slow server (a third of the timeout), which also bounds each
// heartbeat's round trip (at least 1 s).
func beatTimes(timeout time.Duration) (every, alive time.Duration) {
	alive = max(timeout/3, 100*time.Millisecond)
	return min(alive, beatAtLeastEvery), alive
}

// nextBeat is how long after the start of a heartbeat that took rtt the
// next one is due: every, or (checkpointShare − 1) times rtt against a
// slow server (it hears from each activity less often), never past alive.
func nextBeat(every, alive, rtt time.Duration) time.Duration {
	return min(max(every, (checkpointShare-1)*rtt), alive)
}

// heartbeat records heartbeats with details() until stop is called, on the
// schedule of beatTimes; it also delivers cancellation to ctx. It is a
// timer, not a goroutine: a worker runs up to WORKER_MAX_CALLS attempts at
// once, most of them waiting on the upstream, and a parked goroutine per
// attempt is memory (docs/benchmarks.md, memory).
//
// It sends each heartbeat itself, by the activity's task token, not
// through the SDK's RecordHeartbeat: the SDK holds an activity's
// heartbeats back for its throttle interval (half the heartbeat timeout,
// 5 s by default: a cancel would wait as long), and takes one whose send
// times out for the end of the activity. A heartbeat that fails is
// retried by the next (the server times the activity out if none comes);
// one answered with the activity's end (beatStops) is then recorded
// through the SDK, which sends it at once (this activity sends it no
// other) and cancels ctx with the server's reason.
func heartbeat(ctx context.Context, timeout time.Duration, details func() any) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	every, alive := beatTimes(timeout)
	send := sendBeat
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		done := stopped || ctx.Err() != nil
		mu.Unlock()
		if done {
			return
		}
		start := time.Now()
		d := details()
		bctx, cancel := context.WithTimeout(ctx, max(alive, time.Second))
		err := send(ctx, bctx, d)
		cancel()
		rtt := time.Since(start)
		if beatStops(err) {
			activity.RecordHeartbeat(ctx, d)
		}
		mu.Lock()
		if !stopped {
			t.Reset(max(time.Until(start.Add(nextBeat(every, alive, rtt))), 0))
		}
		mu.Unlock()
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// beatSender sends one heartbeat of the activity of actx, within ctx.
type beatSender func(actx, ctx context.Context, details any) error

// directBeat sends it by the activity's task token with the worker's
// client (its data converter, so encrypted as the SDK's would be).
func directBeat(actx, ctx context.Context, details any) error {
	return activity.GetClient(actx).RecordActivityHeartbeat(ctx, activity.GetInfo(actx).TaskToken, details)
}

// sendBeat is how heartbeat sends. The package's tests, whose activity
// environment has no client to send with, give it to the SDK instead.
var sendBeat beatSender = directBeat

// beatStops reports whether a heartbeat's error says the attempt must
// stop, as the SDK's own heartbeats decide for an activity's context: the
// workflow cancelled it, or it is gone (NotFound: its workflow closed —
// a cancelled call does not wait for a racing attempt —, or it timed out;
// the namespace is gone), or it was paused or reset. Any other error (a
// slow or unreachable server) is left to the next heartbeat.
func beatStops(err error) bool {
	var canceled *temporal.CanceledError
	var notFound *serviceerror.NotFound
	var nsNotFound *serviceerror.NamespaceNotFound
	var nsNotActive *serviceerror.NamespaceNotActive
	return errors.As(err, &canceled) || errors.As(err, &notFound) || errors.As(err, &nsNotFound) ||
		errors.As(err, &nsNotActive) || errors.Is(err, activity.ErrActivityPaused) || errors.Is(err, activity.ErrActivityReset)
}
