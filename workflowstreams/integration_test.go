package workflowstreams_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/workflowstreams"
)

// A Go publisher in an activity, a Go subscriber outside: every item
// arrives once, in order, with its offset, while it is being published,
// and the subscription ends by itself when the workflow completes.
func TestGoPublisherToGoSubscriberLive(t *testing.T) {
	_, c, tq, ctx := setup(t, 2*time.Minute)

	in := StreamInput{Tokens: 120, LiveFirst: 8, Every: 3 * time.Millisecond, Linger: time.Second}
	id := "ws-live-" + uuid.NewString()
	gate := newGate(id, "go")
	run := startWorkflow(t, ctx, c, tq, id, StreamWorkflow, in)

	// A second subscriber reads only "status", from the start.
	statusDone := subscribeInBackground(t, ctx, c, id, workflowstreams.SubscribeOptions{Topics: []string{"status"}}, nil, "")

	got, _, err := subscribeAll(t, ctx, c, id, workflowstreams.SubscribeOptions{}, gate, "go")
	require.NoError(t, err, "the subscription ends cleanly when the workflow completes")
	require.Equal(t, wantStream(in), got)

	var result string
	require.NoError(t, run.Get(ctx, &result), "the caller reads the result after the stream ended")
	require.Equal(t, "published 122", result)

	st := <-statusDone
	require.NoError(t, st.err)
	require.Equal(t, []received{{0, "status", "started"}, {121, "status", "done"}}, st.items)

	// Batching: 120 items went out in far fewer signals.
	events := history(t, ctx, c, id)
	types := countTypes(events)
	signals := types[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
	t.Logf("history: %d events for 122 items: %d publish signals, %d polls accepted, %d completed, %d workflow tasks, %d timers",
		len(events), signals, types[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED],
		types[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED], types[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED],
		types[enumspb.EVENT_TYPE_TIMER_STARTED])
	require.GreaterOrEqual(t, signals, in.LiveFirst, "each live item was its own batch")
	require.Less(t, signals, in.LiveFirst+20, "the 112 quick items were batched")
}

// A subscriber that starts after the workflow completed ends at once,
// without an error and without items.
func TestSubscribeAfterCompletion(t *testing.T) {
	_, c, tq, ctx := setup(t, time.Minute)

	id := "ws-after-" + uuid.NewString()
	run := startWorkflow(t, ctx, c, tq, id, StreamWorkflow, StreamInput{Tokens: 3})
	require.NoError(t, run.Get(ctx, nil))

	start := time.Now()
	got, _, err := subscribeAll(t, ctx, c, id, workflowstreams.SubscribeOptions{}, nil, "")
	require.NoError(t, err)
	require.Empty(t, got)
	require.Less(t, time.Since(start), 10*time.Second)
}

// What the stream costs in history: events per publish batch, per poll that
// finds items, per poll that parks, per poll the validator refuses.
func TestHistoryCostPerBatchAndPoll(t *testing.T) {
	_, c, tq, ctx := setup(t, 2*time.Minute)

	id := "ws-cost-" + uuid.NewString()
	startWorkflow(t, ctx, c, tq, id, HostWorkflow)
	n := len(history(t, ctx, c, id))
	delta := func() (int, map[enumspb.EventType]int) {
		ev := history(t, ctx, c, id)
		d := countTypes(ev[n:])
		k := len(ev) - n
		n = len(ev)
		return k, d
	}

	pub := workflowstreams.NewClient(c, id, workflowstreams.Options{})
	const batches = 3
	for i := range batches {
		pub.Topic("t").Publish(i, true)
		require.NoError(t, pub.Flush(ctx))
		history(t, ctx, c, id)
	}
	perBatch, bt := delta()
	t.Logf("%d batches: %d events %v", batches, perBatch, bt)
	require.Equal(t, batches, bt[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED])
	require.Equal(t, 4*batches, perBatch, "a batch costs a signal and a workflow task")

	poll := func(from int64, stage client.WorkflowUpdateStage) (client.WorkflowUpdateHandle, error) {
		return c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: workflowstreams.PollUpdateName, WaitForStage: stage,
			Args: []any{workflowstreams.PollInput{Topics: []string{}, FromOffset: from}},
		})
	}
	h, err := poll(0, client.WorkflowUpdateStageCompleted)
	require.NoError(t, err)
	var res workflowstreams.PollResult
	require.NoError(t, h.Get(ctx, &res))
	require.Len(t, res.Items, batches)
	ready, rt := delta()
	t.Logf("a poll with items ready: %d events %v", ready, rt)
	require.Equal(t, 5, ready, "a workflow task, accepted, completed")

	parked, err := poll(batches, client.WorkflowUpdateStageAccepted)
	require.NoError(t, err)
	park, pt := delta()
	t.Logf("a poll that parks: %d events %v", park, pt)
	require.Equal(t, 4, park, "a workflow task, accepted")
	pub.Topic("t").Publish("wakes it", true)
	require.NoError(t, pub.Flush(ctx))
	require.NoError(t, parked.Get(ctx, &res))
	require.Len(t, res.Items, 1)
	woke, wt := delta()
	t.Logf("the batch that answers it: %d events %v", woke, wt)
	require.Equal(t, 5, woke, "the parked poll completes in the batch's workflow task: one event more")

	if h, err = poll(-1, client.WorkflowUpdateStageCompleted); err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "refused: %v", err)
	refused, _ := delta()
	t.Logf("a poll the validator refuses: %d events", refused)
	require.Zero(t, refused)

	finish(t, ctx, c, id)
}

// A subscriber follows the stream across continue-as-new: the state moves to
// the next run and polling goes on from the same offset.
func TestSubscriberFollowsContinueAsNew(t *testing.T) {
	_, c, tq, ctx := setup(t, 2*time.Minute)

	in := ChainInput{Runs: 3, PerRun: 4}
	id := "ws-chain-" + uuid.NewString()
	startWorkflow(t, ctx, c, tq, id, ChainWorkflow, in)
	got, _, err := subscribeAll(t, ctx, c, id, workflowstreams.SubscribeOptions{}, nil, "")
	require.NoError(t, err)
	require.Equal(t, wantChain(in), got)
	var result string
	require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, &result))
	require.Equal(t, "runs 3 offset 12", result)
}

// An activity's last batch and its completion reach the workflow in one
// workflow task (the workflow worker is down while they happen): the batch
// still comes before what the workflow publishes when the activity returns.
func TestActivitysLastBatchComesBeforeTheWorkflowsNextItem(t *testing.T) {
	_, c, ctx := connect(t, 2*time.Minute)

	tq, actTQ := "ws-order-"+uuid.NewString(), "ws-order-act-"+uuid.NewString()
	newWorkflowWorker := func() worker.Worker {
		w := worker.New(c, tq, worker.Options{})
		w.RegisterWorkflow(OrderWorkflow)
		require.NoError(t, w.Start())
		return w
	}
	aw := worker.New(c, actTQ, worker.Options{})
	aw.RegisterActivity(OneItem)
	require.NoError(t, aw.Start())
	defer aw.Stop()

	id := "ws-order-" + uuid.NewString()
	hold := oneItemHold{started: make(chan struct{}), release: make(chan struct{})}
	oneItemHolds.Store(id, hold)
	w1 := newWorkflowWorker()
	startWorkflow(t, ctx, c, tq, id, OrderWorkflow, actTQ)
	select {
	case <-hold.started:
	case <-ctx.Done():
		t.Fatal("OneItem did not start")
	}
	w1.Stop() // nothing handles workflow tasks now

	close(hold.release)
	waitForEvent(t, ctx, c, id, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
	var pending []enumspb.EventType // since the last workflow task completed
	for _, e := range historyNow(t, ctx, c, id) {
		pending = append(pending, e.GetEventType())
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			pending = nil
		}
	}
	// Both wait for the same workflow task: no task completed between them.
	// A task may have started and timed out in between (the stopped worker's
	// last poll can still be handed one); that does not split the batch, as
	// the next task's history runs from the last completed task.
	require.Subset(t, pending, []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED},
		"the batch's signal and the activity's completion wait for the same workflow task")

	w2 := newWorkflowWorker()
	defer w2.Stop()
	got := subscribeUntil(t, ctx, c, id, workflowstreams.SubscribeOptions{}, func(got []received) bool {
		return got[len(got)-1].Topic == "wf"
	})
	require.Equal(t, []received{{0, "act", "from the activity"}, {1, "wf", "after"}}, got)
	finish(t, ctx, c, id)
}

func waitForEvent(t *testing.T, ctx context.Context, c client.Client, id string, want enumspb.EventType) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range historyNow(t, ctx, c, id) {
			if e.GetEventType() == want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %v event in %s", want, id)
}
