package llmnexus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/durable-llm/durable-llm/internal/markdown"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Options configure Service.
type Options struct {
	// TaskQueue of the LLMCall workers; default workflows.TaskQueue.
	TaskQueue string
	// IDs derive the calls' workflow IDs (request.IDsFromEnv); default
	// plain SHA-256. The same as the front door's and llmclient's.
	IDs request.IDs
	// Client gives the calls' execution timeout (its Deadline and
	// ExecutionMargin); its Temporal and IDs fields are not used.
	Client llmclient.Client
	// QuickWait is how long call_quick waits for the call before it goes
	// on asynchronously; default DefaultQuickWait. It is also kept a
	// second inside the handler's own deadline.
	QuickWait time.Duration
}

// DefaultQuickWait is the default of Options.QuickWait: a model's short
// answer fits, and the handler answers well within the Nexus request's
// deadline (10 s on the Temporal server by default).
const DefaultQuickWait = 5 * time.Second

// Service returns the Nexus service with the call operation. Register it
// on a worker of the calls' namespace (worker.RegisterNexusService).
func Service(o Options) (*nexus.Service, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.TaskQueue
	}
	op, err := o.callOperation(workflows.NexusOperationCall)
	if err != nil {
		return nil, err
	}
	async, err := o.callOperation(workflows.NexusOperationCallQuick)
	if err != nil {
		return nil, err
	}
	s := nexus.NewService(workflows.NexusService)
	if err := s.Register(op, &quickOperation{async: async, o: o}); err != nil {
		return nil, err
	}
	return s, nil
}

// callOperation is the asynchronous call operation under name: the
// LLMCall workflow of the request, with the caller's namespace as its
// tenant and the operation's completion callback attached (to a running
// call of the same ID too).
func (o Options) callOperation(name string) (nexus.Operation[workflows.CallRequest, workflows.CallResult], error) {
	return temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[workflows.CallRequest, workflows.CallResult]{
		Name: name,
		Handler: func(ctx context.Context, req workflows.CallRequest, so nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[workflows.CallResult], error) {
			req, opts, err := o.tenantCall(req, so)
			if err != nil {
				return nil, err
			}
			return temporalnexus.ExecuteUntypedWorkflow[workflows.CallResult](ctx, so, opts, workflows.WorkflowName, req)
		},
	})
}

// tenantCall is req with the caller's namespace as its tenant, and its
// start options.
func (o Options) tenantCall(req workflows.CallRequest, so nexus.StartOperationOptions) (workflows.CallRequest, client.StartWorkflowOptions, error) {
	ns, err := CallerNamespace(so.Links)
	if err != nil {
		return req, client.StartWorkflowOptions{}, err
	}
	req.Tenant = ns
	opts, err := o.startOptions(req)
	return req, opts, err
}

// quickOperation is call_quick. It starts the call (or finds the running
// or completed one of the same ID) without a completion callback and
// waits for it up to QuickWait: a call that ends in time is the start
// response's own result, which saves the caller's server the callback
// round trip (docs/nexus.md "What each path costs"); a call still running
// then goes on as call does, the callback attached to the same run
// (temporalnexus attaches callbacks to a running workflow of the ID), so
// it is never started twice.
type quickOperation struct {
	nexus.UnimplementedOperation[workflows.CallRequest, workflows.CallResult]
	async nexus.Operation[workflows.CallRequest, workflows.CallResult]
	o     Options
}

func (q *quickOperation) Name() string { return workflows.NexusOperationCallQuick }

func (q *quickOperation) Start(ctx context.Context, in workflows.CallRequest, so nexus.StartOperationOptions) (nexus.HandlerStartOperationResult[workflows.CallResult], error) {
	req, opts, err := q.o.tenantCall(in, so)
	if err != nil {
		return nil, err
	}
	wait := q.o.QuickWait
	if wait <= 0 {
		wait = DefaultQuickWait
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-time.Second)
	}
	if wait > 0 {
		c := temporalnexus.GetClient(ctx)
		run, err := c.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, req)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			// Closed and not to be run again (the ID reuse policy): its
			// outcome is this operation's.
			run, err = c.GetWorkflow(ctx, opts.ID, started.RunId), nil
		}
		if err != nil {
			return nil, err
		}
		// The caller's event links to the call, as the asynchronous
		// operation's does: the audit trail from the agent to the call.
		link := func() {
			nexus.AddHandlerLinks(ctx, temporalnexus.ConvertLinkWorkflowEventToNexusLink(&commonpb.Link_WorkflowEvent{
				Namespace: temporalnexus.GetOperationInfo(ctx).Namespace, WorkflowId: run.GetID(), RunId: run.GetRunID(),
				Reference: &commonpb.Link_WorkflowEvent_EventRef{EventRef: &commonpb.Link_WorkflowEvent_EventReference{
					EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED}},
			}))
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		var res workflows.CallResult
		err = run.Get(wctx, &res)
		// The server may end the wait a moment before wctx's timer fires
		// (llmclient.WaitEnded): still running all the same.
		timedOut := ctx.Err() == nil && llmclient.WaitEnded(wctx, err)
		cancel()
		switch {
		case err == nil:
			link()
			return &nexus.HandlerStartOperationResultSync[workflows.CallResult]{Value: res}, nil
		case timedOut:
			// Still running: on as call, below.
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			// The call ended without an answer (fallback unavailable, an
			// invalid request): the operation failed, with the call's error.
			link()
			return nil, &nexus.OperationError{State: nexus.OperationStateFailed, Message: "LLM call " + opts.ID + " failed", Cause: unwrapWorkflowError(err)}
		}
	}
	return q.async.Start(ctx, in, so)
}

func (q *quickOperation) Cancel(ctx context.Context, token string, co nexus.CancelOperationOptions) error {
	return q.async.Cancel(ctx, token, co)
}

// unwrapWorkflowError is the cause of a workflow's failure (the call's
// ApplicationError), as the asynchronous operation reports it.
func unwrapWorkflowError(err error) error {
	var we *temporal.WorkflowExecutionError
	if errors.As(err, &we) {
		if cause := errors.Unwrap(we); cause != nil {
			return cause
		}
	}
	return err
}

// CallerNamespace returns the namespace of the workflow that started the
// operation: the namespace of the first link to a workflow event, which
// the Temporal server attaches (the caller's NexusOperationScheduled
// event). Without one it is a bad request.
func CallerNamespace(links []nexus.Link) (string, error) {
	want := string((&commonpb.Link_WorkflowEvent{}).ProtoReflect().Descriptor().FullName())
	for _, l := range links {
		if l.Type != want {
			continue
		}
		we, err := temporalnexus.ConvertNexusLinkToLinkWorkflowEvent(l)
		if err == nil && we.GetNamespace() != "" {
			return we.GetNamespace(), nil
		}
	}
	return "", nexus.NewHandlerErrorf(nexus.HandlerErrorTypeBadRequest,
		"%s: the caller's namespace is unknown (call the operation from a workflow, through a Temporal Nexus endpoint)", workflows.NexusService)
}

// startOptions are the call's start options, as llmclient starts a call,
// with a conflicting start attached to the running call.
func (o Options) startOptions(req workflows.CallRequest) (client.StartWorkflowOptions, error) {
	if len(req.Messages) == 0 {
		return client.StartWorkflowOptions{}, badRequest("messages: at least one message is required")
	}
	if req.IdempotencyKey != "" {
		if err := request.ValidateKey(req.IdempotencyKey); err != nil {
			return client.StartWorkflowOptions{}, badRequest(fmt.Sprintf("idempotency_key: %v", err))
		}
	}
	id := o.IDs.For(req)
	memo := map[string]any{llmclient.MemoTenant: req.Tenant, llmclient.MemoFingerprint: o.IDs.Fingerprint(req)}
	if req.NoStore {
		memo[llmclient.MemoNoStore] = true
	}
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                o.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowExecutionTimeout: o.Client.ExecutionTimeout(req),
		Memo:                     memo,
		StaticSummary:            markdown.Escape(llmclient.Summary(req)),
	}, nil
}

func badRequest(msg string) error {
	return nexus.NewHandlerErrorf(nexus.HandlerErrorTypeBadRequest, "%s: %s", workflows.NexusService, msg)
}

// EnsureEndpoint creates the Nexus endpoint name, whose target is the
// durable-llm workers' namespace and task queue, unless an endpoint of
// that name exists (it is then left as it is). c is any client of the
// cluster (the endpoint registry is cluster-wide).
func EnsureEndpoint(ctx context.Context, c client.Client, name, namespace, taskQueue string) error {
	ops := c.OperatorService()
	list, err := ops.ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: name})
	if err != nil {
		return fmt.Errorf("nexus endpoint %s: list: %w", name, err)
	}
	if len(list.GetEndpoints()) > 0 {
		return nil
	}
	_, err = ops.CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: name,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
			Namespace: namespace, TaskQueue: taskQueue,
		}}},
	}})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("nexus endpoint %s: create: %w", name, err)
	}
	return nil
}
