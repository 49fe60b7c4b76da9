package workflows_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/rules"
	"github.com/durable-llm/durable-llm/workflows"
)

func learnerPolicy() *config.Config {
	cfg := config.DefaultConfig()
	cfg.Learn.MinFeedback = 5
	cfg.Rules = append([]config.Rule{
		{ID: "shop-refund", Scenario: "shop", Keywords: []string{"refund"}, Action: config.RuleSafeMessage, Message: "Refunds: see the help page."},
		{ID: "shop-emergency", Scenario: "shop", Keywords: []string{"fire"}, Action: config.RuleHandoff, Pinned: true, Message: "A person takes over."},
	}, cfg.Rules...)
	return cfg
}

// learnerEnv runs a RulesLearner for scenario shop under learnerPolicy.
// send sends a feedback; its outcome is in the map returned by the
// callback of a later step (the environment runs the update in between).
type learnerEnv struct {
	*testsuite.TestWorkflowEnvironment
	results map[string]workflows.FeedbackResult
	errs    map[string]error
	steps   int
}

func newLearnerEnv(t *testing.T) *learnerEnv {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts, err := activities.New(activities.Options{Config: learnerPolicy()})
	require.NoError(t, err)
	env.RegisterActivity(acts)
	env.RegisterWorkflowWithOptions(workflows.RulesLearner, workflow.RegisterOptions{Name: workflows.LearnerWorkflowName})
	return &learnerEnv{TestWorkflowEnvironment: env, results: map[string]workflows.FeedbackResult{}, errs: map[string]error{}}
}

// send sends fb under update ID id.
func (e *learnerEnv) send(id string, fb rules.Feedback) {
	e.UpdateWorkflow(workflows.UpdateFeedback, id, &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { e.errs[id] = err },
		OnAccept:   func() {},
		OnComplete: func(v any, err error) { e.errs[id] = err; e.results[id], _ = v.(workflows.FeedbackResult) },
	}, fb)
}

// then runs step after the previous ones (a second of workflow time each).
func (e *learnerEnv) then(step func()) {
	e.steps++
	e.RegisterDelayedCallback(step, time.Duration(e.steps)*time.Second)
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.RulesView {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.QueryRules)
	require.NoError(t, err)
	var view workflows.RulesView
	require.NoError(t, v.Get(&view))
	return view
}

// TestRulesLearnerMovesARuleAndBack: five complaints on calls the refund
// rule fired on turn it off (the pinned rule takes the same and stays
// pinned); five abandoned calls it matched in shadow turn it back on. The
// query shows each step; a second feedback for a call changes nothing;
// bad outcomes and missing call IDs are refused by the validator.
func TestRulesLearnerMovesARuleAndBack(t *testing.T) {
	env := newLearnerEnv(t)
	n := 0
	fb := func(o rules.Outcome, fired string, shadow ...string) rules.Feedback {
		n++
		return rules.Feedback{CallID: fmt.Sprintf("llm-%d", n), Outcome: o, Fired: fired, Shadow: shadow}
	}
	env.then(func() {
		v := query(t, env.TestWorkflowEnvironment)
		require.Equal(t, "shop", v.Scenario)
		require.Equal(t, 5, v.MinFeedback)
		require.Equal(t, []string{"shop-refund", "shop-emergency"}, []string{v.Rules[0].ID, v.Rules[1].ID})
		require.Equal(t, "on", v.Rules[0].State)
		require.Equal(t, "pinned", v.Rules[1].State)
		env.send("bad-outcome", rules.Feedback{CallID: "llm-x", Outcome: "happy"})
		env.send("no-call", rules.Feedback{Outcome: rules.Resolved})
		for range 5 {
			env.send(fmt.Sprint("refund-", n), fb(rules.Complaint, "shop-refund"))
			env.send(fmt.Sprint("pinned-", n), fb(rules.Complaint, "shop-emergency"))
		}
	})
	env.then(func() {
		err := env.errs["bad-outcome"]
		require.ErrorContains(t, err, `unknown outcome "happy": want one of resolved, abandoned, handoff_requested, complaint`)
		require.True(t, workflows.IsUnknownOutcome(err))
		require.ErrorContains(t, env.errs["no-call"], "call_id is required")
		for i := 1; i <= 9; i += 2 {
			require.NoError(t, env.errs[fmt.Sprint("refund-", i-1)])
			require.Equal(t, i == 9, len(env.results[fmt.Sprint("refund-", i-1)].Changes) == 1, "feedback %d", i)
		}
		v := query(t, env.TestWorkflowEnvironment)
		require.Equal(t, "off", v.Rules[0].State)
		require.True(t, v.Off("shop-refund"))
		require.Contains(t, v.Rules[0].Reason, "precision 0.14 < 0.50 over its last 5 feedbacks")
		require.Equal(t, "pinned", v.Rules[1].State)
		require.True(t, v.Rules[1].Below)

		env.send("dup", rules.Feedback{CallID: "llm-1", Outcome: rules.Resolved, Fired: "shop-refund"})
		for range 5 {
			env.send(fmt.Sprint("shadow-", n), fb(rules.Abandoned, "", "shop-refund"))
		}
		env.send("gone", fb(rules.Resolved, "gone"))
	})
	env.then(func() {
		require.True(t, env.results["dup"].Duplicate)
		require.Equal(t, rules.Complaint, env.results["dup"].Previous)
		require.Equal(t, []string{"gone"}, env.results["gone"].Unknown)
		v := query(t, env.TestWorkflowEnvironment)
		require.Equal(t, "on", v.Rules[0].State)
		require.Equal(t, 2, v.Rules[0].Changes)
		require.Equal(t, 5, v.Rules[0].Fired)
		require.Equal(t, 5, v.Rules[0].Shadow)
		require.Equal(t, 0, v.Rules[0].Window)
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(workflows.LearnerWorkflowName, workflows.LearnerInput{Scenario: "shop"})
	require.True(t, env.IsWorkflowCompleted())
	require.Len(t, env.results, 17)
}

// TestRulesLearnerContinuesAsNewWithItsLedger: after FeedbacksPerRun
// feedbacks the learner continues as new, carrying every rule's record.
func TestRulesLearnerContinuesAsNewWithItsLedger(t *testing.T) {
	env := newLearnerEnv(t)
	env.then(func() {
		for i := range 3 {
			env.send(fmt.Sprint(i), rules.Feedback{CallID: fmt.Sprint("c", i), Outcome: rules.Complaint, Fired: "shop-refund"})
		}
	})
	env.ExecuteWorkflow(workflows.LearnerWorkflowName, workflows.LearnerInput{Scenario: "shop", FeedbacksPerRun: 3})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.True(t, workflow.IsContinueAsNewError(err), "%v", err)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	var next workflows.LearnerInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, "shop", next.Scenario)
	require.Equal(t, 3, next.FeedbacksPerRun)
	require.Equal(t, rules.Counts{Complaint: 3}, next.Ledger.Rules[0].Fired)
	require.Len(t, next.Ledger.Calls, 3)
}

func TestLearnerID(t *testing.T) {
	require.Equal(t, "rules-learner/shop", workflows.LearnerID(" Shop "))
	require.Equal(t, "rules-learner/_none", workflows.LearnerID(""))
}

// TestReplayLearnerHistory replays a recorded learner (60 feedbacks: a
// rule turned off by complaints and back on by shadow feedback, with the
// policy's local activity and two memo upserts) against this build's
// RulesLearner. Recorded by llmworker's TestIntegrationRuleLearnsFromFeedback
// with LEARNER_HISTORY_OUT=workflows/testdata/learner.json.
func TestReplayLearnerHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.RulesLearner, workflow.RegisterOptions{Name: workflows.LearnerWorkflowName})
	err := r.ReplayWorkflowHistoryFromJSONFile(quietLog, "testdata/learner.json")
	require.NoError(t, err, "the recorded learner no longer replays against RulesLearner: guard the change with workflow.GetVersion (learners run for ever)")
}
