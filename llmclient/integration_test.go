package llmclient_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

func ask(key, model, question string) workflows.CallRequest {
	return workflows.CallRequest{UserID: "u-1", Model: model, IdempotencyKey: key,
		Messages: []request.Message{{Role: request.RoleUser, Content: question}}}
}

// withWorker runs a worker against llmsim on a task queue of the test's
// own, and returns the queue.
func withWorker(t *testing.T, c client.Client) string {
	t.Helper()
	return rig.New(t, rig.Options{Client: c, QueuePrefix: "llmclient-"}).TaskQueue
}

// TestReusedKeyWithAnotherRequestIsRefused: an explicit idempotency key
// names one request. The same key with another model or question is
// refused with a KeyReusedError that names the key, by Start (no worker
// needed: the fingerprint is in the memo from the start) and by Call
// (which must not hand back the first request's answer); the same request
// again attaches.
func TestReusedKeyWithAnotherRequestIsRefused(t *testing.T) {
	c := shared.Server(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("start", func(t *testing.T) {
		lc := &llmclient.Client{Temporal: c, TaskQueue: "nobody-polls-" + uuid.NewString()[:8]}
		key := "order-7-" + uuid.NewString()[:8]
		first, err := lc.Start(ctx, ask(key, "", "Where is order 7?"))
		require.NoError(t, err)
		again, err := lc.Start(ctx, ask(key, "", "Where is order 7?"))
		require.NoError(t, err, "the same request attaches")
		require.Equal(t, first.GetID(), again.GetID())
		for name, req := range map[string]workflows.CallRequest{
			"other question": ask(key, "", "Where is order 8?"),
			"other model":    ask(key, "qwen-14b", "Where is order 7?"),
		} {
			_, err := lc.Start(ctx, req)
			var kr *llmclient.KeyReusedError
			require.ErrorAs(t, err, &kr, name)
			require.ErrorIs(t, err, llmclient.ErrKeyReused)
			require.Equal(t, key, kr.Key)
			require.Equal(t, first.GetID(), kr.WorkflowID)
			require.Contains(t, err.Error(), key)
		}
	})

	t.Run("call", func(t *testing.T) {
		lc := &llmclient.Client{Temporal: c, TaskQueue: withWorker(t, c)}
		key := "refund-" + uuid.NewString()[:8]
		res, err := lc.Call(ctx, ask(key, "", "Can I get a refund?"))
		require.NoError(t, err)
		require.Equal(t, llmsim.Answer("qwen-72b", "Can I get a refund?"), res.Content)

		_, err = lc.Call(ctx, ask(key, "", "Can I get a refund twice?"))
		require.ErrorIs(t, err, llmclient.ErrKeyReused, "the first request's answer must not answer another")

		again, err := lc.Call(ctx, ask(key, "", "Can I get a refund?"))
		require.NoError(t, err)
		require.Equal(t, res.Content, again.Content)
	})
}

// TestCallWithNoWorkerEndsAfterItsDeadline: with nobody polling the task
// queue, a call ends, timed out, at its deadline plus the margin instead
// of waiting forever; the same request then runs it anew.
func TestCallWithNoWorkerEndsAfterItsDeadline(t *testing.T) {
	c := shared.Server(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lc := &llmclient.Client{Temporal: c, TaskQueue: "nobody-polls-" + uuid.NewString()[:8], ExecutionMargin: time.Second}
	req := ask("", "", "Is anybody there?")
	req.DeadlineMS = 1000
	require.Equal(t, 2*time.Second, lc.ExecutionTimeout(req))

	start := time.Now()
	_, err := lc.Call(ctx, req)
	took := time.Since(start)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the call ended by itself, not by the test's context")
	var timeout *temporal.TimeoutError
	require.True(t, errors.As(err, &timeout), "want the workflow's timeout, got %v", err)
	id, _ := lc.Key(req)
	require.Contains(t, err.Error(), id, "the error names the call")
	require.Less(t, took, 20*time.Second)

	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, desc.GetWorkflowExecutionInfo().GetStatus())
	run, err := lc.Start(ctx, req)
	require.NoError(t, err)
	require.NotEqual(t, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), run.GetRunID(), "a timed-out call runs anew")
}

// TestIDsWithSecret: a client with the deployment secret starts its calls
// under the HMAC IDs, never the plain SHA-256 ones anyone can compute.
func TestIDsWithSecret(t *testing.T) {
	c := shared.Server(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := request.NewIDs([]byte("a deployment secret of 32 bytes!"))
	require.NoError(t, err)
	lc := &llmclient.Client{Temporal: c, TaskQueue: "nobody-polls-" + uuid.NewString()[:8], IDs: ids}
	req := ask("", "", "What is my balance? "+uuid.NewString())
	run, err := lc.Start(ctx, req)
	require.NoError(t, err)
	require.Equal(t, ids.For(req), run.GetID())
	require.NotEqual(t, request.KeyFor(req), run.GetID())
	require.NoError(t, c.TerminateWorkflow(ctx, run.GetID(), "", "test done"))
}

// TestDuplicatesExpire: the same request under its derived key gets the
// recorded answer within the replay window (one run, its run ID) and is a
// new call after it (a new run under the same workflow ID, as a chat UI's
// "regenerate" expects); an explicit key keeps its answer for its longer
// window, Start and Call alike.
func TestDuplicatesExpire(t *testing.T) {
	c := shared.Server(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc := &llmclient.Client{Temporal: c, TaskQueue: withWorker(t, c), ReplayWindow: 2 * time.Second, KeyWindow: time.Hour}
	runOf := func(id string) string {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	derived := ask("", "", "When does my parcel arrive? "+uuid.NewString()[:8])
	keyed := ask("parcel-"+uuid.NewString()[:8], "", "When does my parcel arrive?")
	first, err := lc.Call(ctx, derived)
	require.NoError(t, err)
	firstRun := runOf(first.RequestID)
	_, err = lc.Call(ctx, keyed)
	require.NoError(t, err)
	keyedID, err := lc.Key(keyed)
	require.NoError(t, err)
	keyedRun := runOf(keyedID)

	again, err := lc.Call(ctx, derived)
	require.NoError(t, err)
	require.Equal(t, firstRun, runOf(again.RequestID), "within the replay window: the recorded answer, no new run")

	time.Sleep(3 * time.Second)
	later, err := lc.Call(ctx, derived)
	require.NoError(t, err)
	require.Equal(t, first.RequestID, later.RequestID, "the same workflow ID")
	require.NotEqual(t, firstRun, runOf(later.RequestID), "after the replay window: a new call")
	run, err := lc.Start(ctx, derived)
	require.NoError(t, err)
	require.Equal(t, runOf(later.RequestID), run.GetRunID(), "Start within the new run's window attaches to it")

	_, err = lc.Call(ctx, keyed)
	require.NoError(t, err)
	require.Equal(t, keyedRun, runOf(keyedID), "an explicit key keeps its answer for its own window")
}
