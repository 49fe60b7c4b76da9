package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestAHoldIsWeighedAgainAtItsRelease: an endpoint answers 429 with a
// Retry-After of 1 s for 2.5 s (with x-ratelimit-remaining-requests: 0 and
// a reset of 1 s, and without them, as a gateway's), then answers. One call's refusal holds it; 19 calls that arrive meanwhile are
// put off. When the hold ends, each goes at its drawn moment and weighs
// the hold again: the first released is refused and holds the endpoint
// anew, and the others wait again instead of following it into the
// refusal. Before, every call put off went at its drawn moment whatever
// the first one met: 19 refusals at the first release.
func TestAHoldIsWeighedAgainAtItsRelease(t *testing.T) {
	for _, quota := range []bool{true, false} {
		t.Run(fmt.Sprintf("quota headers %v", quota), func(t *testing.T) { holdWeighedAgain(t, quota) })
	}
}

func holdWeighedAgain(t *testing.T, quota bool) {
	reply := sse{done: true, events: []sseEvent{{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	start := time.Now()
	var refused, answered atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Since(start) < 2500*time.Millisecond {
			refused.Add(1)
			rateLimited(w, quota)
			return
		}
		answered.Add(1)
		reply.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	a := slowFirstTokenActivities(t, srv.URL)
	var s testsuite.WorkflowTestSuite
	// call is one call's first request, put off and weighed again as the
	// workflow does.
	call := func() {
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		if prep, class, err := firstAttempt(a, env, true); err != nil || class == "" {
			t.Errorf("a call was not sent: %v %s", err, prep.Reason)
		}
	}
	call() // refused: the endpoint is held
	if refused.Load() != 1 {
		t.Fatalf("the first call: %d refusals, want 1", refused.Load())
	}
	var wg sync.WaitGroup
	for range 19 {
		wg.Go(call)
	}
	wg.Wait()
	t.Logf("%d refused, %d answered", refused.Load(), answered.Load())
	// A hold of 1 s released within 1.5 s: two releases fall in the 2.5 s,
	// each refused once, or a few times where calls drawn a few ms apart
	// go before the first one's refusal is back (a loaded machine).
	if n := refused.Load(); n > 8 {
		t.Errorf("%d requests refused in all; the calls put off followed the first released into the refusal", n)
	}
	if n := answered.Load(); n < 12 {
		t.Errorf("%d of the 19 calls put off answered (%d refused); want those not refused", n, refused.Load())
	}
}

// rateLimited answers 429 with a Retry-After of 1 s and, with quota, the
// x-ratelimit-* headers of a spent request limit (its reset 1 s away), as
// a provider's 429 says it.
func rateLimited(w http.ResponseWriter, quota bool) {
	w.Header().Set("Retry-After", "1")
	if quota {
		w.Header().Set("x-ratelimit-limit-requests", "60")
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", "1s")
	}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
}

// firstAttempt prepares a call's first attempt and sends it: the class it
// ended in ("ok", else the failure's). It returns "" when nothing was
// sent: no model, or a hold put it off and wait is false; with wait it
// waits the hold out and, on a Recheck, prepares anew, as the workflow
// does.
func firstAttempt(a *Activities, env *testsuite.TestActivityEnvironment, wait bool) (Prepared, string, error) {
	in, began := firstPrepare(), time.Now()
	for {
		in.Elapsed = time.Since(began)
		prep, err := a.PrepareAttempt(context.Background(), in)
		if err != nil || prep.Model == "" || prep.Hold > 0 && !wait {
			return prep, "", err
		}
		if prep.Hold > 0 {
			time.Sleep(prep.Hold)
			if prep.Recheck {
				continue
			}
		}
		_, err = env.ExecuteActivity(a.CallModel, CallInput{Request: in.Request, Model: prep.Model, Attempt: 1, Prompt: prep.Prompt, Timeout: 3 * time.Second})
		var refused *temporal.ApplicationError
		switch {
		case err == nil:
			return prep, "ok", nil
		case errors.As(err, &refused):
			return prep, refused.Type(), nil
		}
		return prep, "", err
	}
}

// TestRefusalsCountAgainstTheBreakerOnlyAfterBreakerAfter: an endpoint
// that answers every request 429 is busy, not sick, until it has refused
// without an answer for rate_limit.breaker_after (30 s): refusals within
// that stretch leave the model's breaker closed however many there are;
// past it they count, and breaker.consecutive_failures of them open it.
// An answer starts the stretch over.
func TestRefusalsCountAgainstTheBreakerOnlyAfterBreakerAfter(t *testing.T) {
	var answer atomic.Bool
	reply := sse{done: true, events: []sseEvent{{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer.Load() {
			reply.serve(w, r)
			return
		}
		rateLimited(w, false)
	}))
	t.Cleanup(srv.Close)
	a := slowFirstTokenActivities(t, srv.URL)
	t0 := time.Now()
	now := t0
	a.now = func() time.Time { return now }
	call := firstRequestSender(t, a)
	send := func(at time.Duration) {
		now = t0.Add(at)
		_ = call("qwen-72b")
	}
	after := a.cfg.RateLimit.BreakerAfter.D()
	state := func() guard.BreakerState { return a.breakers.State("qwen-72b", now) }
	for i := range 10 {
		send(time.Duration(i) * (after - time.Second) / 9)
	}
	if state() != guard.BreakerClosed {
		t.Fatalf("10 refusals within breaker_after (%s) opened the breaker", after)
	}
	n := a.cfg.Breaker.ConsecutiveFailures
	for i := range n {
		send(after + time.Duration(i)*time.Second)
		if i < n-1 && state() != guard.BreakerClosed {
			t.Fatalf("%d refusals past breaker_after opened the breaker; consecutive_failures is %d", i+1, n)
		}
	}
	if state() != guard.BreakerOpen {
		t.Fatalf("%d refusals past breaker_after left the breaker %s", n, state())
	}
	// An answer on the endpoint (CallModel sends what it is given, open
	// breaker or not) starts the stretch over: another model's refusals
	// there are backpressure again.
	answer.Store(true)
	send(after + time.Duration(n)*time.Second)
	answer.Store(false)
	for i := range 10 {
		now = t0.Add(after + time.Duration(n+1+i)*time.Second)
		_ = call("qwen-14b")
	}
	if st := a.breakers.State("qwen-14b", now); st != guard.BreakerClosed {
		t.Fatalf("refusals within breaker_after of an answer left qwen-14b's breaker %s", st)
	}
}

// firstRequestSender prepares a call's first attempt once, as the
// workflow does, and returns a sender of its request to a model through
// CallModel in a test activity environment (its error: the class the
// attempt failed with).
func firstRequestSender(t *testing.T, a *Activities) func(model string) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	in := firstPrepare()
	prep, err := a.PrepareAttempt(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return func(model string) error {
		_, err := env.ExecuteActivity(a.CallModel, CallInput{Request: in.Request, Model: model, Attempt: 1, Prompt: prep.Prompt, Timeout: 3 * time.Second})
		return err
	}
}
