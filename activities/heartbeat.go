package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
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

// heartbeat records heartbeats with details() until stop is called, often
// enough for the heartbeat timeout; it also delivers cancellation to ctx.
// It is a timer, not a goroutine: a worker runs up to WORKER_MAX_CALLS
// attempts at once, most of them waiting on the upstream, and a parked
// goroutine per attempt is memory (docs/benchmarks.md, memory).
func heartbeat(ctx context.Context, timeout time.Duration, details func() any) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	every := max(timeout/3, 100*time.Millisecond)
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
		activity.RecordHeartbeat(ctx, details())
		mu.Lock()
		if !stopped {
			t.Reset(every)
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
