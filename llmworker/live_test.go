package llmworker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// historyOf counts the events of call id's history (it waits for the
// call to close) and, among them, the signals.
func (s *stack) historyOf(ctx context.Context, id string) (events, signals int) {
	s.t.Helper()
	iter := s.Client.GetWorkflowHistory(ctx, id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(s.t, err)
		events++
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			signals++
		}
	}
	return events, signals
}

// TestIntegrationLiveTokensStayOutOfTheHistory: a streamed answer's text
// reaches its subscriber live from the worker that generates it, not
// through the call's history: a 2,000-token answer costs the history no
// more events than a 50-token one (within a few), where deltas on the
// workflow stream (stream_deltas, what Workflow Streams subscribers need)
// cost a signal per batch. The text the subscriber got is the answer.
func TestIntegrationLiveTokensStayOutOfTheHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	models := llmsim.DefaultModels()
	for i := range models {
		models[i].TokensPerSecond = 400 // 2,000 tokens in 5 s
	}
	s := newStackWith(t, llmsim.Options{Scenario: &llmsim.Scenario{Name: "fast", Models: models}}, func(c *config.Config) {
		c.Limits.DefaultMaxTokens = 4000
	})
	require.NotEmpty(t, s.Worker.LiveURL(), "the worker serves live text by default")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	run := func(tokens int, deltasOnStream bool) (events, signals int) {
		req := question("[[sim tokens=" + strconv.Itoa(tokens) + "]] Tell me about my order 17.")
		req.StreamDeltas = deltasOnStream
		res, got, ended := s.stream(ctx, req)
		require.Equal(t, res.Content, got.text, "the deltas add up to the content")
		require.Equal(t, tokens, res.Usage.CompletionTokens)
		require.Greater(t, got.deltas, 1, "the text came in several deltas")
		if tokens >= 1000 {
			require.True(t, got.firstDelta.Before(ended.Add(-2*time.Second)), "the first delta came while the model was still generating")
		}
		require.Equal(t, []string{workflows.EventAttemptStarted, workflows.EventDone}, got.events)
		events, signals = s.historyOf(ctx, res.RequestID)
		t.Logf("%d tokens, deltas on the stream %v: %d deltas seen, %d history events, %d signals", tokens, deltasOnStream, got.deltas, events, signals)
		return events, signals
	}
	short, shortSignals := run(50, false)
	long, longSignals := run(2000, false)
	require.LessOrEqual(t, long, short+4, "history events of a 2,000-token answer (%d) against a 50-token one (%d)", long, short)
	require.LessOrEqual(t, longSignals, 2, "one signal per attempt (where to follow it), not one per batch")
	require.Equal(t, shortSignals, longSignals)
	onStream, onStreamSignals := run(2000, true)
	require.Greater(t, onStreamSignals, longSignals+5, "deltas on the stream are a signal per batch")
	require.Greater(t, onStream, long)
}
