package llmworkflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
)

// AttachActivity is the registered name of Attacher.Attach.
const AttachActivity = "llmworkflow.Attach"

// attachHeartbeat is how often Attach heartbeats while it waits.
const attachHeartbeat = 10 * time.Second

// The error types of Attach that Call reads.
const (
	errKeyReused = "llmworkflow_key_reused"
	errStopped   = "llmworkflow_call_stopped"
)

// AttachInput names the call to wait for.
type AttachInput struct {
	WorkflowID string `json:"workflow_id"`
	// Fingerprint is request.IDs.Fingerprint of the request that wants the
	// call's answer; with CheckFingerprint a call started by another
	// request is refused (KeyReused).
	Fingerprint      string `json:"fingerprint"`
	CheckFingerprint bool   `json:"check_fingerprint,omitempty"`
}

// Attacher waits for a call that a workflow's Call found already started:
// a workflow cannot wait for a workflow that is not its child, an
// activity can. It is safe for concurrent use.
type Attacher struct {
	// Client reaches the namespace of the calls.
	Client client.Client
}

// Register registers the Attach activity, under AttachActivity, and the
// Forward activity of WithDeltasOn, under ForwardActivity, on the worker
// of the workflows that use Call.
func Register(r worker.ActivityRegistry, c client.Client) {
	r.RegisterActivityWithOptions((&Attacher{Client: c}).Attach, activity.RegisterOptions{Name: AttachActivity})
	r.RegisterActivityWithOptions((&Forwarder{Client: c}).Forward, activity.RegisterOptions{Name: ForwardActivity})
}

// Attach waits for the call in.WorkflowID and returns its result. The
// call's own failure comes back as an ApplicationError of the same type
// and details; a call that ended without an answer (cancelled, terminated,
// timed out, gone) as the non-retryable errStopped, so Call starts it
// again; a call of another request as errKeyReused.
func (a *Attacher) Attach(ctx context.Context, in AttachInput) (workflows.CallResult, error) {
	var res workflows.CallResult
	if in.CheckFingerprint {
		if err := a.check(ctx, in); err != nil {
			return res, err
		}
	}
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(attachHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	err := a.Client.GetWorkflow(ctx, in.WorkflowID, "").Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var (
		appErr   *temporal.ApplicationError
		canceled *temporal.CanceledError
		term     *temporal.TerminatedError
		timeout  *temporal.TimeoutError
		notFound *serviceerror.NotFound
	)
	switch {
	case errors.As(err, &appErr):
		opts := temporal.ApplicationErrorOptions{NonRetryable: true}
		var details workflows.CallResult
		if appErr.HasDetails() && appErr.Details(&details) == nil {
			opts.Details = []any{details}
		}
		return res, temporal.NewApplicationErrorWithOptions(appErr.Message(), appErr.Type(), opts)
	case errors.As(err, &canceled), errors.As(err, &term), errors.As(err, &timeout), errors.As(err, &notFound):
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("LLM call %s ended without an answer: %v", in.WorkflowID, err), errStopped, nil)
	}
	return res, err // a passing fault: the activity is retried
}

// check refuses a call that another request started under the same named
// ID (its memo's fingerprint differs); a call without one (started by
// llmclient under a derived key) is taken as it is.
func (a *Attacher) check(ctx context.Context, in AttachInput) error {
	desc, err := a.Client.DescribeWorkflow(ctx, in.WorkflowID, "")
	if err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return temporal.NewNonRetryableApplicationError("LLM call "+in.WorkflowID+" is gone", errStopped, nil)
		}
		return fmt.Errorf("LLM call %s: check that it runs this request: %w", in.WorkflowID, err)
	}
	var fp string
	switch err := desc.GetMemoValue(llmclient.MemoFingerprint, &fp); {
	case errors.Is(err, temporal.ErrNoData):
		return nil
	case err != nil:
		return fmt.Errorf("LLM call %s: read its request fingerprint: %w", in.WorkflowID, err)
	}
	if fp != in.Fingerprint {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the call's ID was already used for a different request (call %s): a turn key names one request; send this one under a new key", in.WorkflowID),
			errKeyReused, nil)
	}
	return nil
}
