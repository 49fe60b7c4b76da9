package llmnexus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nexus-rpc/sdk-go/nexus"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
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
}

// Service returns the Nexus service with the call operation. Register it
// on a worker of the calls' namespace (worker.RegisterNexusService).
func Service(o Options) (*nexus.Service, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.TaskQueue
	}
	op, err := temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[workflows.CallRequest, workflows.CallResult]{
		Name: workflows.NexusOperationCall,
		Handler: func(ctx context.Context, req workflows.CallRequest, so nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[workflows.CallResult], error) {
			ns, err := CallerNamespace(so.Links)
			if err != nil {
				return nil, err
			}
			req.Tenant = ns
			opts, err := o.startOptions(req)
			if err != nil {
				return nil, err
			}
			return temporalnexus.ExecuteUntypedWorkflow[workflows.CallResult](ctx, so, opts, workflows.WorkflowName, req)
		},
	})
	if err != nil {
		return nil, err
	}
	s := nexus.NewService(workflows.NexusService)
	if err := s.Register(op); err != nil {
		return nil, err
	}
	return s, nil
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
