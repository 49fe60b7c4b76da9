package llmworkflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

const parentID = "agent-7"

func ask(q string) workflows.CallRequest {
	return workflows.CallRequest{UserID: "u-1", SessionID: "s-1", Messages: []request.Message{
		{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: q},
	}}
}

// childSeen is what the fake LLMCall saw of its own start.
type childSeen struct {
	ID, Parent, TaskQueue string
	Timeout               time.Duration
}

// fakeCall is an LLMCall that answers with the question and records how it
// was started; answer, when set, decides its outcome instead.
type fakeCall struct {
	seen   []childSeen
	answer func(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error)
}

func (f *fakeCall) run(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error) {
	info := workflow.GetInfo(ctx)
	parent := ""
	if info.ParentWorkflowExecution != nil {
		parent = info.ParentWorkflowExecution.ID
	}
	f.seen = append(f.seen, childSeen{ID: info.WorkflowExecution.ID, Parent: parent, TaskQueue: info.TaskQueueName, Timeout: info.WorkflowExecutionTimeout})
	if f.answer != nil {
		return f.answer(ctx, req)
	}
	return workflows.CallResult{RequestID: info.WorkflowExecution.ID, Content: "answer to " + req.Question(), Source: workflows.SourceModel}, nil
}

// env is a test workflow environment with the fake LLMCall registered and
// the parent's workflow ID set.
func env(t *testing.T, f *fakeCall) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	e := s.NewTestWorkflowEnvironment()
	e.RegisterWorkflowWithOptions(f.run, workflow.RegisterOptions{Name: workflows.WorkflowName})
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: parentID})
	t.Cleanup(func() { e.AssertExpectations(t) })
	return e
}

// run executes parent as the test's workflow and fails the test on a
// workflow error.
func run(t *testing.T, e *testsuite.TestWorkflowEnvironment, parent func(ctx workflow.Context) error) {
	t.Helper()
	e.ExecuteWorkflow(parent)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
}

func TestIDDerivation(t *testing.T) {
	fp := request.IDs{}.Fingerprint(ask("Where is my order 12?"))
	keyed, err := request.NewIDs([]byte(strings.Repeat("s", 32)))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		req  workflows.CallRequest
		opts []llmworkflow.Option
		want string
	}{
		{"derived from the parent and the request", ask("Where is my order 12?"), nil, parentID + "/" + fp},
		{"another request, another call", ask("Where is my order 13?"), nil, parentID + "/" + request.IDs{}.Fingerprint(ask("Where is my order 13?"))},
		{"keyed with the deployment secret", ask("Where is my order 12?"), []llmworkflow.Option{llmworkflow.WithIDs(keyed)}, parentID + "/" + keyed.Fingerprint(ask("Where is my order 12?"))},
		{"a turn key", ask("Where is my order 12?"), []llmworkflow.Option{llmworkflow.WithTurn("turn-3")}, parentID + "/turn-3"},
		{"an exact ID", ask("Where is my order 12?"), []llmworkflow.Option{llmworkflow.WithWorkflowID("shared-call-1")}, "shared-call-1"},
		{"an idempotency key, as llmclient derives it", ask("Where is my order 12?"), []llmworkflow.Option{llmworkflow.WithIdempotencyKey("order-12-status")}, "order-12-status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCall{}
			e := env(t, f)
			var got, id string
			run(t, e, func(ctx workflow.Context) error {
				var err error
				if id, err = llmworkflow.ID(ctx, tc.req, tc.opts...); err != nil {
					return err
				}
				res, err := llmworkflow.Call(ctx, tc.req, tc.opts...)
				got = res.RequestID
				return err
			})
			require.Equal(t, tc.want, id)
			require.Equal(t, tc.want, got)
			require.Equal(t, []childSeen{{ID: tc.want, Parent: parentID, TaskQueue: workflows.TaskQueue, Timeout: 10*time.Minute + time.Minute}}, f.seen)
			if k := "order-12-status"; strings.Contains(tc.name, "idempotency") {
				want, err := llmclient.Key(func() workflows.CallRequest { r := tc.req; r.IdempotencyKey = k; return r }())
				require.NoError(t, err)
				require.Equal(t, want, got, "the same call as llmclient's for the same key")
			}
		})
	}
}

func TestExecutionTimeoutAndTaskQueue(t *testing.T) {
	f := &fakeCall{}
	e := env(t, f)
	req := ask("Where is my order 12?")
	req.DeadlineMS = 30_000
	run(t, e, func(ctx workflow.Context) error {
		_, err := llmworkflow.Call(ctx, req, llmworkflow.WithTaskQueue("llm-calls-eu"), llmworkflow.WithExecutionMargin(20*time.Second))
		return err
	})
	require.Len(t, f.seen, 1)
	require.Equal(t, "llm-calls-eu", f.seen[0].TaskQueue)
	require.Equal(t, 50*time.Second, f.seen[0].Timeout, "the deadline plus the margin")
	// Without a deadline: the policy's max_deadline, as llmclient.
	require.Equal(t, config.DefaultConfig().Call.MaxDeadline.D()+llmclient.DefaultExecutionMargin,
		(&llmclient.Client{}).ExecutionTimeout(ask("q")))
}

// A second Call of the same turn (a retried or reset parent's, here the
// same run's) is not sent to a model again: it attaches to the call.
func TestDuplicateAttaches(t *testing.T) {
	f := &fakeCall{}
	e := env(t, f)
	var attached []llmworkflow.AttachInput
	e.RegisterActivityWithOptions(func(ctx context.Context, in llmworkflow.AttachInput) (workflows.CallResult, error) {
		attached = append(attached, in)
		return workflows.CallResult{RequestID: in.WorkflowID, Content: "recorded answer"}, nil
	}, activity.RegisterOptions{Name: llmworkflow.AttachActivity})
	var first, second workflows.CallResult
	run(t, e, func(ctx workflow.Context) error {
		var err error
		if first, err = llmworkflow.Call(ctx, ask("Where is my order 12?")); err != nil {
			return err
		}
		second, err = llmworkflow.Call(ctx, ask("Where is my order 12?"))
		return err
	})
	require.Len(t, f.seen, 1, "one LLMCall for one turn")
	require.Equal(t, "answer to Where is my order 12?", first.Content)
	require.Equal(t, "recorded answer", second.Content)
	require.Equal(t, []llmworkflow.AttachInput{{WorkflowID: first.RequestID, Fingerprint: request.IDs{}.Fingerprint(ask("Where is my order 12?"))}}, attached,
		"a derived ID is the request's own: no fingerprint check")
}

// A named turn reached by another request is refused (KeyReused), and a
// call that ended without an answer is started again.
func TestAttachOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attach   []error // the Attach activity's errors, in turn; nil answers
		wantKind llmworkflow.Kind
		attaches int
	}{
		{"key reused", []error{temporal.NewNonRetryableApplicationError("another request", "llmworkflow_key_reused", nil)}, llmworkflow.KeyReused, 1},
		{"the call met was cancelled: start again", []error{temporal.NewNonRetryableApplicationError("cancelled", "llmworkflow_call_stopped", nil), nil}, "", 2},
		{"the call met failed: its error", []error{temporal.NewNonRetryableApplicationError("no model", workflows.ErrFallbackUnavailable, nil)}, llmworkflow.FallbackUnavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCall{}
			e := env(t, f)
			n := 0
			var checked []bool
			e.RegisterActivityWithOptions(func(ctx context.Context, in llmworkflow.AttachInput) (workflows.CallResult, error) {
				n++
				checked = append(checked, in.CheckFingerprint)
				if err := tc.attach[n-1]; err != nil {
					return workflows.CallResult{}, err
				}
				return workflows.CallResult{RequestID: in.WorkflowID, Content: "recorded"}, nil
			}, activity.RegisterOptions{Name: llmworkflow.AttachActivity})
			var callErr error
			run(t, e, func(ctx workflow.Context) error {
				if _, err := llmworkflow.Call(ctx, ask("first question"), llmworkflow.WithTurn("plan")); err != nil {
					return err
				}
				_, callErr = llmworkflow.Call(ctx, ask("another question"), llmworkflow.WithTurn("plan"))
				return nil
			})
			require.Equal(t, tc.attaches, n)
			require.Equal(t, true, checked[0], "a named turn checks the request")
			if tc.wantKind == "" {
				require.NoError(t, callErr)
				return
			}
			var le *llmworkflow.Error
			require.ErrorAs(t, callErr, &le)
			require.Equal(t, tc.wantKind, le.Kind)
			require.Equal(t, parentID+"/plan", le.CallID)
		})
	}
}

func TestErrorTyping(t *testing.T) {
	failWith := func(err error) func(workflow.Context, workflows.CallRequest) (workflows.CallResult, error) {
		return func(workflow.Context, workflows.CallRequest) (workflows.CallResult, error) {
			return workflows.CallResult{}, err
		}
	}
	for _, tc := range []struct {
		name      string
		child     error
		req       workflows.CallRequest
		kind      llmworkflow.Kind
		sentinel  error
		class     string
		retryable bool
		started   bool
	}{
		{"fallback unavailable", temporal.NewApplicationErrorWithOptions("no model answered", workflows.ErrFallbackUnavailable,
			temporal.ApplicationErrorOptions{Details: []any{workflows.CallResult{Reason: "no model answered"}}}),
			ask("q"), llmworkflow.FallbackUnavailable, llmworkflow.ErrFallbackUnavailable, workflows.ErrFallbackUnavailable, true, true},
		{"invalid request from the worker", temporal.NewNonRetryableApplicationError("max_tokens: must be positive", "invalid_request", nil),
			ask("q"), llmworkflow.InvalidRequest, llmworkflow.ErrInvalidRequest, "invalid_request", false, true},
		{"another class", temporal.NewNonRetryableApplicationError("filtered", "content_filter", nil),
			ask("q"), llmworkflow.Failed, llmworkflow.ErrFailed, "content_filter", false, true},
		{"no messages: refused before a start", nil, workflows.CallRequest{UserID: "u"}, llmworkflow.InvalidRequest, llmworkflow.ErrInvalidRequest, "", false, false},
		{"bad turn key: refused before a start", nil, ask("q"), llmworkflow.InvalidRequest, llmworkflow.ErrInvalidRequest, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCall{answer: failWith(tc.child)}
			e := env(t, f)
			var opts []llmworkflow.Option
			if strings.Contains(tc.name, "turn key") {
				opts = append(opts, llmworkflow.WithTurn("has/slash"))
			}
			var callErr error
			run(t, e, func(ctx workflow.Context) error {
				_, callErr = llmworkflow.Call(ctx, tc.req, opts...)
				return nil
			})
			require.Equal(t, tc.started, len(f.seen) == 1)
			var le *llmworkflow.Error
			require.ErrorAs(t, callErr, &le)
			require.Equal(t, tc.kind, le.Kind)
			require.ErrorIs(t, callErr, tc.sentinel)
			require.Equal(t, tc.class, le.Class)
			require.Equal(t, tc.retryable, le.Retryable())
			if tc.started {
				require.Equal(t, parentID+"/"+request.IDs{}.Fingerprint(tc.req), le.CallID)
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, callErr, &appErr, "the Temporal error is kept")
			}
			if tc.kind == llmworkflow.FallbackUnavailable {
				require.NotNil(t, le.Result)
				require.Equal(t, "no model answered", le.Result.Reason)
			}
		})
	}
}

// sleeper is an LLMCall that answers after an hour, unless cancelled.
func sleeper(cancelled *bool) func(workflow.Context, workflows.CallRequest) (workflows.CallResult, error) {
	return func(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error) {
		err := workflow.Sleep(ctx, time.Hour)
		if temporal.IsCanceledError(err) {
			*cancelled = true
		}
		return workflows.CallResult{Content: "late"}, err
	}
}

// An abandoned agent cancels its call: the parent closes while its call
// runs.
func TestParentCloseCancelsTheCall(t *testing.T) {
	cancelled := false
	f := &fakeCall{answer: sleeper(&cancelled)}
	e := env(t, f)
	run(t, e, func(ctx workflow.Context) error {
		workflow.Go(ctx, func(ctx workflow.Context) { _, _ = llmworkflow.Call(ctx, ask("q")) })
		return workflow.Sleep(ctx, time.Minute)
	})
	require.Len(t, f.seen, 1)
	require.True(t, cancelled, "the call was cancelled when its parent closed")
}

// Cancelling a Call cancels the call and waits for it to stop.
func TestCancelCall(t *testing.T) {
	cancelled := false
	f := &fakeCall{answer: sleeper(&cancelled)}
	e := env(t, f)
	var callErr error
	stoppedFirst := false
	run(t, e, func(ctx workflow.Context) error {
		cctx, cancel := workflow.WithCancel(ctx)
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.Sleep(ctx, time.Minute)
			cancel()
		})
		_, callErr = llmworkflow.Call(cctx, ask("q"))
		stoppedFirst = cancelled
		return nil
	})
	require.True(t, stoppedFirst, "the call saw the cancellation before Call returned")
	var le *llmworkflow.Error
	require.ErrorAs(t, callErr, &le)
	require.Equal(t, llmworkflow.Canceled, le.Kind)
	require.True(t, temporal.IsCanceledError(callErr))
	require.True(t, errors.Is(callErr, llmworkflow.ErrCanceled))
}
