package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// stateQueryTimeout bounds the state query of a running call's poll.
const stateQueryTimeout = 3 * time.Second

// errNoCall is returned by owner for an ID that is not an LLMCall.
var errNoCall = errors.New("no such call")

// getCall serves GET /v1/calls/{id}: 200 with the completion when the call
// is done, 202 with its state while it runs. A call of another tenant is
// answered exactly like a call that does not exist.
func (h *Handler) getCall(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("id")
	notFound := &apiError{status: http.StatusNotFound, typ: typeNotFound, param: "id", code: "call_not_found",
		message: fmt.Sprintf("No call with ID %q.", id)}
	if request.ValidateKey(id) != nil {
		notFound.write(w)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.LookupTimeout)
	defer cancel()

	owner, err := h.owner(ctx, id)
	switch {
	case errors.Is(err, errNoCall):
		notFound.write(w)
		return
	case err != nil:
		h.lookupFailed(err).write(w)
		return
	case owner != tenant:
		notFound.write(w)
		return
	}
	w.Header().Set(HeaderWorkflowID, id)

	desc, err := h.o.Client.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		h.lookupFailed(err).write(w)
		return
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		st := CallStatus{ID: id, Object: "chat.completion.call", Status: StatusRunning, URL: callURL(id)}
		// The state query needs a worker; without one the status is all
		// there is to say, and the poll is not held up for long.
		qctx, cancel := context.WithTimeout(ctx, stateQueryTimeout)
		res, err := h.o.Client.State(qctx, id)
		cancel()
		if err == nil {
			rs := resilienceOf(id, StatusRunning, res)
			st.Resilience = &rs
		}
		w.Header().Set("Location", callURL(id))
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusAccepted, st)
		return
	}
	res, err := h.o.Client.Result(ctx, id)
	if err != nil {
		h.callFailed(id, err).write(w)
		return
	}
	created := h.o.Now()
	if t := info.GetCloseTime(); t != nil {
		created = t.AsTime()
	}
	writeCompletion(w, id, created, res)
}

// owner returns the tenant of the call with this workflow ID, read from
// its input in the first history event: the front door puts the tenant of
// the bearer token there when it starts the call, and a workflow's input
// never changes.
func (h *Handler) owner(ctx context.Context, id string) (string, error) {
	resp, err := h.o.Client.Temporal.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace:       h.namespace,
		Execution:       &commonpb.WorkflowExecution{WorkflowId: id},
		MaximumPageSize: 1,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "", errNoCall
	}
	if err != nil {
		return "", err
	}
	events := resp.GetHistory().GetEvents()
	if len(events) == 0 {
		return "", errNoCall
	}
	started := events[0].GetWorkflowExecutionStartedEventAttributes()
	if started == nil || started.GetWorkflowType().GetName() != workflows.WorkflowName {
		return "", errNoCall
	}
	var req workflows.CallRequest
	if err := h.o.DataConverter.FromPayloads(started.GetInput(), &req); err != nil {
		return "", fmt.Errorf("decode the input of call %s (does the front door have the workers' payload keys?): %w", id, err)
	}
	if req.Tenant == "" {
		return "", errNoCall // not started through the front door
	}
	return req.Tenant, nil
}

func (h *Handler) lookupFailed(err error) *apiError {
	if unreachable(err) {
		return h.unavailable(err)
	}
	h.o.Logger.Error("cannot read a call", "error", err)
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "lookup_failed",
		message: "Cannot read the call; the front door's log says why."}
}
