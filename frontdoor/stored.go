package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Stored responses and chaining (docs/responses.md). A response is its
// LLMCall workflow and nothing else is kept: previous_response_id reads
// the earlier call's request (its history's first event, which already
// holds every turn before it) and its result, and the new call's input is
// that conversation, the earlier answer (text and function calls in
// order), then the new input. So each turn is one ordinary call whose
// history does not grow with the chain; only its input does, bounded by
// the prompt limit. Instructions are not carried over, as OpenAI does.

// DefaultStoreRetention is the default of Options.StoreRetention: how long
// a completed response may be continued, retrieved and listed (OpenAI keeps
// responses 30 days). Temporal's namespace retention bounds it too.
const DefaultStoreRetention = 30 * 24 * time.Hour

// storedCall is a completed call of the tenant (answered: also one that
// lingers for its stream after its answer), within retention: its request
// and result.
func (h *Handler) storedCall(ctx context.Context, rid, tenant string) (workflows.CallRequest, workflows.CallResult, *client.WorkflowExecutionDescription, *apiError) {
	var req workflows.CallRequest
	var res workflows.CallResult
	id, desc, apiErr := h.ownResponse(ctx, rid, tenant)
	if apiErr != nil {
		return req, res, nil, apiErr
	}
	if !answered(desc) {
		return req, res, desc, responseNotCompleted(rid)
	}
	if keep := h.retention(tenant); desc.WorkflowCloseTime != nil && !desc.WorkflowCloseTime.IsZero() && h.o.Now().Sub(*desc.WorkflowCloseTime) > keep {
		return req, res, desc, responseExpired(rid, keep)
	}
	runID := desc.WorkflowExecution.RunID
	var err error
	if req, err = h.o.Client.Request(ctx, h.o.DataConverter, id, runID); err != nil {
		return req, res, desc, h.lookupFailed(err)
	}
	if res, err = h.answerOf(ctx, id, desc); err != nil {
		return req, res, desc, h.lookupFailed(err)
	}
	return req, res, desc, nil
}

// retention is how long tenant's completed responses are kept: the front
// door's StoreRetention, or the tenant's store_retention when shorter.
func (h *Handler) retention(tenant string) time.Duration {
	keep := DefaultStoreRetention
	if h.o.StoreRetention > 0 {
		keep = h.o.StoreRetention
	}
	if own := h.o.Tenants.Limits(tenant).StoreRetention.D(); own > 0 && own < keep {
		keep = own
	}
	return keep
}

// chain puts the conversation of the tenant's response prev before req's
// messages (after req's own instructions).
func (h *Handler) chain(ctx context.Context, req *workflows.CallRequest, prev, tenant string) *apiError {
	ctx, cancel := context.WithTimeout(ctx, h.o.LookupTimeout)
	defer cancel()
	preq, pres, _, apiErr := h.storedCall(ctx, prev, tenant)
	if apiErr != nil {
		if apiErr.status == http.StatusNotFound && strings.Contains(apiErr.message, notStoredNote) {
			return prevError(http.StatusNotFound, "previous_response_not_found", fmt.Sprintf("response %q %s and cannot be continued "+
				"(send the conversation as input, or create the response with store: true).", prev, notStoredNote))
		}
		if apiErr.status == http.StatusNotFound {
			return prevError(http.StatusNotFound, "previous_response_not_found", fmt.Sprintf("no response with ID %q.", prev))
		}
		if apiErr.status == http.StatusBadRequest {
			apiErr.param = "previous_response_id"
		}
		return apiErr
	}
	var msgs []request.Message
	rest := req.Messages
	for len(rest) > 0 && rest[0].Role == request.RoleSystem {
		msgs, rest = append(msgs, rest[0]), rest[1:]
	}
	for _, m := range preq.Messages {
		if m.Role != request.RoleSystem {
			msgs = append(msgs, m)
		}
	}
	msgs = append(msgs, request.Message{Role: request.RoleAssistant, Content: pres.Content, ToolCalls: pres.ToolCalls})
	req.Messages = append(msgs, rest...)
	return nil
}

// inputItem is an item of GET /v1/responses/{id}/input_items.
func inputItems(rid string, msgs []request.Message) []any {
	var items []any
	for i, m := range msgs {
		id := fmt.Sprintf("item_%s_%d", strings.TrimPrefix(rid, responseIDPrefix), i)
		switch {
		case m.Role == request.RoleTool:
			items = append(items, map[string]any{"type": "function_call_output", "id": id, "call_id": m.ToolCallID,
				"output": m.Text(), "status": "completed"})
		case m.Role == request.RoleAssistant:
			if m.Text() != "" || len(m.ToolCalls) == 0 {
				items = append(items, map[string]any{"type": "message", "id": id, "role": m.Role, "status": "completed",
					"content": []any{textPart(m.Text())}})
			}
			for j, c := range m.ToolCalls {
				items = append(items, functionCallItem{Type: "function_call", ID: fmt.Sprintf("%s_%d", id, j), CallID: c.ID,
					Name: c.Function.Name, Arguments: c.Function.Arguments, Status: "completed"})
			}
		default:
			content := []any{}
			if len(m.Parts) == 0 {
				content = append(content, map[string]any{"type": "input_text", "text": m.Content})
			}
			for _, p := range m.Parts {
				if p.Type == request.PartImageURL && p.ImageURL != nil {
					content = append(content, map[string]any{"type": "input_image", "image_url": p.ImageURL.URL, "detail": p.ImageURL.Detail})
				} else {
					content = append(content, map[string]any{"type": "input_text", "text": p.Text})
				}
			}
			items = append(items, map[string]any{"type": "message", "id": id, "role": m.Role, "status": "completed", "content": content})
		}
	}
	return items
}

// listInputItems serves GET /v1/responses/{id}/input_items: the items the
// response's call was given (instructions excepted), newest first unless
// order=asc.
func (h *Handler) listInputItems(w http.ResponseWriter, r *http.Request, tenant string) {
	order := r.URL.Query().Get("order")
	if order != "" && order != "asc" && order != "desc" {
		invalidOrder().write(w)
		return
	}
	rid := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), h.o.LookupTimeout)
	defer cancel()
	req, _, _, apiErr := h.storedCall(ctx, rid, tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	var msgs []request.Message
	for _, m := range req.Messages {
		if m.Role != request.RoleSystem {
			msgs = append(msgs, m)
		}
	}
	items := inputItems(rid, msgs)
	if order != "asc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	if items == nil {
		items = []any{}
	}
	out := map[string]any{"object": "list", "data": items, "has_more": false, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		out["first_id"], out["last_id"] = idOf(items[0]), idOf(items[len(items)-1])
	}
	writeJSON(w, http.StatusOK, out)
}

func idOf(item any) any {
	switch v := item.(type) {
	case map[string]any:
		return v["id"]
	case functionCallItem:
		return v.ID
	}
	return nil
}

// DeletedWorkflow is the workflow type of a deleted response's tombstone:
// a run under the call's workflow ID that holds nothing of the response.
const DeletedWorkflow = "ResponseDeleted"

// deleteResponse serves DELETE /v1/responses/{id}: the call's workflow
// run is deleted (a running one is terminated first, by Temporal), and a
// tombstone run is started and terminated under its ID. Temporal deletes
// a run asynchronously, and one that completed moments ago only once its
// close tasks are acknowledged (about 30 s on the dev server); the
// tombstone is the workflow's current run from the moment DELETE answers,
// so every endpoint of every front door process answers 404 at once
// (ownerOf knows no tenant of it). It never runs: its first task is
// delayed past its execution timeout, and it is terminated right away.
// Terminated, it lets the same request start a new call under the ID
// (ALLOW_DUPLICATE_FAILED_ONLY); it stays, without content, for the
// namespace's retention, the record of the deletion.
func (h *Handler) deleteResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	h.withOwnResponse(w, r, tenant, func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) {
		if _, err := h.o.Client.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, deleteRequest(h.o.Client.Namespace, desc)); err != nil {
			h.lookupFailed(err).write(w)
			return
		}
		if err := h.tombstone(ctx, id, desc.RawResponse.GetExecutionConfig().GetTaskQueue().GetName(), tenant); err != nil {
			h.lookupFailed(err).write(w) // a DELETE sent again deletes (again) and writes it
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": responseID(id), "object": "response", "deleted": true})
	})
}

// tombstone starts and terminates the DeletedWorkflow run under call id.
// A call started under the ID in between (the same request sent again)
// is a new response: it is left as it is.
func (h *Handler) tombstone(ctx context.Context, id, taskQueue, tenant string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.StartTimeout)
	defer cancel()
	run, err := h.o.Client.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Should the front door stop before the terminate, the run times
		// out within a minute, never having run.
		WorkflowExecutionTimeout: time.Minute, StartDelay: time.Hour,
		StaticSummary: "Response " + responseID(id) + " deleted by tenant " + tenant,
	}, DeletedWorkflow)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start the tombstone of %s: %w", id, err)
	}
	err = h.o.Client.Temporal.TerminateWorkflow(ctx, id, run.GetRunID(), "DELETE /v1/responses/"+responseID(id))
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("terminate the tombstone of %s: %w", id, err)
	}
	return nil
}

func deleteRequest(ns string, desc *client.WorkflowExecutionDescription) *workflowservice.DeleteWorkflowExecutionRequest {
	if ns == "" {
		ns = "default"
	}
	return &workflowservice.DeleteWorkflowExecutionRequest{Namespace: ns,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: desc.WorkflowExecution.ID, RunId: desc.WorkflowExecution.RunID}}
}
