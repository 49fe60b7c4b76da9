package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// answeringUpstream is an upstream that answers every request at once
// with "Your parcel ships today.", and the requests it has had.
func answeringUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	reply := sse{done: true, events: []sseEvent{{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	requests := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		reply.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, requests
}

// TestACallsFirstRequestGoesPastOpenBreakers: every rung's breaker is
// open. A call first waits for the breakers' trials; its wait spent, its
// first request still reaches the upstream, at the preferred rung, and is
// answered, as a plain client's one request would be; a retry of a call
// whose first request failed is refused. Before, the first request waited too and, in
// a flap with the breakers open through the up windows, calls a plain
// client would have had answered took the FAQ.
func TestACallsFirstRequestGoesPastOpenBreakers(t *testing.T) {
	srv, requests := answeringUpstream(t)
	a := slowFirstTokenActivities(t, srv.URL)
	now := time.Now()
	for _, m := range a.cfg.Models {
		a.breakers.Trip(m.Name, now)
	}

	// First it waits for the breakers' trials: an upstream back within
	// its deadline serves the call without a failed request.
	wait, err := a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil {
		t.Fatal(err)
	}
	if !wait.Recheck || wait.Hold <= 0 || wait.PastOpen {
		t.Fatalf("a first request with its wait ahead: model %q, recheck %v, hold %v, past open %v; want a wait for the trials", wait.Model, wait.Recheck, wait.Hold, wait.PastOpen)
	}
	// Its wait spent, the first request goes past the breakers.
	spent := waitSpent(a, firstPrepare())
	first, err := a.PrepareAttempt(context.Background(), spent)
	if err != nil {
		t.Fatal(err)
	}
	if first.Model != a.cfg.Models[0].Name || !first.PastOpen || first.Recheck || len(first.Skipped) != 0 {
		t.Fatalf("first request: model %q past open %v, waiting %v (%s), skipped %v; want %s past its open breaker",
			first.Model, first.PastOpen, first.Recheck, first.HoldReason, first.Skipped, a.cfg.Models[0].Name)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	in := CallInput{Request: firstPrepare().Request, Model: first.Model, Attempt: 1, Prompt: first.Prompt, Timeout: 3 * time.Second, PastOpen: true}
	v, err := env.ExecuteActivity(a.CallModel, in)
	if err != nil {
		t.Fatalf("the first request past the open breaker: %v", err)
	}
	var out CallOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Content != "Your parcel ships today." || requests.Load() != 1 {
		t.Fatalf("answer %q in %d request(s), want the model's in one", out.Content, requests.Load())
	}

	// The same attempt not planned past the breakers (it was planned
	// while the breaker was closed, which has opened since) is refused
	// before sending: another rung may take it.
	in.PastOpen = false
	if _, err := env.ExecuteActivity(a.CallModel, in); err == nil {
		t.Fatal("an attempt planned before its breaker opened was sent")
	} else if o, _ := failedOutcome(t, err); o.Class != failure.BreakerOpen || !o.NotSent {
		t.Fatalf("refused as %s (not sent %v), want breaker_open, not sent", o.Class, o.NotSent)
	}

	// A retry after a failed first request is extra load: the breakers
	// refuse it and the call waits for their trials.
	retry := firstPrepare()
	retry.State = first.State // its one request sent
	next, err := a.PrepareAttempt(context.Background(), retry)
	if err != nil {
		t.Fatal(err)
	}
	if next.PastOpen || (next.Model != "" && !next.Recheck) {
		t.Fatalf("a retry went past open breakers: model %q, past open %v", next.Model, next.PastOpen)
	}
	if requests.Load() != 1 {
		t.Fatalf("%d requests reached the upstream, want 1", requests.Load())
	}
}

// TestAFirstRequestPastOpenBreakersAndAHold: every rung's breaker is
// open and every rung is held by a rate limit longer than the call can
// wait. The call waits for the breakers' trials while it may; its wait
// spent, its first request still goes, past the breakers and the hold, at
// the preferred rung, as a plain client's one request would: a guard
// never leaves a caller worse off than that.
func TestAFirstRequestPastOpenBreakersAndAHold(t *testing.T) {
	a := slowFirstTokenActivities(t, "http://127.0.0.1:1")
	now := time.Now()
	for _, m := range a.cfg.Models {
		a.breakers.Trip(m.Name, now)
		a.holds.Hold(m.Scope(m.RateLimitScope), now, 10*time.Minute)
	}
	p, err := a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Recheck || p.Hold <= 0 || !strings.Contains(p.HoldReason, "breaker open") {
		t.Fatalf("model %q, recheck %v, hold %v (%s): want a wait for the breakers' trials", p.Model, p.Recheck, p.Hold, p.HoldReason)
	}
	spent := waitSpent(a, firstPrepare())
	p, err = a.PrepareAttempt(context.Background(), spent)
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != a.cfg.Models[0].Name || p.Recheck || p.Hold > 0 || !p.PastOpen {
		t.Fatalf("model %q, recheck %v, hold %s, past open %v (%s): want its first request sent to %s", p.Model, p.Recheck, p.Hold, p.PastOpen, p.Reason, a.cfg.Models[0].Name)
	}
}

// waitSpent is in at the moment a first request's wait for open breakers
// ends: its time left before the fallback reserve is what the first rung
// needs to start answering, and an attempt's minimum.
func waitSpent(a *Activities, in PrepareInput) PrepareInput {
	in.Elapsed = in.State.Deadline - a.cfg.Call.FallbackReserve.D() - guard.MinAttemptTime - firstTokenTime(a.cfg.Models[0])
	return in
}

// TestARungWithoutAHoldIsNotSkippedForOne: with no rate-limit hold on the
// model, a call whose time to wait is already spent (its deadline less
// the reserve passed while the workflow worked) still sends: no hold is
// longer than the call can wait when there is none. The hold rule once
// skipped the rung so, and such a call took the fallback.
func TestARungWithoutAHoldIsNotSkippedForOne(t *testing.T) {
	a, err := New(Options{Config: config.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	in := firstPrepare()
	in.Elapsed = in.State.Deadline - a.cfg.Call.FallbackReserve.D() + 200*time.Millisecond
	p, err := a.PrepareAttempt(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != a.cfg.Models[0].Name || len(p.Skipped) != 0 {
		t.Fatalf("model %q, skipped %+v: want %s sent, nothing skipped", p.Model, p.Skipped, a.cfg.Models[0].Name)
	}
}
