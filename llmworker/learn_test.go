package llmworker_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/policies/rules"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/workflows"
)

// learningStack is a stack whose policy has, for a scenario of the test's
// own (learners are per scenario, on the shared dev server), an admission
// rule "refund" (safe message) and a pinned hand-off "fire", with a short
// learn.refresh.
func learningStack(t *testing.T) (*stack, string) {
	scenario := "shop-" + uuid.NewString()[:8]
	s := newStack(t, func(c *config.Config) {
		c.Learn.Refresh = config.Duration(200 * time.Millisecond)
		// Any scenario: a test asks in a fresh one that no rule names.
		c.Request.Scenarios = append(c.Request.Scenarios, config.AnyScenario)
		c.Rules = append([]config.Rule{
			{ID: "refund", Scenario: scenario, Keywords: []string{"refund"}, Action: config.RuleSafeMessage, MinPrecision: 0.5,
				Message: "Refunds are handled on the refunds page."},
			{ID: "fire", Scenario: scenario, Keywords: []string{"on fire"}, Action: config.RuleHandoff, Pinned: true,
				Message: "A person takes over now."},
		}, c.Rules...)
	})
	return s, scenario
}

func (s *stack) ask(scenario, q string) workflows.CallResult {
	s.t.Helper()
	req := question(q)
	req.Scenario = scenario
	return s.Call(req)
}

func (s *stack) feedback(id string, o rules.Outcome) workflows.FeedbackResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Calls.Feedback(ctx, id, string(o))
	require.NoError(s.t, err)
	return res
}

func (s *stack) rules(scenario string) workflows.RulesView {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := s.Calls.Rules(ctx, scenario)
	require.NoError(s.t, err)
	return v
}

func ruleOf(v workflows.RulesView, id string) workflows.RuleView {
	for _, r := range v.Rules {
		if r.ID == id {
			return r
		}
	}
	return workflows.RuleView{}
}

// askUntil asks q until pred holds for the answer (the workers' states
// refresh every 200 ms), at most 10 s.
func (s *stack) askUntil(scenario, q string, pred func(workflows.CallResult) bool) workflows.CallResult {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		res := s.ask(scenario, fmt.Sprintf("%s (try %d)", q, i))
		if pred(res) || time.Now().After(deadline) {
			return res
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIntegrationRuleLearnsFromFeedback scripts what users do: the refund
// rule answers 30 calls and users complain about each, so the learner
// turns it off; the next refund question is answered by the model, with
// the rule in shadow; users abandon 30 such calls (they needed the rule),
// so it comes back and answers again. The learner's query and the calls'
// results show each step.
func TestIntegrationRuleLearnsFromFeedback(t *testing.T) {
	s, scenario := learningStack(t)

	var last workflows.FeedbackResult
	for i := range 30 {
		res := s.ask(scenario, fmt.Sprintf("I want a refund for order %d", i))
		require.Equal(t, "refund", res.RuleID, "the rule fires while on")
		require.Equal(t, workflows.SourceRule, res.Source)
		last = s.feedback(res.RequestID, rules.Complaint)
		require.Equal(t, workflows.LearnerScenario(scenario), last.Scenario)
		require.Equal(t, []rules.Counted{{Rule: "refund", Fired: true, Judgment: "bad", InWindow: true, State: map[bool]rules.State{true: rules.On, false: rules.Off}[i < 29]}}, last.Counted)
	}
	require.Len(t, last.Changes, 1)
	require.Equal(t, rules.Off, last.Changes[0].To)
	v := s.rules(scenario)
	r := ruleOf(v, "refund")
	require.Equal(t, "off", r.State)
	require.Equal(t, 30, r.Fired)
	require.Contains(t, r.Reason, "precision 0.03 < 0.50 over its last 30 feedbacks")

	off := s.askUntil(scenario, "I want a refund", func(r workflows.CallResult) bool { return r.RuleID == "" })
	require.Empty(t, off.RuleID, "an off rule does not fire")
	require.Equal(t, workflows.SourceModel, off.Source, "the model answers")
	require.Equal(t, []string{"refund"}, off.ShadowRules, "the rule would have fired")

	// Users served by the model's answers abandon: they needed the rule.
	for i := range 30 {
		res := s.ask(scenario, fmt.Sprintf("Where is my refund for order %d?", i))
		require.Empty(t, res.RuleID)
		require.Equal(t, []string{"refund"}, res.ShadowRules)
		last = s.feedback(res.RequestID, rules.Abandoned)
		require.Equal(t, "good", last.Counted[0].Judgment)
	}
	require.Len(t, last.Changes, 1)
	require.Equal(t, rules.On, last.Changes[0].To)
	r = ruleOf(s.rules(scenario), "refund")
	require.Equal(t, "on", r.State)
	require.Equal(t, 2, r.Changes)
	require.Equal(t, 30, r.Shadow, "feedbacks in shadow (the first shadow call had none)")

	back := s.askUntil(scenario, "I want a refund", func(r workflows.CallResult) bool { return r.RuleID != "" })
	require.Equal(t, "refund", back.RuleID, "the rule fires again")
	require.Equal(t, "Refunds are handled on the refunds page.", back.Content)
	require.Empty(t, back.ShadowRules)

	replayLearner(t, s, scenario)
}

// replayLearner replays the learner's history so far against this build's
// RulesLearner (updates, the policy's local activity, memo upserts); with
// LEARNER_HISTORY_OUT set it also writes the history there as JSON (how
// workflows/testdata/learner.json was recorded).
func replayLearner(t *testing.T, s *stack, scenario string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []*historypb.HistoryEvent
	it := s.Client.GetWorkflowHistory(ctx, workflows.LearnerID(scenario), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	h := &historypb.History{Events: events}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.RulesLearner, workflow.RegisterOptions{Name: workflows.LearnerWorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "the learner's history does not replay")
	if out := os.Getenv("LEARNER_HISTORY_OUT"); out != "" {
		b, err := replay.Marshal(h)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, b, 0o644))
	}
}

// TestIntegrationPinnedRuleIsNeverTurnedOff: 35 complaints about the
// pinned hand-off leave it pinned (reported below its threshold) and it
// still hands off.
func TestIntegrationPinnedRuleIsNeverTurnedOff(t *testing.T) {
	s, scenario := learningStack(t)
	for i := range 35 {
		res := s.ask(scenario, fmt.Sprintf("My kitchen is on fire (%d)", i))
		require.Equal(t, "fire", res.RuleID)
		fb := s.feedback(res.RequestID, rules.Complaint)
		require.Empty(t, fb.Changes)
	}
	r := ruleOf(s.rules(scenario), "fire")
	require.Equal(t, "pinned", r.State)
	require.True(t, r.Below, "the learner reports it below its threshold")
	require.Equal(t, 35, r.Fired)
	time.Sleep(500 * time.Millisecond) // two refreshes
	res := s.ask(scenario, "My kitchen is on fire again")
	require.Equal(t, "fire", res.RuleID)
	require.Equal(t, workflows.SourceHandoff, res.Source)
}

// TestIntegrationFeedbackRefusals: feedback needs a known outcome and a
// call that answered; a second feedback for a call is not counted again;
// a call no rule matched starts no learner.
func TestIntegrationFeedbackRefusals(t *testing.T) {
	s, scenario := learningStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res := s.ask(scenario, "I want a refund")
	_, err := s.Calls.Feedback(ctx, res.RequestID, "delighted")
	require.ErrorIs(t, err, llmclient.ErrInvalidFeedback)
	require.ErrorContains(t, err, `unknown outcome "delighted": want one of resolved, abandoned, handoff_requested, complaint`)

	_, err = s.Calls.Feedback(ctx, "llm-"+uuid.NewString(), "resolved")
	require.ErrorIs(t, err, llmclient.ErrCallNotFound)

	first := s.feedback(res.RequestID, rules.Resolved)
	require.False(t, first.Duplicate)
	again := s.feedback(res.RequestID, rules.Complaint)
	require.True(t, again.Duplicate)
	require.Equal(t, rules.Resolved, again.Previous)
	r := ruleOf(s.rules(scenario), "refund")
	require.Equal(t, rules.Counts{Resolved: 1}, r.FiredCounts)

	plain := s.ask("quiet-"+uuid.NewString()[:8], "Where is my order?")
	fb := s.feedback(plain.RequestID, rules.Resolved)
	require.Empty(t, fb.Counted)
	_, err = s.Calls.Rules(ctx, plain.RequestID)
	require.Error(t, err, "no learner for a call no rule matched")

	// A call no worker takes is still running.
	idle := &llmclient.Client{Temporal: s.Client, TaskQueue: "nobody-" + uuid.NewString()[:8]}
	run, err := idle.Start(ctx, workflows.CallRequest{UserID: "u", Scenario: scenario,
		Messages: []request.Message{{Role: "user", Content: "refund?"}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Client.TerminateWorkflow(context.Background(), run.GetID(), "", "test done") })
	_, err = s.Calls.Feedback(ctx, run.GetID(), "resolved")
	require.ErrorIs(t, err, llmclient.ErrCallRunning)
	require.ErrorContains(t, err, "send feedback once it has")
}
