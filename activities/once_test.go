package activities

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestCountingStepsCountOnce: a local activity that runs again for the
// same step of a call (its retry, or a workflow task's retry, which sends
// it with a later elapsed time) returns the first run's result and pays
// nothing again: one retry taken from the endpoint's budget, not two; the
// class breaker sees one failed retry. The call's next step still counts.
func TestCountingStepsCountOnce(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a, err := New(Options{Config: config.DefaultConfig(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	first := firstPrepare()
	v, err := env.ExecuteLocalActivity(a.PrepareAttempt, first)
	if err != nil {
		t.Fatal(err)
	}
	var p Prepared
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	endpoint := config.DefaultConfig().Models[0].Endpoint()
	retry := first
	retry.State, retry.Elapsed = p.State, time.Second // the call's second request: a retry
	before := a.budgets.For(endpoint).Remaining(now)
	var got []Prepared
	for i := range 2 { // the step, then the same step again
		again := retry
		again.Elapsed += time.Duration(i) * 700 * time.Millisecond // a retried workflow task sends it later
		v, err := env.ExecuteLocalActivity(a.PrepareAttempt, again)
		if err != nil {
			t.Fatal(err)
		}
		var r Prepared
		if err := v.Get(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if spent := before - a.budgets.For(endpoint).Remaining(now); spent != 1 {
		t.Errorf("the same retry run twice took %d retries from the budget of %s, want 1", spent, endpoint)
	}
	if got[0].Model != got[1].Model || got[0].Fingerprint != got[1].Fingerprint {
		t.Errorf("the second run answered differently: %+v then %+v", got[0], got[1])
	}
	next := retry
	next.State = got[0].State // another step: the call's next request
	if _, err := env.ExecuteLocalActivity(a.PrepareAttempt, next); err != nil {
		t.Fatal(err)
	}
	if spent := before - a.budgets.For(endpoint).Remaining(now); spent != 2 {
		t.Errorf("the next step took %d retries in all, want 2", spent)
	}

	// DecideNext feeds the class breaker once per step.
	st := p.State
	st.Pending = failure.ServerError
	in := DecideInput{State: st, Outcome: callstate.Outcome{Class: failure.ServerError, Elapsed: time.Second}}
	for i := range 2 {
		in.Outcome.Elapsed += time.Duration(i) * time.Second
		if _, err := env.ExecuteLocalActivity(a.DecideNext, in); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.classes.Snapshot(now)[failure.ServerError].Failures; n != 1 {
		t.Errorf("one failed retry decided twice was recorded %d times", n)
	}
}

// TestTenantShareSkipsTheRetry: a tenant that took its share of an
// endpoint's retry budget while another tenant calls is skipped on that
// endpoint with a reason that names the share; the other tenant's retry
// is paid.
func TestTenantShareSkipsTheRetry(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cfg := config.DefaultConfig()
	cfg.Budget.Floor, cfg.Budget.Ratio = 2, 0 // 2 retries a minute: acme may take 1
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := func(tenant string) PrepareInput {
		in := firstPrepare()
		in.Request.Tenant = tenant
		p, err := a.PrepareAttempt(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		in.State = p.State // the call's next request is a retry
		return in
	}
	acme, globex := first("acme"), first("globex")
	if p, _ := a.PrepareAttempt(ctx, acme); p.Model == "" {
		t.Fatalf("acme's first retry was refused: %s", p.Reason)
	}
	// Refused for now: acme waits (no request) for the budget, told why.
	p, _ := a.PrepareAttempt(ctx, acme)
	if p.Hold <= 0 || !p.Recheck || !strings.Contains(p.HoldReason, `tenant "acme" took its share (50%)`) {
		t.Fatalf("acme's second retry: model %q, hold %s (%q), skipped %+v", p.Model, p.Hold, p.HoldReason, p.Skipped)
	}
	if p, _ := a.PrepareAttempt(ctx, globex); p.Model != "qwen-72b" {
		t.Fatalf("globex's retry was refused: %+v", p.Skipped)
	}
}

// TestStepThatPanickedRunsAgain: a step whose first run panicked (the SDK
// recovers and retries it) runs again when it comes back, instead of
// waiting forever for the first run's result.
func TestStepThatPanickedRunsAgain(t *testing.T) {
	steps := newStepResults()
	runs := 0
	step := func(ctx context.Context, in string) (int, error) {
		return oncePerStep(ctx, steps, time.Now(), in, func() (int, error) {
			runs++
			if runs == 1 {
				panic("a bug in the step")
			}
			return runs, nil
		})
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	if _, err := env.ExecuteLocalActivity(step, "x"); err == nil {
		t.Fatal("the panicking run succeeded")
	}
	done := make(chan error, 1)
	go func() {
		v, err := env.ExecuteLocalActivity(step, "x")
		if err == nil {
			var n int
			if err = v.Get(&n); err == nil && n != 2 {
				err = fmt.Errorf("the second run returned %d, want 2 (run again)", n)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the step's second run waits for a first run that panicked")
	}
}
