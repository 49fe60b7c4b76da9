package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

func starterRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out)
	return out.String(), err
}

// TestStarterFeedbackAndRules: an operator sends feedback with `starter
// feedback` and reads the rules with `starter rules`: three complaints
// (learn.min_feedback 3 here) turn the refund rule off, which the third
// feedback's output and the table say; the pinned rule stays pinned.
func TestStarterFeedbackAndRules(t *testing.T) {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendHostPort())
	t.Setenv(codec.EnvKeys, "")
	scenario := "shop-" + uuid.NewString()[:8]
	s := rig.New(t, rig.Options{Client: srv.Client(), TaskQueue: workflows.TaskQueue, Policy: func(cfg *config.Config) {
		cfg.Learn.MinFeedback = 3
		cfg.Rules = append([]config.Rule{
			{ID: "refund", Scenario: scenario, Keywords: []string{"refund"}, Action: config.RuleSafeMessage, Message: "See the refunds page."},
			{ID: "fire", Scenario: scenario, Keywords: []string{"fire"}, Action: config.RuleHandoff, Pinned: true, Message: "A person takes over."},
		}, cfg.Rules...)
	}})
	call := func(q string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := s.Calls.Call(ctx, workflows.CallRequest{UserID: "u-" + uuid.NewString()[:8], Scenario: scenario,
			Messages: []request.Message{{Role: "user", Content: q}}})
		require.NoError(t, err)
		return res.RequestID
	}

	out, err := starterRun(t, "rules")
	require.NoError(t, err)
	require.Contains(t, out, "no rules learner runs yet")

	id := call("refund please")
	_, err = starterRun(t, "feedback", id, "meh")
	require.ErrorContains(t, err, `unknown outcome "meh": want one of resolved, abandoned, handoff_requested, complaint`)
	_, err = starterRun(t, "feedback", id)
	require.ErrorContains(t, err, "a call ID and an outcome are required")

	for i := range 3 {
		if i > 0 {
			id = call("refund please, " + strings.Repeat("really ", i))
		}
		out, err = starterRun(t, "feedback", id, "complaint")
		require.NoError(t, err)
		require.Contains(t, out, "complaint recorded for call "+id+" (scenario "+scenario+")")
		require.Contains(t, out, "refund fired: bad")
	}
	require.Contains(t, out, "changed refund: on → off: precision 0.20 < 0.50 over its last 3 feedbacks")

	out, err = starterRun(t, "feedback", id, "resolved")
	require.NoError(t, err)
	require.Contains(t, out, "already has feedback (complaint): not counted again")

	for _, q := range []string{"fire!", "fire again!"} {
		_, err = starterRun(t, "feedback", call(q), "abandoned")
		require.NoError(t, err)
	}

	out, err = starterRun(t, "rules", "--scenario", scenario)
	require.NoError(t, err)
	t.Logf("starter rules:\n%s", out)
	require.Regexp(t, `(?m)^SCENARIO\s+RULE\s+STATE\s+PRECISION\s+THRESHOLD\s+WINDOW\s+FEEDBACKS\s+FIRED\s+SHADOW\s+CHANGES$`, out)
	require.Regexp(t, `(?m)^`+scenario+`\s+refund\s+off\s+0\.50\s+0\.50\s+0/3\s+3\s+3\s+0\s+1$`, out)
	require.Regexp(t, `(?m)^`+scenario+`\s+fire\s+pinned\s+0\.25\s+0\.50\s+2/3\s+2\s+2\s+0\s+0$`, out)
	require.Contains(t, out, scenario+"/refund off since ")

	all, err := starterRun(t, "rules")
	require.NoError(t, err)
	require.Contains(t, all, scenario+"  ")

	_, err = starterRun(t, "rules", "--scenario", "nobody-"+uuid.NewString()[:8])
	require.ErrorContains(t, err, "no learner for scenario")
}
