package activities

import (
	"context"
	"testing"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestACallThatSentNothingIsNotChargedARetry: a call's first attempt is
// refused before sending (its model's breaker opened between planning and
// sending), and the endpoint's retry budget is spent. Its next attempt is
// still its first request and goes out; a call whose first attempt
// reached the upstream and failed waits for the budget instead. Before,
// both waited: in the 5 s flap with three workers, 12 calls started in up
// windows never sent a request and took the FAQ.
func TestACallThatSentNothingIsNotChargedARetry(t *testing.T) {
	for _, c := range []struct {
		name    string
		outcome callstate.Outcome
		sends   bool
	}{
		{"refused before sending", callstate.Outcome{Class: failure.BreakerOpen, NotSent: true}, true},
		{"sent and failed", callstate.Outcome{Class: failure.ServerError}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(Options{Config: config.DefaultConfig()})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			in := afterAFailedFirstAttempt(t, a, c.outcome)
			next, err := a.PrepareAttempt(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			sent := next.Model != "" && !next.Recheck
			if sent != c.sends {
				t.Fatalf("next attempt sent %v (model %q, waiting %v: %s), want %v", sent, next.Model, next.Recheck, next.HoldReason, c.sends)
			}
		})
	}
}

// afterAFailedFirstAttempt prepares a call's first attempt, spends every
// endpoint's retry budget, and decides the step after outcome: the input
// of the call's next PrepareAttempt, which must be another attempt.
func afterAFailedFirstAttempt(t *testing.T, a *Activities, outcome callstate.Outcome) PrepareInput {
	t.Helper()
	in := firstPrepare()
	first, err := a.prepareAttempt(in, "")
	if err != nil || first.Model == "" {
		t.Fatalf("first attempt not prepared: %+v %v", first, err)
	}
	spendRetries(a, 0)
	step, err := a.DecideNext(context.Background(), DecideInput{State: first.State, Outcome: outcome})
	if err != nil {
		t.Fatal(err)
	}
	if step.Kind == callstate.Fallback || step.Kind == callstate.Fail {
		t.Fatalf("step after %s: %s (%s), want another attempt", outcome.Class, step.Decision, step.Reason)
	}
	in.State = step.Next
	return in
}
