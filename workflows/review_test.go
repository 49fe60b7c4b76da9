package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/workflows"
)

// decide sends a decision to the review under test; the update's result
// and error (a refusal by its validator included) land in res and err
// when the environment runs it.
func decide(env *testsuite.TestWorkflowEnvironment, d workflows.ReviewDecision, res *workflows.ReviewResult, err *error) {
	env.UpdateWorkflow(workflows.UpdateReviewDecision, "", &testsuite.TestUpdateCallback{
		OnReject: func(e error) { *err = e },
		OnAccept: func() {},
		OnComplete: func(v any, e error) {
			*err = e
			if r, ok := v.(workflows.ReviewResult); ok {
				*res = r
			}
		},
	}, d)
}

func reviewEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.RiskReview, workflow.RegisterOptions{Name: workflows.ReviewWorkflowName})
	return env
}

var reviewIn = workflows.ReviewInput{CallID: "llm-1", RuleID: "finance-sensitive", Flag: "risk_review", Reason: "business rule finance-sensitive after 1 × rate_limited"}

// TestRiskReviewTakesOneDecision: a bad decision is refused naming it, the
// first good one ends the review; one sent with it does not change it
// (the dev-server test shows a later one refused, naming the first).
func TestRiskReviewTakesOneDecision(t *testing.T) {
	env := reviewEnv()
	var bad, firstErr, secondErr error
	var first, ignored workflows.ReviewResult
	env.RegisterDelayedCallback(func() { decide(env, workflows.ReviewDecision{Decision: "maybe"}, &ignored, &bad) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		decide(env, workflows.ReviewDecision{Decision: workflows.DecisionReject, Reviewer: "bob", Note: "unknown payee"}, &first, &firstErr)
		decide(env, workflows.ReviewDecision{Decision: workflows.DecisionApprove, Reviewer: "carol"}, &ignored, &secondErr)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.ReviewWorkflowName, reviewIn)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.ErrorContains(t, bad, `decision must be "approve" or "reject", got "maybe"`)
	require.NoError(t, firstErr)
	if secondErr != nil { // refused, when it reached the handler
		require.ErrorContains(t, secondErr, "call llm-1 was already reviewed: rejected by bob")
	}
	require.Equal(t, workflows.ReviewRejected, first.State)
	var res workflows.ReviewResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "rejected by bob", res.Outcome())
	require.Equal(t, "unknown payee", res.Note)
	require.Equal(t, "finance-sensitive", res.RuleID)
}

// TestRiskReviewExpires: no decision within the timeout ends it expired.
func TestRiskReviewExpires(t *testing.T) {
	env := reviewEnv()
	in := reviewIn
	in.Timeout = 48 * time.Hour
	env.ExecuteWorkflow(workflows.ReviewWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	var res workflows.ReviewResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, workflows.ReviewExpired, res.State)
}
