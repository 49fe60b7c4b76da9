package llmworkflow_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

// The topics of StreamingAsk's own stream: the call's items, and the
// agent's word after the turn.
const (
	topicAnswer = "answer"
	topicAgent  = "agent"
)

// StreamingAsk is an agent workflow that streams to its own users: it
// hosts a workflow stream, has its turn's call republished there, says
// "turn over" after it, and lingers for its readers before it returns.
func StreamingAsk(ctx workflow.Context, in AskInput) (workflows.CallResult, error) {
	stream, err := workflowstreams.NewWorkflowStream(ctx, nil)
	if err != nil {
		return workflows.CallResult{}, err
	}
	res, err := llmworkflow.Call(ctx, in.Request, llmworkflow.WithTaskQueue(in.CallsQueue),
		llmworkflow.WithDeltasOn(stream, topicAnswer))
	if err != nil {
		return res, err
	}
	_ = stream.Topic(topicAgent).Publish("turn over")
	_ = stream.Drain(ctx, time.Second)
	return res, nil
}

// arrival is one item of the agent's stream and when the reader got it.
type arrival struct {
	at    time.Time
	topic string
	item  llmworkflow.StreamItem
}

// An agent workflow's user, subscribed to the agent's own stream, gets the
// call's text live while the call runs (a 120-token answer at llmsim's 40
// tokens a second: about 3 s), in order, each byte once, adding up to the
// CallResult's content, then the done event, then what the agent published
// after the turn. The test logs what the parent's history paid for it.
func TestIntegrationDeltasOnAgentStream(t *testing.T) {
	srv := shared.Server(t)
	c := srv.Client()
	_, callsQueue, agentQueue := startWorkers(t, c, StreamingAsk, Ask)

	req := workflows.CallRequest{UserID: "u-" + uuid.NewString()[:8], SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{{Role: "system", Content: "You are a support agent."},
			{Role: "user", Content: "[[sim tokens=120]] Where is my order 12?"}}}
	agentID := "agent-" + uuid.NewString()[:8]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: agentID, TaskQueue: agentQueue}, StreamingAsk,
		AskInput{CallsQueue: callsQueue, Request: req})
	require.NoError(t, err)

	// The agent's user: subscribed to the agent's stream, not the call's.
	var (
		mu   sync.Mutex
		got  []arrival
		done = make(chan error, 1)
	)
	go func() {
		dc := converter.GetDefaultDataConverter()
		sc := workflowstreams.NewClient(c, agentID, workflowstreams.Options{})
		for it, err := range sc.Subscribe(ctx, workflowstreams.SubscribeOptions{Topics: []string{topicAnswer, topicAgent}}) {
			if err != nil {
				done <- err
				return
			}
			a := arrival{at: time.Now(), topic: it.Topic}
			if it.Topic == topicAnswer {
				if err := dc.FromPayload(it.Data, &a.item); err != nil {
					done <- err
					return
				}
			}
			mu.Lock()
			got = append(got, a)
			mu.Unlock()
		}
		done <- nil
	}()

	var res workflows.CallResult
	require.NoError(t, run.Get(ctx, &res))
	require.NoError(t, <-done, "the subscription ends when the agent closes")
	require.Equal(t, workflows.SourceModel, res.Source)
	require.Len(t, res.Attempts, 1)
	require.Greater(t, len(res.Content), 200, "a long answer")

	desc, err := c.DescribeWorkflowExecution(ctx, res.RequestID, "")
	require.NoError(t, err)
	callInfo := desc.GetWorkflowExecutionInfo()
	require.Equal(t, agentID, callInfo.GetParentExecution().GetWorkflowId())
	callEnd := callInfo.GetCloseTime().AsTime()

	mu.Lock()
	defer mu.Unlock()
	var (
		ans        llmworkflow.Answer
		deltas     []arrival
		doneAt     = -1
		turnOverAt = -1
		lastOffset = int64(-1)
		lastAt     = -1
		sum        int
	)
	for i, a := range got {
		if a.topic == topicAgent {
			turnOverAt = i
			continue
		}
		it := a.item
		require.Equal(t, res.RequestID, it.Call)
		require.GreaterOrEqual(t, it.Offset, int64(0), "live, from the call's stream, not its result")
		if it.Delta != nil {
			// The pieces of a live attempt share its live event's offset.
			require.GreaterOrEqual(t, it.Offset, lastOffset, "in the call's order")
		} else {
			require.Greater(t, it.Offset, lastOffset, "in the call's order")
		}
		lastOffset = it.Offset
		if it.Delta != nil {
			require.Greater(t, it.At, lastAt, "each piece after the one before")
			require.Equal(t, len(ans.Text), it.At, "no gap, no repeat")
			lastAt = it.At
			sum += len(it.Delta.Text)
			deltas = append(deltas, a)
		}
		ans.Add(it)
		if it.Event != nil && it.Event.Type == workflows.EventDone {
			doneAt = i
		}
	}
	require.GreaterOrEqual(t, len(deltas), 3, "the text came in several pieces: %d", len(deltas))
	require.True(t, deltas[0].at.Before(callEnd), "the first piece (%s) came before the call ended (%s)", deltas[0].at.Format(time.RFC3339Nano), callEnd.Format(time.RFC3339Nano))
	require.Less(t, deltas[0].at.Sub(callInfo.GetStartTime().AsTime()), 2*time.Second, "the first piece came while the model was still writing")
	require.Equal(t, res.Content, ans.Text, "the pieces add up to the answer")
	require.Equal(t, len(res.Content), sum, "each byte once")
	require.True(t, ans.Done)
	require.NotNil(t, ans.Result)
	require.Equal(t, res.Source, ans.Result.Source)
	require.Greater(t, doneAt, 0)
	require.Greater(t, turnOverAt, doneAt, "the turn's items all come before what the agent publishes after it")

	// What the parent's history paid.
	parent := historyOf(t, c, agentID)
	child := historyOf(t, c, res.RequestID)
	var fwd llmworkflow.ForwardResult
	byType := map[string]int{}
	for _, ev := range parent {
		byType[ev.GetEventType().String()]++
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &fwd))
		}
	}
	require.Equal(t, len(res.Content), fwd.Bytes)
	require.Equal(t, 1, byType["ActivityTaskScheduled"], "one Forward activity, no Attach")
	require.Equal(t, fwd.Signals, byType["WorkflowExecutionSignaled"], "one signal per batch forwarded")
	types := make([]string, 0, len(byType))
	for k := range byType {
		types = append(types, k)
	}
	sort.Strings(types)
	var parts []string
	for _, k := range types {
		parts = append(parts, k+"="+strconv.Itoa(byType[k]))
	}
	t.Logf("one streamed call of %d bytes in %d pieces (%d items, %d signals forwarded, %d call attempts): parent history %d events, call history %d events",
		len(res.Content), len(deltas), fwd.Items, fwd.Signals, len(res.Attempts), len(parent), len(child))
	t.Logf("parent events by type: %s", strings.Join(parts, " "))
	start := callInfo.GetStartTime().AsTime()
	t.Logf("the call ran %s; the reader had its first piece after %s, its last after %s",
		callEnd.Sub(start).Round(time.Millisecond), deltas[0].at.Sub(start).Round(time.Millisecond), deltas[len(deltas)-1].at.Sub(start).Round(time.Millisecond))

	// The same turn's cost without a reader of the agent's stream, and
	// without WithDeltasOn (another user: another call each).
	for _, tc := range []struct {
		name string
		wf   any
	}{{"WithDeltasOn, no reader", StreamingAsk}, {"without WithDeltasOn", Ask}} {
		r := req
		r.UserID = "u-" + uuid.NewString()[:8]
		id := "agent-" + uuid.NewString()[:8]
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: agentQueue}, tc.wf,
			AskInput{CallsQueue: callsQueue, Request: r})
		require.NoError(t, err)
		var res workflows.CallResult
		require.NoError(t, run.Get(ctx, &res))
		t.Logf("%s: parent history %d events, call history %d events", tc.name, len(historyOf(t, c, id)), len(historyOf(t, c, res.RequestID)))
	}
}

func historyOf(t *testing.T, c client.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	var evs []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}
