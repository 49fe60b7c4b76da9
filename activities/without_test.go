package activities

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestEveryMeasuredRuleCanBeRemoved keeps bench -without honest: each
// rule whose removal docs/benchmarks.md reports (guard.Rule.Unmeasured
// empty) is one the activities, or the guard's pure calls they pass
// Options.Without to (guard.Call.Without), stop applying when it is named,
// and no rule said to be unmeasured is gated as if it could be.
func TestEveryMeasuredRuleCanBeRemoved(t *testing.T) {
	ours, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := filepath.Glob("../policies/guard/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range append(ours, theirs...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	if n := strings.Count(src.String(), "Without: a.without"); n < 2 {
		t.Errorf("the activities pass Options.Without to %d of the guard's pure calls' inputs, want guard.Call and guard.Backpressure", n)
	}
	for _, r := range guard.Rules {
		name := "without[guard.Rule" + goName(r.Name) + "]"
		gated := strings.Contains(src.String(), name) || strings.Contains(src.String(), "Without[Rule"+goName(r.Name)+"]")
		switch {
		case r.Unmeasured == "" && !gated:
			t.Errorf("rule %s: bench -without accepts it, but no activity checks %s", r.Name, name)
		case r.Unmeasured != "" && gated:
			t.Errorf("rule %s is said to be unmeasured (%s), yet the activities check %s", r.Name, r.Unmeasured, name)
		}
	}
}

// goName is the Go constant's suffix of a rule name: last-chance → LastChance.
func goName(n guard.RuleName) string {
	var b strings.Builder
	for part := range strings.SplitSeq(string(n), "-") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// TestWithoutARuleNothingOfItActs: a rule removed for a measurement is
// removed wherever it acts, not only where a walk weighs it. Without
// breaker, an attempt planned on an open breaker is sent; without
// backpressure, a response whose x-ratelimit-* headers say nothing is
// left holds no scope (with the rule, it does).
func TestWithoutARuleNothingOfItActs(t *testing.T) {
	srv, requests := answeringUpstream(t)
	cfg := slowFirstTokenActivities(t, srv.URL).cfg
	a, err := New(Options{Config: cfg, Without: []guard.RuleName{guard.RuleBreaker, guard.RuleBackpressure}})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Models[0]
	a.breakers.Trip(m.Name, time.Now())
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	prep, err := a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil || prep.Model != m.Name || prep.PastOpen {
		t.Fatalf("without the breaker rule the walk takes %s as if closed: got %q (past open %v), %v", m.Name, prep.Model, prep.PastOpen, err)
	}
	in := CallInput{Request: firstPrepare().Request, Model: prep.Model, Attempt: 1, Prompt: prep.Prompt, Timeout: 3 * time.Second}
	if _, err := env.ExecuteActivity(a.CallModel, in); err != nil || requests.Load() != 1 {
		t.Fatalf("without the breaker rule, an attempt on an open breaker: %v, %d requests; want it sent", err, requests.Load())
	}

	spent := http.Header{}
	spent.Set("x-ratelimit-limit-requests", "10")
	spent.Set("x-ratelimit-remaining-requests", "0")
	spent.Set("x-ratelimit-reset-requests", "5s")
	a.headroom(m, spent)
	if left := a.holds.Left(m.Scope(m.RateLimitScope), time.Now()); left != 0 {
		t.Errorf("without backpressure, spent headers held %s for %s", m.Name, left)
	}
	with := slowFirstTokenActivities(t, srv.URL)
	with.headroom(m, spent)
	if left := with.holds.Left(m.Scope(m.RateLimitScope), time.Now()); left <= 0 {
		t.Errorf("with backpressure, spent headers held nothing: the test shows nothing")
	}
}
