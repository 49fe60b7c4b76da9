package llmworkflow

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// NexusKey returns the idempotency key CallNexus sends for req from this
// workflow: "nx-" and the SHA-256 of the caller's workflow ID and its turn
// (WithTurn, else the request's fingerprint), unless the request or
// WithIdempotencyKey names one. The service scopes it by the caller's
// namespace, so the call's ID is a function of the namespace, the caller's
// workflow ID and the turn: a retried, replayed or reset caller reaches
// the same call for the same turn.
func NexusKey(ctx workflow.Context, req workflows.CallRequest, opts ...Option) (string, error) {
	o := resolve(opts)
	req = o.apply(req)
	return nexusKey(ctx, req, o)
}

func nexusKey(ctx workflow.Context, req workflows.CallRequest, o options) (string, error) {
	if req.IdempotencyKey != "" {
		if err := request.ValidateKey(req.IdempotencyKey); err != nil {
			return "", invalidf("idempotency_key: %v", err)
		}
		return req.IdempotencyKey, nil
	}
	turn := o.turn
	if turn != "" {
		if err := request.ValidateKey(turn); err != nil {
			return "", invalidf("turn key: %v", err)
		}
	} else {
		//workflowcheck:ignore request IDs are pure: canonical JSON and SHA-256 (workflowcheck sees the allocator under encoding/json)
		turn = o.ids.Fingerprint(req)
	}
	h := sha256.New()
	h.Write([]byte(workflow.GetInfo(ctx).WorkflowExecution.ID))
	h.Write([]byte{0})
	h.Write([]byte(turn))
	return "nx-" + hex.EncodeToString(h.Sum(nil)), nil
}

// CallNexus runs req through the durable-llm Nexus service on endpoint
// (an endpoint whose target is the durable-llm namespace and task queue)
// and returns the call's result, as Call does for a call in the same
// namespace. The call's tenant is this workflow's namespace (a tenant in
// req is replaced by the service). Its idempotency key is NexusKey's, so
// a retried start or a replayed, retried or reset caller reaches the same
// call for the same turn. Cancelling ctx cancels the call. WithTaskQueue
// and WithWorkflowID do not apply (the endpoint names the queue, the
// service the ID).
//
// Errors are *Error, as Call's (Kind FallbackUnavailable, InvalidRequest,
// Canceled, TimedOut, Failed).
func CallNexus(ctx workflow.Context, endpoint string, req workflows.CallRequest, opts ...Option) (workflows.CallResult, error) {
	return callNexus(ctx, endpoint, req, resolve(opts))
}

func callNexus(ctx workflow.Context, endpoint string, req workflows.CallRequest, o options) (workflows.CallResult, error) {
	req = o.apply(req)
	if err := precheck(req); err != nil {
		return workflows.CallResult{}, err
	}
	key, err := nexusKey(ctx, req, o)
	if err != nil {
		return workflows.CallResult{}, err
	}
	req.IdempotencyKey = key
	c := workflow.NewNexusClient(endpoint, workflows.NexusService)
	op := workflows.NexusOperationCall
	if o.quick {
		op = workflows.NexusOperationCallQuick
	}
	f := c.ExecuteOperation(ctx, op, req, workflow.NexusOperationOptions{
		// The call's execution timeout, and a minute to start it.
		ScheduleToCloseTimeout: o.executionTimeout(req) + time.Minute,
		Summary:                "LLM call through Nexus",
	})
	var res workflows.CallResult
	if err := f.Get(ctx, &res); err != nil {
		return res, typed("", err)
	}
	return res, nil
}
