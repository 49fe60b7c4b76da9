package activities

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// TestSummaryThatCannotFitIsNotAsked: dropped rounds that overflow the
// summary model's own context window are not sent to it (it would refuse
// them, after taking a retry token and time): no summary, a reason that
// says why, no request.
func TestSummaryThatCannotFitIsNotAsked(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "not expected", http.StatusInternalServerError)
	}))
	t.Cleanup(upstream.Close)
	cfg := config.DefaultConfig()
	cfg.OverrideEndpoint(upstream.URL, "")
	m, ok := cfg.SummaryModel()
	require.True(t, ok)

	msgs := []request.Message{{Role: request.RoleSystem, Content: "You are a support agent."}}
	round := strings.Repeat("my order number is 4711 and it has not arrived yet ", 40) // about 500 tokens
	for i := range 12 {
		msgs = append(msgs, request.Message{Role: request.RoleUser, Content: fmt.Sprintf("round %d: %s", i, round)},
			request.Message{Role: request.RoleAssistant, Content: "noted"})
	}
	msgs = append(msgs, request.Message{Role: request.RoleUser, Content: "where is it?"})

	a, err := New(Options{Config: cfg})
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.Summarize, SummarizeInput{Request: request.Request{Messages: msgs, SessionID: "s-1"}, Keep: 3, Attempt: 2})
	require.NoError(t, err)
	var sum Summary
	require.NoError(t, v.Get(&sum))
	require.Empty(t, sum.Text)
	require.Contains(t, sum.Reason, fmt.Sprintf("over %s's context window (%d)", m.Name, m.ContextWindow))
	require.Zero(t, hits.Load(), "the summary model was asked for what cannot fit its window")
}
