package llmworkflow

import (
	"encoding/json"
	"errors"
	"math"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/internal/markdown"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Option changes how Call runs a call.
type Option func(*options)

type options struct {
	taskQueue  string
	turn       string
	workflowID string
	key        string
	ids        request.IDs
	deadline   time.Duration
	margin     time.Duration
	nexus      string
	quick      bool
	deltas     *deltasTo
}

// WithTaskQueue sets the task queue of the durable-llm workers; default
// workflows.TaskQueue ("llm-calls").
func WithTaskQueue(tq string) Option { return func(o *options) { o.taskQueue = tq } }

// WithTurn names the call's turn within the parent: the child's ID is
// "<parent workflow ID>/<turn>" instead of one derived from the request.
// Use it to make two calls with the same request (a "regenerate") or to
// keep one turn's call across a change of its request (the same turn key
// with another request is refused: KeyReused). The key is checked like an
// idempotency key (printable ASCII, no '/', at most request.MaxKeyLen).
func WithTurn(key string) Option { return func(o *options) { o.turn = key } }

// WithWorkflowID sets the child's workflow ID exactly, not scoped by the
// parent: every workflow that names it reaches the same call.
func WithWorkflowID(id string) Option { return func(o *options) { o.workflowID = id } }

// WithIdempotencyKey sets the request's idempotency key: the call then
// runs under the ID llmclient and the front door give that key
// (request.IDs.For), not scoped by the parent, so a backend and an agent
// that send the same key reach the same call.
func WithIdempotencyKey(key string) Option { return func(o *options) { o.key = key } }

// WithIDs sets the deployment's ID derivation (request.IDsFromEnv, keyed
// with LLM_ID_SECRET); default plain SHA-256. It only matters for calls
// whose ID comes from the request or an idempotency key, and must be the
// same as llmclient's for a key shared with a backend.
func WithIDs(ids request.IDs) Option { return func(o *options) { o.ids = ids } }

// WithDeadline is the workers' call.deadline, used for the execution
// timeout of a request that sets no deadline_ms; default the policy's
// max_deadline (10 min), the longest a worker's deadline should be.
func WithDeadline(d time.Duration) Option { return func(o *options) { o.deadline = d } }

// WithExecutionMargin is added to the call's deadline to make the child's
// execution timeout (see llmclient.Client.ExecutionMargin); default
// llmclient.DefaultExecutionMargin (1 min).
func WithExecutionMargin(d time.Duration) Option { return func(o *options) { o.margin = d } }

// WithNexus makes Call go through the durable-llm Nexus service on
// endpoint, as CallNexus does (for an agent in another namespace than
// durable-llm); WithTaskQueue and WithWorkflowID then do not apply.
func WithNexus(endpoint string) Option { return func(o *options) { o.nexus = endpoint } }

// WithQuickAnswer makes a Nexus call (CallNexus, WithNexus) use the
// service's call_quick operation: a call that completes within the
// handler's short wait (5 s by default) comes back in the operation's
// start response, without the completion callback's round trip; a longer
// one goes on as the plain operation does (docs/nexus.md). Changing it
// for a running caller changes its Nexus command: use
// workflow.GetVersion.
func WithQuickAnswer() Option { return func(o *options) { o.quick = true } }

// defaultMaxDeadline is the default policy's call.max_deadline, the
// longest deadline a worker should have (a test pins it to the policy's).
const defaultMaxDeadline = 10 * time.Minute

// executionTimeout is the child's execution timeout: the request's
// deadline (else WithDeadline's, else defaultMaxDeadline) plus the margin,
// as llmclient.Client.ExecutionTimeout computes it.
func (o options) executionTimeout(req workflows.CallRequest) time.Duration {
	d := time.Duration(req.DeadlineMS) * time.Millisecond
	if d <= 0 {
		d = o.deadline
	}
	if d <= 0 {
		d = defaultMaxDeadline
	}
	m := o.margin
	if m <= 0 {
		m = llmclient.DefaultExecutionMargin
	}
	return d + m
}

func resolve(opts []Option) options {
	o := options{taskQueue: workflows.TaskQueue}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// maxWorkflowIDLen is Temporal's default limit on a workflow ID's length.
const maxWorkflowIDLen = 1000

// ID returns the workflow ID of the call Call runs for req with opts from
// this workflow:
//
//   - WithWorkflowID: that ID;
//   - an idempotency key (the request's or WithIdempotencyKey):
//     request.IDs.For, as llmclient derives it;
//   - WithTurn: "<parent workflow ID>/<turn>";
//   - else "<parent workflow ID>/" + request.IDs.Fingerprint(req)
//     ("llm-" and the digest of every field that changes the answer).
//
// The parent's workflow ID, not its run ID, is the scope (see the package
// documentation): two calls of one run with the same request are one call
// unless WithTurn tells them apart.
func ID(ctx workflow.Context, req workflows.CallRequest, opts ...Option) (string, error) {
	o := resolve(opts)
	id, _, err := childID(ctx, o.apply(req), o)
	return id, err
}

// apply puts the options that belong to the request into it.
func (o options) apply(req workflows.CallRequest) workflows.CallRequest {
	if o.key != "" {
		req.IdempotencyKey = o.key
	}
	if o.deltas != nil {
		// Not part of the fingerprint: the same turn, streamed or not, is
		// one call.
		req.Stream = true
	}
	return req
}

// childID returns the call's ID and whether its caller named it (a named
// ID may reach another request's call: the attach checks the
// fingerprint).
func childID(ctx workflow.Context, req workflows.CallRequest, o options) (string, bool, error) {
	parent := workflow.GetInfo(ctx).WorkflowExecution.ID
	var id string
	named := true
	switch {
	case o.workflowID != "":
		id = o.workflowID
	case req.IdempotencyKey != "":
		if err := request.ValidateKey(req.IdempotencyKey); err != nil {
			return "", false, invalidf("idempotency_key: %v", err)
		}
		//workflowcheck:ignore request IDs are pure: canonical JSON and SHA-256 (workflowcheck sees the allocator under encoding/json)
		id = o.ids.For(req)
	case o.turn != "":
		if err := request.ValidateKey(o.turn); err != nil {
			return "", false, invalidf("turn key: %v", err)
		}
		id = parent + "/" + o.turn
	default:
		//workflowcheck:ignore request IDs are pure: canonical JSON and SHA-256 (workflowcheck sees the allocator under encoding/json)
		id, named = parent+"/"+o.ids.Fingerprint(req), false
	}
	if len(id) > maxWorkflowIDLen {
		return "", false, invalidf("the call's workflow ID is %d bytes, over Temporal's %d (a shorter parent workflow ID or WithWorkflowID)", len(id), maxWorkflowIDLen)
	}
	return id, named, nil
}

// precheck refuses what must never become a child's start command: a
// request Temporal could not carry would fail the parent's workflow task
// over and over instead of failing the call. The worker validates the rest
// and fails the call with invalid_request.
func precheck(req workflows.CallRequest) error {
	if len(req.Messages) == 0 {
		return invalidf("messages: at least one message is required")
	}
	if t := req.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0)) {
		return invalidf("temperature: %v is not a number (want a finite number, such as 0.7)", *t)
	}
	//workflowcheck:ignore encoding a value is deterministic (workflowcheck sees the allocator under encoding/json)
	b, err := json.Marshal(req)
	if err != nil {
		return invalidf("the request cannot be encoded as JSON: %v", err)
	}
	if len(b) > request.MaxEncodedRequestBytes {
		return invalidf("messages: the request is %d bytes once JSON-encoded, over the %d a Temporal payload may carry",
			len(b), request.MaxEncodedRequestBytes)
	}
	return nil
}

// maxStarts bounds the starts of one Call: a start that met a call which
// then ended cancelled (a closed run's, cancelled by its parent-close
// policy) starts again.
const maxStarts = 3

// Call runs req as a child LLMCall workflow and returns its result: a
// model's answer, or the business fallback's (Degraded). The call's ID is
// ID's; a call with that ID that already ran (a retried or reset parent's
// same turn) answers with its recorded result, and a running one is waited
// for, through the Attach activity on this workflow's task queue. The
// child is cancelled when the parent closes, and when ctx is cancelled
// Call waits for it to stop. Its execution timeout is the request's
// deadline plus a margin (WithDeadline, WithExecutionMargin).
//
// With WithNexus the call goes through the Nexus service instead
// (CallNexus).
//
// Errors are *Error (see Kind): FallbackUnavailable (retryable),
// InvalidRequest, KeyReused, Canceled, TimedOut, Failed.
func Call(ctx workflow.Context, req workflows.CallRequest, opts ...Option) (workflows.CallResult, error) {
	o := resolve(opts)
	if err := o.checkDeltas(); err != nil {
		return workflows.CallResult{}, err
	}
	if o.nexus != "" {
		return callNexus(ctx, o.nexus, req, o)
	}
	req = o.apply(req)
	if err := precheck(req); err != nil {
		return workflows.CallResult{}, err
	}
	id, named, err := childID(ctx, req, o)
	if err != nil {
		return workflows.CallResult{}, err
	}
	//workflowcheck:ignore request IDs are pure: canonical JSON and SHA-256 (workflowcheck sees the allocator under encoding/json)
	fp := o.ids.Fingerprint(req)
	for start := 1; ; start++ {
		res, attached, err := startChild(ctx, id, fp, req, o)
		if !attached {
			return res, err
		}
		res, err = attach(ctx, id, fp, named, req, o)
		var stopped *stoppedError
		if errors.As(err, &stopped) && start < maxStarts && ctx.Err() == nil {
			workflow.GetLogger(ctx).Info("the LLM call this turn met ended without an answer: starting it again", "call", id, "how", stopped.how)
			continue
		}
		return res, err
	}
}

// startChild starts the child and waits for it; attached reports that a
// call with this ID exists already (running, or closed without failure).
func startChild(ctx workflow.Context, id, fp string, req workflows.CallRequest, o options) (res workflows.CallResult, attached bool, err error) {
	memo := map[string]any{llmclient.MemoFingerprint: fp}
	if req.Tenant != "" {
		memo[llmclient.MemoTenant] = req.Tenant
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               id,
		TaskQueue:                o.taskQueue,
		WorkflowExecutionTimeout: o.executionTimeout(req),
		// The call owns its retries; a call that failed, was cancelled or
		// timed out may run again under its ID, a completed one answers.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		Memo:                  memo,
		StaticSummary:         markdown.Escape(llmclient.Summary(req)),
	})
	f := workflow.ExecuteChildWorkflow(cctx, workflows.WorkflowName, req)
	var exec workflow.Execution
	if err := f.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		// The server's error, and the test environment's.
		var dup *temporal.ChildWorkflowExecutionAlreadyStartedError
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &dup) || errors.As(err, &started) {
			return res, true, nil
		}
		return res, false, typed(id, err)
	}
	// With WithDeltasOn, the call's items go to this workflow's stream
	// while it runs.
	fwd := forward(ctx, id, fp, false, req, o)
	if err := f.Get(ctx, &res); err != nil {
		res, err = forwarded(ctx, fwd, id, res, typed(id, err))
		return res, false, err
	}
	res, err = forwarded(ctx, fwd, id, res, nil)
	return res, false, err
}

// attach waits for the existing call id through the Attach activity.
func attach(ctx workflow.Context, id, fp string, named bool, req workflows.CallRequest, o options) (workflows.CallResult, error) {
	wait := o.executionTimeout(req)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The existing call may have just started: its whole execution
		// timeout, and a minute to reach it.
		ScheduleToCloseTimeout: wait + time.Minute,
		HeartbeatTimeout:       attachHeartbeat * 3,
		WaitForCancellation:    true,
		Summary:                "attach: wait for LLM call " + id,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{errKeyReused, errStopped},
		},
	})
	in := AttachInput{WorkflowID: id, Fingerprint: fp}
	if named {
		in.CheckFingerprint = true
	}
	fwd := forward(ctx, id, fp, named, req, o)
	var res workflows.CallResult
	err := workflow.ExecuteActivity(actx, AttachActivity, in).Get(ctx, &res)
	res, err = forwarded(ctx, fwd, id, res, err)
	if err == nil {
		return res, nil
	}
	var own *Error
	if errors.As(err, &own) {
		return res, err
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case errStopped:
			return res, &stoppedError{how: appErr.Message()}
		case errKeyReused:
			return res, &Error{Kind: KeyReused, CallID: id, Reason: appErr.Message(), Err: ErrKeyReused}
		}
	}
	return res, typed(id, err)
}

// stoppedError: the call attached to ended cancelled, terminated or timed
// out, without an answer.
type stoppedError struct{ how string }

func (e *stoppedError) Error() string { return e.how }

// typed turns the error of a child (or of the attach activity, which
// carries the call's failure as it was) into an *Error.
func typed(id string, err error) error {
	e := &Error{Kind: Failed, CallID: id, Err: err}
	var appErr *temporal.ApplicationError
	var toErr *temporal.TimeoutError
	switch {
	case temporal.IsCanceledError(err):
		e.Kind, e.Reason = Canceled, "cancelled"
	case errors.As(err, &appErr):
		e.Class, e.Reason = appErr.Type(), appErr.Message()
		if appErr.HasDetails() {
			var res workflows.CallResult
			if appErr.Details(&res) == nil {
				e.Result = &res
			}
		}
		switch appErr.Type() {
		case workflows.ErrFallbackUnavailable:
			e.Kind = FallbackUnavailable
		case invalidRequestClass:
			e.Kind = InvalidRequest
		}
	case errors.As(err, &toErr):
		e.Kind, e.Reason = TimedOut, "the call's execution timeout passed (no durable-llm worker took it, or it outlasted its deadline and margin)"
	default:
		e.Reason = err.Error()
	}
	return e
}
