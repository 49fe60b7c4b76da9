package activities

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// stepResultTTL is how long a step's result is kept: long enough for a
// local activity's retries and a workflow task's retry after its timeout
// (10 s by default), short enough that few are held.
const stepResultTTL = 2 * time.Minute

// stepResultsMaxBytes bounds the inputs' bytes the kept results stand for
// (a result is about its input's size: PrepareAttempt returns the prompt
// it was given); the oldest go first.
const stepResultsMaxBytes = 64 << 20

// stepResult is the first run of a step: done once it returned.
type stepResult struct {
	key   string
	at    time.Time
	bytes int
	done  chan struct{}
	val   any
	err   error
}

// stepResults keeps the results of the counting steps' first runs on
// this worker (doc.go, "Counting steps count once"), by step: the workflow
// run, the local activity's ID (a counter of the run, the same when a
// retried workflow task schedules it again) and its input without the
// instant it was sent at (stepInput), which a retried workflow task
// computes anew. The workflow test environment gives every workflow the
// same run ID: tests that share one Activities between environments give
// each workflow its own ID.
type stepResults struct {
	mu    sync.Mutex
	m     map[string]*stepResult
	order []*stepResult // oldest first
	bytes int
}

func newStepResults() *stepResults { return &stepResults{m: map[string]*stepResult{}} }

// stepKey is the key of a local activity's step: its workflow run, its
// activity type and a digest of its input ("" outside an activity, as in
// unit tests that call the method directly, or when the input does not
// encode: then the step simply runs).
func stepKey(ctx context.Context, in any) (string, int) {
	if !activity.IsActivity(ctx) {
		return "", 0
	}
	if s, ok := in.(stepInput); ok {
		in = s.step()
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", 0
	}
	info := activity.GetInfo(ctx)
	sum := sha256.Sum256(b)
	return info.WorkflowExecution.ID + "\x00" + info.WorkflowExecution.RunID + "\x00" + info.ActivityID + "\x00" +
		info.ActivityType.Name + "\x00" + string(sum[:]), len(b)
}

// stepInput is an input that carries the instant it was sent at (the
// call's elapsed time): step is the input without it.
type stepInput interface{ step() any }

func (in PrepareInput) step() any { in.Elapsed = 0; return in }

func (in DecideInput) step() any { in.Outcome.Elapsed = 0; return in }

func (in HedgeInput) step() any { in.Prepare.Elapsed = 0; return in }

// oncePerStep runs f for the step of ctx and in, or returns the result of
// its first successful run on this worker (waiting for it when it is still
// running). A failed run is forgotten: the next one runs f again.
func oncePerStep[T any](ctx context.Context, s *stepResults, now time.Time, in any, f func() (T, error)) (T, error) {
	key, size := stepKey(ctx, in)
	if key == "" {
		return f()
	}
	s.mu.Lock()
	s.expire(now)
	if e, ok := s.m[key]; ok {
		s.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
		if e.err == nil {
			return e.val.(T), nil
		}
		return f()
	}
	e := &stepResult{key: key, at: now, bytes: size, done: make(chan struct{})}
	s.m[key] = e
	s.order = append(s.order, e)
	s.bytes += size
	s.mu.Unlock()

	// A run that fails, or panics (the SDK recovers and retries it), is
	// forgotten, and those waiting for it run the step themselves.
	e.err = errStepUnfinished
	defer func() {
		close(e.done)
		if e.err != nil {
			s.mu.Lock()
			if s.m[key] == e {
				delete(s.m, key)
			}
			s.mu.Unlock()
		}
	}()
	v, err := f()
	e.val, e.err = v, err
	return v, err
}

// errStepUnfinished marks a step whose run panicked.
var errStepUnfinished = errors.New("the step's first run did not finish")

// expire drops the entries older than stepResultTTL and, beyond
// stepResultsMaxBytes, the oldest. Called with s.mu held.
func (s *stepResults) expire(now time.Time) {
	n := 0
	for n < len(s.order) && (now.Sub(s.order[n].at) > stepResultTTL || s.bytes > stepResultsMaxBytes) {
		e := s.order[n]
		if s.m[e.key] == e {
			delete(s.m, e.key)
		}
		s.bytes -= e.bytes
		n++
	}
	if n > 0 {
		s.order = append(s.order[:0:0], s.order[n:]...)
	}
}
