package llmclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/internal/markdown"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Client starts and waits for durable LLM calls. It is safe for concurrent
// use.
type Client struct {
	// Temporal is the Temporal client.
	Temporal client.Client
	// TaskQueue of the workers; default workflows.TaskQueue.
	TaskQueue string
	// Namespace, for Web UI links; default "default".
	Namespace string
	// UIBase is the Web UI's address, for links; default http://localhost:8233.
	UIBase string
	// Limits checked before starting, so an oversize prompt is refused here
	// rather than by Temporal's payload limit; default the policy defaults.
	Limits config.LimitsConfig
	// IDs derives the workflow IDs: keyed with the deployment's secret
	// (request.IDsFromEnv reads LLM_ID_SECRET), or, the zero value, plain
	// SHA-256 for local development. Every client of one deployment must
	// use the same, or one request reaches two calls.
	IDs request.IDs
	// Deadline is the workers' call.deadline: the deadline of a request
	// that sets none, for its execution timeout. Default the default
	// policy's max_deadline (10 min), the longest a worker's deadline
	// should be.
	Deadline time.Duration
	// ExecutionMargin is added to a call's deadline to make its workflow
	// execution timeout, so that a call no worker takes (none polls the
	// task queue) ends, timed out, instead of waiting forever; a retry
	// with the same request or key then runs it anew. It covers a
	// streamed call's linger and a busy worker's delays, or a backlog
	// before the call's first workflow task. Default 1 min.
	ExecutionMargin time.Duration
	// ReplayWindow is how long a completed call's result answers the same
	// request under its derived key; after it the request starts a new
	// call (a new run of the same workflow ID). KeyWindow is the same for
	// an explicit idempotency key. A running call is always attached to.
	// Defaults config.DefaultReplayWindow (60 s) and DefaultKeyWindow
	// (24 h); the front door sets the policy's idempotency section.
	ReplayWindow, KeyWindow time.Duration
	// EagerStart asks the server to hand a call's first workflow task
	// back with the start's answer, to a worker of Temporal in this
	// process (Temporal's Eager Workflow Start): set it where a worker
	// for TaskQueue was built on Temporal, this same client, so that the
	// call never waits for a poll. Begin uses it (Call's update-with-start
	// cannot). Without such a worker, or where the server does not offer
	// it, the start is an ordinary one. A worker that dies holding the
	// task loses nothing: the task times out and another worker runs it.
	EagerStart bool
}

// window is how long req's completed call answers a duplicate of it.
func (c *Client) window(req workflows.CallRequest) time.Duration {
	if req.IdempotencyKey != "" {
		return cmp.Or(c.KeyWindow, config.DefaultKeyWindow)
	}
	return cmp.Or(c.ReplayWindow, config.DefaultReplayWindow)
}

// expired reports whether the call under id completed longer than req's
// window ago: the same request then starts a new run. A call that failed
// or timed out is run again anyway (ALLOW_DUPLICATE_FAILED_ONLY).
func (c *Client) expired(ctx context.Context, id string, req workflows.CallRequest) bool {
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return false // the start's own error tells
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED || info.GetCloseTime() == nil {
		return false
	}
	return time.Since(info.GetCloseTime().AsTime()) > c.window(req)
}

// anew returns opts for a new run of a completed call whose window has
// passed.
func anew(opts client.StartWorkflowOptions) client.StartWorkflowOptions {
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	return opts
}

// DefaultExecutionMargin is the default of Client.ExecutionMargin.
const DefaultExecutionMargin = time.Minute

// Memo fields of the calls Client starts (the workflow's memo, which
// Describe returns; encoded like the input, so encrypted when payloads are).
const (
	// MemoTenant is the tenant that started the call (the request's
	// tenant), when it names one: the front door's owner check.
	MemoTenant = "tenant"
	// MemoFingerprint is request.IDs.Fingerprint of the request, for a call
	// started with an explicit idempotency key.
	MemoFingerprint = "request_fingerprint"
	// MemoNoStore is true for a call whose request is NoStore (a response
	// created with store: false), which the front door never serves again.
	MemoNoStore = "no_store"
)

// ErrInvalidRequest wraps every request problem found before starting.
var ErrInvalidRequest = errors.New("invalid request")

// ErrKeyReused is wrapped by KeyReusedError.
var ErrKeyReused = errors.New("idempotency key reused with a different request")

// KeyReusedError is the error of a request with an explicit idempotency key
// that reached a call started by a different request with the same key
// (another model, other messages, …): the call's answer is not this
// request's, so it is refused rather than returned. It wraps ErrKeyReused.
type KeyReusedError struct {
	// Key is the caller's idempotency key.
	Key string
	// WorkflowID is the call it reached.
	WorkflowID string
}

func (e *KeyReusedError) Error() string {
	return fmt.Sprintf("idempotency key %q was already used for a different request (call %s): "+
		"a key names one request; send this one with a new key", e.Key, e.WorkflowID)
}

// Unwrap returns ErrKeyReused.
func (e *KeyReusedError) Unwrap() error { return ErrKeyReused }

// Key returns the workflow ID a request runs under, its idempotency key,
// without a deployment secret (local development); Client.Key uses the
// client's IDs.
func Key(req workflows.CallRequest) (string, error) {
	return (&Client{}).Key(req)
}

// Key returns the workflow ID a request runs under: its idempotency key
// (see request.IDs.For).
func (c *Client) Key(req workflows.CallRequest) (string, error) {
	if req.IdempotencyKey != "" {
		if err := request.ValidateKey(req.IdempotencyKey); err != nil {
			return "", fmt.Errorf("%w: idempotency_key: %v", ErrInvalidRequest, err)
		}
	}
	return c.IDs.For(req), nil
}

// ExecutionTimeout is the workflow execution timeout of req's call: its
// deadline (Deadline when it sets none) plus ExecutionMargin.
func (c *Client) ExecutionTimeout(req workflows.CallRequest) time.Duration {
	d := time.Duration(req.DeadlineMS) * time.Millisecond
	if d <= 0 {
		d = c.Deadline
	}
	if d <= 0 {
		// The workers' default deadline is unknown here: the longest one
		// a request may ask for bounds it, so a call is never cut before
		// its worker's deadline (a policy with a longer call.deadline
		// sets Deadline).
		d = config.DefaultConfig().Call.MaxDeadline.D()
	}
	m := c.ExecutionMargin
	if m <= 0 {
		m = DefaultExecutionMargin
	}
	return d + m
}

// checkRequest refuses a request with an explicit idempotency key that
// reached a call started by another request (KeyReusedError). A call
// without a fingerprint (started before calls kept one) is taken as it is.
func (c *Client) checkRequest(ctx context.Context, id string, req workflows.CallRequest) error {
	if req.IdempotencyKey == "" {
		return nil // the derived key is the fingerprint
	}
	desc, err := c.Temporal.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return fmt.Errorf("LLM call %s: check that it runs this request: %w", id, err)
	}
	var fp string
	switch err := desc.GetMemoValue(MemoFingerprint, &fp); {
	case errors.Is(err, temporal.ErrNoData):
		return nil
	case err != nil:
		return fmt.Errorf("LLM call %s: read its request fingerprint: %w", id, err)
	}
	if fp != c.IDs.Fingerprint(req) {
		return &KeyReusedError{Key: req.IdempotencyKey, WorkflowID: id}
	}
	return nil
}

// precheck refuses what must never reach Temporal: a prompt over the size
// limit, a request with no messages, or a temperature JSON cannot carry
// (NaN, ±Inf). The worker validates everything else
// (it knows the model ladder) and fails the call at once, without an
// upstream request.
func (c *Client) precheck(req workflows.CallRequest) error {
	if size, limit := request.PromptBytes(req.Messages), request.MaxPromptBytes(c.Limits); size > limit {
		return fmt.Errorf("%w: messages: prompt is %d bytes, over the %d-byte limit", ErrInvalidRequest, size, limit)
	}
	if len(req.Messages) == 0 {
		return fmt.Errorf("%w: messages: at least one message is required", ErrInvalidRequest)
	}
	if b, err := json.Marshal(req); err == nil && len(b) > request.MaxEncodedRequestBytes {
		return fmt.Errorf("%w: messages: the request is %d bytes once JSON-encoded, over the %d a Temporal payload may carry",
			ErrInvalidRequest, len(b), request.MaxEncodedRequestBytes)
	}
	if t := req.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0)) {
		// JSON cannot carry it: without this the payload encoder fails
		// with a message that names no field.
		return fmt.Errorf("%w: temperature: %v is not a number (want a finite number, such as 0.7)", ErrInvalidRequest, *t)
	}
	return nil
}

// Start starts the call, or attaches to the call with the same key: a
// running call is joined, a finished one returns its recorded result
// without a new run (a failed or timed-out call is run again). A request
// with an explicit idempotency key that reaches a call of another request
// gets a *KeyReusedError.
func (c *Client) Start(ctx context.Context, req workflows.CallRequest) (client.WorkflowRun, error) {
	run, _, err := c.Begin(ctx, req)
	return run, err
}

// Begin is Start, which also reports whether the call it reached is a
// duplicate's: started by an earlier request under the same workflow ID,
// still running or completed within req's Window, so that its answer is
// that earlier request's and this one sends nothing upstream. False: this
// request started the call (the first of its key, or the first after the
// window, or after a failed run).
func (c *Client) Begin(ctx context.Context, req workflows.CallRequest) (client.WorkflowRun, bool, error) {
	id, opts, err := c.startOptions(req)
	if err != nil {
		return nil, false, err
	}
	// A start that meets a run, running or closed, is an error here, so
	// that it is told from a new one (the SDK would hand the run back as
	// if it had started it), and a closed run past its window is
	// started anew.
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	opts.EnableEagerStart = c.EagerStart
	run, err := c.Temporal.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, req)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) && c.expired(ctx, id, req) {
		// Completed longer ago than its window: the same request is a new
		// call (a new run under the same ID).
		run, err = c.Temporal.ExecuteWorkflow(ctx, anew(opts), workflows.WorkflowName, req)
	}
	duplicate := false
	if errors.As(err, &started) {
		// Running, or completed within the window: its answer is this
		// request's.
		run, err, duplicate = c.Temporal.GetWorkflow(ctx, id, started.RunId), nil, true
	}
	if err != nil {
		return nil, false, fmt.Errorf("start LLM call %s: %w", id, err)
	}
	if !duplicate {
		// This request started the run (the start errs when one
		// exists): its fingerprint is the one the run keeps.
		return run, false, nil
	}
	if err := c.checkRequest(ctx, id, req); err != nil {
		return nil, false, err
	}
	return run, true, nil
}

// Window is how long a completed call of req answers the same request
// again: KeyWindow for an explicit idempotency key, else ReplayWindow.
func (c *Client) Window(req workflows.CallRequest) time.Duration { return c.window(req) }

// startOptions checks req and returns its workflow ID and start options.
func (c *Client) startOptions(req workflows.CallRequest) (string, client.StartWorkflowOptions, error) {
	if err := c.precheck(req); err != nil {
		return "", client.StartWorkflowOptions{}, err
	}
	id, err := c.Key(req)
	if err != nil {
		return "", client.StartWorkflowOptions{}, err
	}
	memo := map[string]any{}
	if req.Tenant != "" {
		memo[MemoTenant] = req.Tenant
	}
	if req.IdempotencyKey != "" {
		memo[MemoFingerprint] = c.IDs.Fingerprint(req)
	}
	if req.NoStore {
		memo[MemoNoStore] = true
	}
	return id, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                c.taskQueue(),
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowExecutionTimeout: c.ExecutionTimeout(req),
		Memo:                     memo,
		StaticSummary:            markdown.Escape(Summary(req)), // the Web UI renders it as Markdown
		StaticDetails:            details(req),
	}, nil
}

// Call starts (or attaches to) the call and returns its first answer: the
// call's result, or, when a hedge answered first under hedge.replace, that
// quick answer (res.Replaceable); Result(ctx, res.RequestID) then waits
// for the final one, which the first model's answer may replace (README
// "Hedged calls"). The start and the wait for the answer are one request
// (update-with-start), so the call's first workflow task takes both; a
// call that completed before is refused the start and answers with its
// recorded result. A request with an explicit idempotency key that
// reaches a call of another request gets a *KeyReusedError, checked as
// soon as the call accepted the wait (before its answer).
func (c *Client) Call(ctx context.Context, req workflows.CallRequest) (workflows.CallResult, error) {
	id, opts, err := c.startOptions(req)
	if err != nil {
		return workflows.CallResult{}, err
	}
	explicit := req.IdempotencyKey != ""
	uo := answerUpdate(id)
	if explicit {
		// Return once the call took the wait, to compare the requests
		// before waiting for an answer that may be another request's.
		uo.WaitForStage = client.WorkflowUpdateStageAccepted
	}
	op := c.Temporal.NewWithStartWorkflowOperation(opts, workflows.WorkflowName, req)
	h, err := c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions:          uo,
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) && c.expired(ctx, id, req) {
		// Completed longer ago than its window: a new run, the same ID.
		op = c.Temporal.NewWithStartWorkflowOperation(anew(opts), workflows.WorkflowName, req)
		h, err = c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions:          uo,
		})
	}
	checked := false
	if err == nil {
		if explicit {
			if cerr := c.checkRequest(ctx, id, req); cerr != nil {
				return workflows.CallResult{}, cerr
			}
			checked = true
		}
		var res workflows.CallResult
		if err = h.Get(ctx, &res); err == nil {
			return res, nil
		}
	}
	if ctx.Err() != nil {
		return workflows.CallResult{}, fmt.Errorf("LLM call %s: %w", id, ctx.Err())
	}
	if !errors.As(err, &started) {
		// Not started (the start's own error), or started but without an
		// answer from the update (the call failed, or its worker's build
		// has no answer update): the workflow's result says which.
		if _, derr := c.Temporal.DescribeWorkflowExecution(ctx, id, ""); derr != nil {
			return workflows.CallResult{}, fmt.Errorf("start LLM call %s: %w", id, err)
		}
	}
	if explicit && !checked {
		if err := c.checkRequest(ctx, id, req); err != nil {
			return workflows.CallResult{}, err
		}
	}
	return c.final(ctx, id)
}

// Answer waits for the first answer of the started call id (see Call).
func (c *Client) Answer(ctx context.Context, id string) (workflows.CallResult, error) {
	h, err := c.Temporal.UpdateWorkflow(ctx, answerUpdate(id))
	if err == nil {
		var res workflows.CallResult
		if err = h.Get(ctx, &res); err == nil {
			return res, nil
		}
	}
	if ctx.Err() != nil {
		return workflows.CallResult{}, fmt.Errorf("LLM call %s: %w", id, ctx.Err())
	}
	return c.final(ctx, id)
}

func answerUpdate(id string) client.UpdateWorkflowOptions {
	return client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   workflows.UpdateAnswer,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	}
}

// final waits for the workflow's result, with Call's error wording.
func (c *Client) final(ctx context.Context, id string) (workflows.CallResult, error) {
	res, err := c.Result(ctx, id)
	if err != nil {
		return res, fmt.Errorf("LLM call %s: %w", id, err)
	}
	return res, nil
}

// Result waits for the call with this workflow ID.
func (c *Client) Result(ctx context.Context, id string) (workflows.CallResult, error) {
	return c.RunResult(ctx, id, "")
}

// RunResult waits for run runID of the call id; with the run ID known (a
// Describe's) the SDK reads the history's close event without a Describe
// of its own.
func (c *Client) RunResult(ctx context.Context, id, runID string) (workflows.CallResult, error) {
	var res workflows.CallResult
	err := c.Temporal.GetWorkflow(ctx, id, runID).Get(ctx, &res)
	return res, err
}

// State returns the result so far of a running call (the workflow's state
// query), or the final result of a finished one.
func (c *Client) State(ctx context.Context, id string) (workflows.CallResult, error) {
	var res workflows.CallResult
	v, err := c.Temporal.QueryWorkflow(ctx, id, "", workflows.QueryState)
	if err != nil {
		return res, err
	}
	err = v.Get(&res)
	return res, err
}

// UILink is the Web UI page of a call.
func (c *Client) UILink(id string) string {
	base := c.UIBase
	if base == "" {
		base = "http://localhost:8233"
	}
	ns := c.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(base, "/"), url.PathEscape(ns), url.PathEscape(id))
}

// summaryWords bounds the question's part of a summary.
const summaryWords = 60

// Summary is the one-line static summary the Web UI's list and page show
// for a call: its scenario, the first words of its question and its
// tenant ("customer_service · “Where is my order 12?” · acme"), so an
// operator can tell the rows apart. Like the call's input it goes through
// the payload codec: encrypted when encryption is on.
func Summary(req workflows.CallRequest) string {
	q := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == request.RoleUser {
			q = req.Messages[i].Content
			break
		}
	}
	q = strings.Join(strings.Fields(q), " ")
	if utf8.RuneCountInString(q) > summaryWords {
		q = string([]rune(q)[:summaryWords]) + "…"
	}
	parts := []string{}
	if req.Scenario != "" {
		parts = append(parts, req.Scenario)
	}
	if q == "" {
		q = fmt.Sprintf("%d message(s), no user question", len(req.Messages))
		parts = append(parts, q)
	} else {
		parts = append(parts, "“"+q+"”")
	}
	if req.Tenant != "" {
		parts = append(parts, req.Tenant)
	}
	return strings.Join(parts, " · ")
}

func details(req workflows.CallRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**user** %s  \n**session** %s  \n**scenario** %s  \n**model** %s",
		orDash(req.UserID), orDash(req.SessionID), orDash(req.Scenario), orDash(req.Model))
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return markdown.Escape(s)
}
