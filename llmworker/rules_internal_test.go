package llmworker

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
)

// TestRuleStatesGate: the scenarios of the policy's rules are followed
// from the start, those of calls matching a rule without a scenario once
// seen (at most maxLearnedScenarios); a rule is off only where its
// scenario's learner said so.
func TestRuleStatesGate(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Rules = []config.Rule{
		{ID: "refund", Scenario: " Shop ", Keywords: []string{"refund"}, Action: config.RuleSafeMessage},
		{ID: "any", Keywords: []string{"x"}, Action: config.RuleNoRetry},
	}
	s := NewRuleStates(nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Equal(t, []string{"shop"}, s.follow)
	s.off["shop"] = []string{"refund"}
	require.False(t, s.Gate("SHOP", "refund"))
	require.True(t, s.Gate("shop", "other"))
	require.True(t, s.Gate("travel", "refund"), "another scenario's learner decides there")
	require.True(t, s.Gate("", "any"))
	require.Equal(t, []string{"shop", "travel", "_none"}, s.follow)
	for i := range 2 * maxLearnedScenarios {
		s.Gate(fmt.Sprint("s", i), "any")
	}
	require.Len(t, s.follow, maxLearnedScenarios)
}
