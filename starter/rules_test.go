package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestBusinessRulesTable runs each row of docs/rules.md on a
// dev server, a worker with the default policy and llmsim: the failures
// are llmsim's, the rules the shipped ones.
func TestBusinessRulesTable(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	srv, sim := askStack(t)
	lc := &llmclient.Client{Temporal: srv.Client()}
	call := func(t *testing.T, scenario, q string) workflows.CallResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := lc.Call(ctx, workflows.CallRequest{UserID: "u-" + uuid.NewString()[:8], Scenario: scenario,
			Messages: []request.Message{{Role: "user", Content: q}}})
		require.NoError(t, err)
		return res
	}
	upstream := func(res workflows.CallResult) (n int) {
		for _, a := range res.Attempts {
			if a.Status != 0 {
				n++
			}
		}
		return n
	}

	t.Run("medical emergency words hand off before any model call", func(t *testing.T) {
		before := sim.Stats().Totals.Arrivals
		res := call(t, "medical", "I have chest pain and my left arm is numb")
		require.Equal(t, workflows.SourceHandoff, res.Source)
		require.Equal(t, "medical-emergency", res.RuleID)
		require.Empty(t, res.Attempts)
		require.Equal(t, before, sim.Stats().Totals.Arrivals, "no upstream request")
	})

	t.Run("medical urgent words after two truncated answers hand off", func(t *testing.T) {
		res := call(t, "medical", "[[sim fault=length times=2]] My cut keeps bleeding, what should I do?")
		require.Equal(t, workflows.SourceHandoff, res.Source, res.Reason)
		require.Equal(t, "medical-urgent", res.RuleID)
		require.Equal(t, 2, upstream(res), "no third attempt")
		require.Contains(t, res.Reason, "2 × output_truncated")
		require.Equal(t, "urgent_handoff", res.Flag)
	})

	t.Run("the same urgent words answered at once fire nothing", func(t *testing.T) {
		res := call(t, "medical", "My knee has a dull pain after running, should I rest?")
		require.Equal(t, workflows.SourceModel, res.Source)
		require.Empty(t, res.RuleID)
	})

	t.Run("finance sensitive words on a rate limit get the safe message and a review an operator decides", func(t *testing.T) {
		res := call(t, "finance", "[[sim fault=rate_limited retry_after=1s]] Please transfer 200 dollars to my brother")
		require.Equal(t, workflows.SourceRule, res.Source, res.Reason)
		require.Equal(t, "finance-sensitive", res.RuleID)
		require.Contains(t, res.Content, "For your safety")
		require.Equal(t, 1, upstream(res), "no retry after the rate limit")
		require.Equal(t, workflows.ReviewID(res.RequestID), res.Review)

		c := srv.Client()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The call carries the flag; the reviewers' queue lists the review.
		listed := func(query string) []string {
			var ids []string
			require.Eventually(t, func() bool {
				resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
				require.NoError(t, err)
				ids = ids[:0]
				for _, e := range resp.GetExecutions() {
					ids = append(ids, e.GetExecution().GetWorkflowId())
				}
				return len(ids) > 0
			}, 15*time.Second, 200*time.Millisecond, "nothing matches %s", query)
			return ids
		}
		require.Contains(t, listed(`LlmFlag = "risk_review" AND WorkflowType = "LLMCall"`), res.RequestID)
		require.Contains(t, listed(`WorkflowType = "RiskReview" AND ExecutionStatus = "Running" AND LlmReview = "pending"`), res.Review)
		desc, err := c.DescribeWorkflowExecution(ctx, res.Review, "")
		require.NoError(t, err)
		require.Equal(t, workflows.ReviewTaskQueue, desc.GetExecutionConfig().GetTaskQueue().GetName())

		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"review", "list"}, &out))
		require.Contains(t, out.String(), res.RequestID)
		require.Contains(t, out.String(), "finance-sensitive")

		out.Reset()
		require.NoError(t, run(ctx, []string{"review", "approve", "--reviewer", "alice", "--note", "known payee", res.RequestID}, &out))
		require.Contains(t, out.String(), "approved by alice")
		err = run(ctx, []string{"review", "reject", res.RequestID}, &out)
		require.ErrorContains(t, err, "already reviewed: approved by alice")
		err = run(ctx, []string{"review", "maybe", res.RequestID}, &out)
		require.ErrorContains(t, err, `unknown subcommand "maybe"`)

		var rr workflows.ReviewResult
		require.NoError(t, c.GetWorkflow(ctx, res.Review, "").Get(ctx, &rr))
		require.Equal(t, workflows.ReviewApproved, rr.State)
		require.Equal(t, "known payee", rr.Note)
		require.Contains(t, rr.Question, "transfer 200 dollars", "the reviewer sees what was asked")
		require.Contains(t, listed(`WorkflowType = "RiskReview" AND LlmReview = "approved"`), res.Review)
	})

	t.Run("homework over the window is answered in three steps", func(t *testing.T) {
		res := call(t, "education", "[[sim fault=context_length_exceeded]] My homework: a train leaves at 3 pm at 80 km/h. "+
			"Its town is 240 km away. When does it arrive?")
		require.Equal(t, workflows.SourceSteps, res.Source, res.Reason)
		require.Equal(t, "education-steps", res.RuleID)
		require.Len(t, res.Steps, 3)
		require.True(t, strings.HasPrefix(res.Content, "This question was answered in 3 steps."), res.Content)
		for i, s := range res.Steps {
			require.Equal(t, fmt.Sprintf("%s/step-%d", res.RequestID, i+1), s.CallID)
			require.Contains(t, []workflows.Source{workflows.SourceModel, workflows.SourceFallbackModel}, s.Source, "step %d: %+v", i+1, s)
			require.Contains(t, res.Content, s.Content)
			// Each step is a call of its own, in history and in the list.
			var child workflows.CallResult
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			require.NoError(t, srv.Client().GetWorkflow(ctx, s.CallID, "").Get(ctx, &child))
			cancel()
			require.Equal(t, s.Content, child.Content)
		}
		require.Contains(t, res.Steps[1].Question, "240 km")
		require.Contains(t, res.Reason, "answered in 3 steps, 3 by a model; split by llama-8b", "the smallest rung split it")
		require.Greater(t, res.Usage.CompletionTokens, 0, "the steps' tokens are the call's")
	})
}
