package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// errNoCall is returned by lookup for an ID that is not an LLMCall, or not
// one a tenant started through the front door.
var errNoCall = errors.New("no such call")

// CallStatus is the body of a 202 answer: the call was accepted (POST with
// Prefer: respond-async) or is still running (GET /v1/calls/{id}). Poll URL
// until it answers 200 with the chat.completion.
type CallStatus struct {
	// ID is the workflow ID of the call.
	ID string `json:"id"`
	// Object is "chat.completion.call".
	Object string `json:"object"`
	// Status is "running" (or "canceling", the answer to DELETE).
	Status string `json:"status"`
	// URL to GET for the result, relative to the front door's root.
	URL string `json:"url"`
	// Resilience is the state of the call so far (its attempts and
	// failure classes, from its search attributes), when known.
	Resilience *Resilience `json:"x_resilience,omitempty"`
}

// callURL is the path that returns a call's result.
func callURL(id string) string { return "/v1/calls/" + id }

// ownCall describes the call id of tenant with one Describe: its owner
// (from the memo the front door's client writes at the start, else the
// LlmTenant search attribute the workflow sets), status and search
// attributes. Another tenant's call, and anything that is not an LLMCall
// started for a tenant, is callNotFound.
func (h *Handler) ownCall(ctx context.Context, id, tenant string) (*client.WorkflowExecutionDescription, *apiError) {
	if request.ValidateKey(id) != nil {
		return nil, callNotFound(id)
	}
	desc, err := h.o.Client.Temporal.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil, callNotFound(id)
	case err != nil:
		return nil, h.lookupFailed(err)
	}
	owner, err := ownerOf(desc)
	switch {
	case errors.Is(err, errNoCall):
		return nil, callNotFound(id)
	case err != nil:
		return nil, h.lookupFailed(fmt.Errorf("call %s: %w", id, err))
	case owner != tenant:
		return nil, callNotFound(id)
	}
	return desc, nil
}

// ownerOf is the tenant of a described call: the memo's (the front door
// puts the bearer token's tenant there at the start, so it is known even
// before a worker took the call), else the LlmTenant search attribute
// (calls started before the memo was written).
func ownerOf(desc *client.WorkflowExecutionDescription) (string, error) {
	if desc.WorkflowType.Name != workflows.WorkflowName {
		return "", errNoCall
	}
	var owner string
	err := desc.GetMemoValue(llmclient.MemoTenant, &owner)
	switch {
	case errors.Is(err, temporal.ErrNoData):
		owner, _ = desc.TypedSearchAttributes.GetKeyword(workflows.SATenant)
	case err != nil:
		return "", fmt.Errorf("decode its memo (does the front door have the workers' payload keys?): %w", err)
	}
	if owner == "" {
		return "", errNoCall // not started for a tenant
	}
	return owner, nil
}

// runningStatus is the 202 body of a running call: what its search
// attributes say so far (attempts, failure classes), no query to a
// worker.
func runningStatus(id string, desc *client.WorkflowExecutionDescription) CallStatus {
	rs := Resilience{WorkflowID: id, Status: StatusRunning, Attempts: []workflows.Attempt{}, Classes: []string{}}
	sa := desc.TypedSearchAttributes
	if n, ok := sa.GetInt64(workflows.SAAttempts); ok {
		rs.AttemptCount = int(n)
	}
	if cs, ok := sa.GetKeywordList(workflows.SAClasses); ok && cs != nil {
		rs.Classes = cs
	}
	return CallStatus{ID: id, Object: "chat.completion.call", Status: StatusRunning, URL: callURL(id), Resilience: &rs}
}

// withOwnCall looks up the tenant's call named in the request's path,
// under the lookup timeout, and runs then with it; a call of another
// tenant is refused exactly like one that does not exist.
func (h *Handler) withOwnCall(w http.ResponseWriter, r *http.Request, tenant string,
	then func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription)) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), h.o.LookupTimeout)
	defer cancel()
	desc, apiErr := h.ownCall(ctx, id, tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	w.Header().Set(HeaderWorkflowID, id)
	then(ctx, id, desc)
}

// getCall serves GET /v1/calls/{id}: 200 with the completion when the call
// is done, 202 with its state while it runs. A call of another tenant is
// answered exactly like a call that does not exist. A poll is one
// Describe; the result is read (its history's close event) only once the
// call has ended.
func (h *Handler) getCall(w http.ResponseWriter, r *http.Request, tenant string) {
	h.withOwnCall(w, r, tenant, func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) {
		if desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			w.Header().Set("Location", callURL(id))
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusAccepted, runningStatus(id, desc))
			return
		}
		res, err := h.o.Client.RunResult(ctx, id, desc.WorkflowExecution.RunID)
		if err != nil {
			h.callFailed(id, err).write(w)
			return
		}
		created := h.o.Now()
		if t := desc.WorkflowCloseTime; t != nil {
			created = *t
		}
		writeCompletion(w, id, created, res, nil)
	})
}

// cancelCall serves DELETE /v1/calls/{id}: it asks the tenant's running
// call to cancel (202; a GET then answers 410 call_canceled once it has
// stopped), answers 409 for a call that already ended, and 404 for an
// unknown call or another tenant's, alike.
func (h *Handler) cancelCall(w http.ResponseWriter, r *http.Request, tenant string) {
	h.withOwnCall(w, r, tenant, func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) {
		if desc.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			callNotRunning(id, llmclient.StatusWord(desc.Status)).write(w)
			return
		}
		err := h.o.Client.Temporal.CancelWorkflow(ctx, id, desc.WorkflowExecution.RunID)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			callNotRunning(id, "it ended while being canceled").write(w) // the run closed in between
			return
		case err != nil:
			h.lookupFailed(err).write(w)
			return
		}
		w.Header().Set("Location", callURL(id))
		writeJSON(w, http.StatusAccepted, CallStatus{ID: id, Object: "chat.completion.call", Status: StatusCanceling, URL: callURL(id)})
	})
}
