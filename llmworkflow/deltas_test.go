package llmworkflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/workflows"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

// WithDeltasOn streams the call, runs the Forward activity for it with the
// call's ID and the topic, and returns once both are over; the request's
// stream flag does not change the call's ID.
func TestDeltasOnForwardsTheCall(t *testing.T) {
	f := &fakeCall{}
	var streamed bool
	f.answer = func(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error) {
		streamed = req.Stream
		return workflows.CallResult{RequestID: workflow.GetInfo(ctx).WorkflowExecution.ID, Content: "hello", Source: workflows.SourceModel}, nil
	}
	e := env(t, f)
	var got llmworkflow.ForwardInput
	e.RegisterActivityWithOptions(func(ctx context.Context, in llmworkflow.ForwardInput) (llmworkflow.ForwardResult, error) {
		got = in
		return llmworkflow.ForwardResult{Items: 2, Signals: 1, Bytes: 5}, nil
	}, activity.RegisterOptions{Name: llmworkflow.ForwardActivity})
	req := ask("Where is my order 12?")
	var res workflows.CallResult
	var plainID string
	run(t, e, func(ctx workflow.Context) error {
		s, err := workflowstreams.NewWorkflowStream(ctx, nil)
		if err != nil {
			return err
		}
		if plainID, err = llmworkflow.ID(ctx, req); err != nil {
			return err
		}
		res, err = llmworkflow.Call(ctx, req, llmworkflow.WithDeltasOn(s, "answer"))
		return err
	})
	require.True(t, streamed, "the call streams")
	require.Equal(t, "hello", res.Content)
	require.Equal(t, plainID, res.RequestID, "the same call as without WithDeltasOn")
	require.Equal(t, llmworkflow.ForwardInput{WorkflowID: plainID, Topic: "answer", Fingerprint: got.Fingerprint}, got)
	require.NotEmpty(t, got.Fingerprint)
}

// A call that answered while its deltas could not be forwarded is an
// error that carries the answer.
func TestDeltasOnForwardFailureKeepsTheAnswer(t *testing.T) {
	f := &fakeCall{}
	e := env(t, f)
	e.RegisterActivityWithOptions(func(ctx context.Context, in llmworkflow.ForwardInput) (llmworkflow.ForwardResult, error) {
		return llmworkflow.ForwardResult{}, temporal.NewNonRetryableApplicationError("the agent's stream is gone", "test", nil)
	}, activity.RegisterOptions{Name: llmworkflow.ForwardActivity})
	e.ExecuteWorkflow(func(ctx workflow.Context) (workflows.CallResult, error) {
		s, err := workflowstreams.NewWorkflowStream(ctx, nil)
		if err != nil {
			return workflows.CallResult{}, err
		}
		res, err := llmworkflow.Call(ctx, ask("q"), llmworkflow.WithDeltasOn(s, "answer"))
		var ce *llmworkflow.Error
		if !errors.As(err, &ce) || ce.Kind != llmworkflow.Failed || ce.Result == nil || ce.Result.Content != res.Content || res.Content == "" {
			return res, errors.New("want a Failed error with the answer, got " + errString(err))
		}
		return res, nil
	})
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// WithDeltasOn without a stream or a topic, or through Nexus, is refused
// before any call starts.
func TestDeltasOnRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(s *workflowstreams.WorkflowStream) []llmworkflow.Option
	}{
		{"no stream", func(*workflowstreams.WorkflowStream) []llmworkflow.Option {
			return []llmworkflow.Option{llmworkflow.WithDeltasOn(nil, "answer")}
		}},
		{"no topic", func(s *workflowstreams.WorkflowStream) []llmworkflow.Option {
			return []llmworkflow.Option{llmworkflow.WithDeltasOn(s, "")}
		}},
		{"through Nexus", func(s *workflowstreams.WorkflowStream) []llmworkflow.Option {
			return []llmworkflow.Option{llmworkflow.WithDeltasOn(s, "answer"), llmworkflow.WithNexus("durable-llm")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCall{}
			e := env(t, f)
			var err error
			run(t, e, func(ctx workflow.Context) error {
				s, serr := workflowstreams.NewWorkflowStream(ctx, nil)
				if serr != nil {
					return serr
				}
				_, err = llmworkflow.Call(ctx, ask("q"), tc.opt(s)...)
				return nil
			})
			require.ErrorIs(t, err, llmworkflow.ErrInvalidRequest)
			require.Empty(t, f.seen, "no call started")
		})
	}
}

// Answer keeps each byte once, whatever comes again after a retried
// Forward, and follows a replaced answer.
func TestAnswerAssemblesEachByteOnce(t *testing.T) {
	d := func(at int, off int64, text string) llmworkflow.StreamItem {
		return llmworkflow.StreamItem{Call: "c", Offset: off, At: at, Delta: &workflows.Delta{Attempt: 1, Text: text}}
	}
	var a llmworkflow.Answer
	var shown string
	for _, it := range []llmworkflow.StreamItem{
		{Call: "c", Offset: 0, Event: &workflows.Event{Type: workflows.EventAttemptStarted}},
		d(0, 1, "Hel"),
		d(3, 3, "lo, "),
		// A retried Forward resumes from its last heartbeat (offset 2):
		// the same event-free text again, then more.
		d(3, 3, "lo, wor"),
		d(10, 4, "ld"),
		d(20, 5, "a gap is never shown"),
		{Call: "c", Offset: 6, Event: &workflows.Event{Type: workflows.EventDone, Result: &workflows.CallResult{Source: workflows.SourceModel}}},
	} {
		fresh, replaced := a.Add(it)
		require.False(t, replaced)
		shown += fresh
	}
	require.Equal(t, "Hello, world", a.Text)
	require.Equal(t, a.Text, shown)
	require.True(t, a.Done)
	require.Equal(t, workflows.SourceModel, a.Result.Source)

	var r llmworkflow.Answer
	r.Add(d(0, 1, "hedge text"))
	_, replaced := r.Add(llmworkflow.StreamItem{Call: "c", Offset: 2, Event: &workflows.Event{Type: workflows.EventReplaced, Content: "first model's"}})
	require.True(t, replaced)
	fresh, _ := r.Add(d(len("first model's"), 3, " answer"))
	require.Equal(t, " answer", fresh)
	require.Equal(t, "first model's answer", r.Text)
}
