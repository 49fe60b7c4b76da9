package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
)

// Background responses, as OpenAI documents them: POST /v1/responses with
// background: true answers at once with the response object (queued); the
// response is the LLMCall workflow, which runs on without the client, and
// its ID is resp_<workflow ID>. GET /v1/responses/{id} reads it as it
// stands (one Describe, and the result once the call ended), POST
// /v1/responses/{id}/cancel cancels the call, and GET
// /v1/responses/{id}?stream=true&starting_after=N streams its events from
// the one after sequence number N (responsesFormat says how the numbers
// are made), from the call's workflow stream while it runs and from its
// result after. A background call always hosts a workflow stream, so that
// any of them can be streamed later. Another tenant's response, and an
// unknown ID, are 404 alike.

// serveResponses serves POST /v1/responses: serveCall's steps, with a
// background response answered once its call started. (It repeats
// serveCall's admission, since whether a request is a background one is
// known only once its body is read in the tenant's turn.)
func (h *Handler) serveResponses(w http.ResponseWriter, r *http.Request, tenant string) {
	created := h.o.Now()
	var background bool
	a := responsesAPI{bg: &background}
	adm, apiErr := h.enter(w, tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	defer h.leave(adm, r)
	body, apiErr := h.readBody(w, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	end, ref, err := adm.slot.Validate(r.Context(), h.o.Now)
	if err != nil {
		return // the client left
	}
	if ref != nil {
		closeEarly(w)
		rateLimited(ref).write(w)
		return
	}
	req, cr, apiErr := h.callRequest(body, r, tenant, a)
	if apiErr == nil {
		apiErr = h.charge(w, adm, req)
	}
	end()
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	if !background {
		h.answerCall(w, r, adm, req, cr, a, created)
		return
	}
	// The call hosts a workflow stream whether or not this request
	// streams, so that GET ?stream=true can follow it live.
	req.Stream = true
	sctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.o.StartTimeout)
	run, replayed, err := h.o.Client.Begin(sctx, req)
	cancel()
	if err != nil {
		h.startFailed(err).write(w)
		return
	}
	id := run.GetID()
	idem := h.idempotencyOf(req, replayed)
	w.Header().Set(HeaderWorkflowID, id)
	adm.id, adm.async = id, true // the call keeps its slot until it ends
	if cr.Stream {
		sw := newSSEWriter(w, responseID(id), created)
		sw.idem = idem
		resume := resumePoint{offset: -1}
		h.stream(w, r, id, h.waitLimit(req), cr, resume, sw, a.stream(sw, cr, resume))
		return
	}
	model := req.Model
	if model == "" {
		model = h.models[0]
	}
	o := newResponseObject(id, created, workflows.CallResult{Model: model}, "queued")
	o.Background = true
	writeJSON(w, http.StatusOK, o)
}

// answerCall answers a started-or-not call of a request that is not a
// background one, as serveCall does after its admission.
func (h *Handler) answerCall(w http.ResponseWriter, r *http.Request, adm *admission, req workflows.CallRequest, cr chatRequest, a api, created time.Time) {
	async := preferAsync(r.Header)
	stream := cr.Stream && !async
	resume := resumePoint{offset: -1}
	if stream {
		var err error
		if resume, err = parseLastEventID(r.Header.Get(HeaderLastEventID)); err != nil {
			(&apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: HeaderLastEventID, code: "invalid_value",
				message: "Invalid request: " + HeaderLastEventID + " header: " + err.Error()}).write(w)
			return
		}
		req.Stream = true
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.o.StartTimeout)
	run, replayed, err := h.o.Client.Begin(sctx, req)
	cancel()
	if err != nil {
		h.startFailed(err).write(w)
		return
	}
	id := run.GetID()
	idem := h.idempotencyOf(req, replayed)
	w.Header().Set(HeaderWorkflowID, id)
	adm.id, adm.async = id, async
	switch {
	case async:
		w.Header().Set("Location", callURL(id))
		w.Header().Set("Preference-Applied", "respond-async")
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusAccepted, CallStatus{ID: id, Object: "chat.completion.call", Status: StatusRunning, URL: callURL(id)})
	case stream:
		sw := newSSEWriter(w, a.objectID(id), created)
		sw.idem = idem
		h.stream(w, r, id, h.waitLimit(req), cr, resume, sw, a.stream(sw, cr, resume))
	default:
		limit := h.waitLimit(req)
		wctx, cancel := context.WithTimeout(r.Context(), limit)
		defer cancel()
		res, err := h.o.Client.Answer(wctx, id)
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			h.waitFailed(wctx, id, limit, err).write(w)
			return
		}
		w.Header().Set(HeaderSource, string(res.Source))
		w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
		a.write(w, id, created, res, idem)
	}
}

// responseNotFound is the 404 of an unknown response, and of another
// tenant's, alike.
func responseNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: "response_id", code: "response_not_found",
		message: fmt.Sprintf("No response with ID %q.", id)}
}

// withOwnResponse looks up the tenant's response named in the path, under
// the lookup timeout, and runs then with its call.
func (h *Handler) withOwnResponse(w http.ResponseWriter, r *http.Request, tenant string,
	then func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription)) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.LookupTimeout)
	defer cancel()
	id, desc, apiErr := h.ownResponse(ctx, r.PathValue("id"), tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	w.Header().Set(HeaderWorkflowID, id)
	then(ctx, id, desc)
}

// notStoredNote is in the message of the 404 of a response created with
// store: false.
const notStoredNote = "was created with store: false"

// ownResponse describes the tenant's response rid (resp_<workflow ID>)
// with one Describe: its workflow ID and call. Another tenant's response
// and an unknown one are responseNotFound alike; the tenant's own
// response created with store: false is a 404 that says so, as it is not
// kept (its call stays in Temporal for the namespace's retention, as
// every call's history does, but no endpoint serves it again).
func (h *Handler) ownResponse(ctx context.Context, rid, tenant string) (string, *client.WorkflowExecutionDescription, *apiError) {
	id, ok := strings.CutPrefix(rid, responseIDPrefix)
	if !ok {
		return "", nil, responseNotFound(rid)
	}
	desc, apiErr := h.ownCall(ctx, id, tenant)
	if apiErr != nil {
		if apiErr.status == http.StatusNotFound {
			apiErr = responseNotFound(rid)
		}
		return id, nil, apiErr
	}
	var noStore bool
	if err := desc.GetMemoValue(llmclient.MemoNoStore, &noStore); err != nil && !errors.Is(err, temporal.ErrNoData) {
		return id, nil, h.lookupFailed(fmt.Errorf("call %s: decode its memo: %w", id, err))
	}
	if noStore {
		e := responseNotFound(rid)
		e.message = fmt.Sprintf("Response %q %s: it is not kept, so it cannot be retrieved, listed, continued, cancelled or deleted.", rid, notStoredNote)
		return id, nil, e
	}
	return id, desc, nil
}

// answered reports whether the call desc describes has its answer: its
// run completed, or it runs on only for its stream's late subscribers
// (a streamed call lingers after its last item before it returns) and its
// outcome says a model, the fallback or a hand-off answered. Such a
// response is completed for every endpoint (retrieve, cancel, chaining,
// input_items, item references): what one calls completed the next
// request may continue at once, on any front door, since each reads it
// with a Describe of its own.
func answered(desc *client.WorkflowExecutionDescription) bool {
	switch desc.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return true
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		switch outcome, _ := desc.TypedSearchAttributes.GetKeyword(workflows.SAOutcome); outcome {
		case workflows.OutcomeAnswered, workflows.OutcomeDegraded, workflows.OutcomeHandoff:
			return true
		}
	}
	return false
}

// answerOf is the result of an answered call (answered): its run's
// result once it closed, else the run's state (one query), which is that
// result already.
func (h *Handler) answerOf(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) (workflows.CallResult, error) {
	runID := desc.WorkflowExecution.RunID
	if desc.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return h.o.Client.RunResult(ctx, id, runID)
	}
	var res workflows.CallResult
	v, err := h.o.Client.Temporal.QueryWorkflow(ctx, id, runID, workflows.QueryState)
	if err == nil {
		err = v.Get(&res)
	}
	if err != nil {
		return res, fmt.Errorf("call %s: read its answer: %w", id, err)
	}
	return res, nil
}

// responseState is the response object of call id as it stands.
func (h *Handler) responseState(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) (responseObject, *apiError) {
	created := desc.WorkflowStartTime
	if created.IsZero() {
		created = h.o.Now()
	}
	o := newResponseObject(id, created, workflows.CallResult{}, "in_progress")
	o.Background = true
	o.Model = h.models[0]
	if m, ok := desc.TypedSearchAttributes.GetKeyword(workflows.SAModel); ok && m != "" {
		o.Model = m
	}
	switch {
	case answered(desc):
		res, err := h.answerOf(ctx, id, desc)
		if err != nil {
			return o, h.lookupFailed(err)
		}
		o = newResponseObject(id, created, res, "completed") // or incomplete
		o.Background = true
		return o, nil
	case desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		if outcome, _ := desc.TypedSearchAttributes.GetKeyword(workflows.SAOutcome); outcome == workflows.OutcomeCanceled {
			o.Status = "cancelled"
			return o, nil
		}
		n, _ := desc.TypedSearchAttributes.GetInt64(workflows.SAAttempts)
		if n == 0 && len(desc.RawResponse.GetPendingActivities()) == 0 {
			o.Status = "queued" // no attempt has started yet
		}
		return o, nil
	case desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		o.Status = "cancelled"
		return o, nil
	}
	res, err := h.o.Client.RunResult(ctx, id, desc.WorkflowExecution.RunID)
	if err == nil {
		o = newResponseObject(id, created, res, "completed") // or incomplete
		o.Background = true
		return o, nil
	}
	e := h.callFailed(id, err)
	if unreachable(err) {
		return o, e
	}
	if e.code == "call_canceled" {
		o.Status = "cancelled"
		return o, nil
	}
	o.Status = "failed"
	o.Error, _ = json.Marshal(map[string]string{"code": e.code, "message": e.message})
	o.Resilience = e.resilience
	return o, nil
}

// getResponse serves GET /v1/responses/{id}: the response as it stands,
// or with stream=true its events from the one after starting_after.
func (h *Handler) getResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	q := r.URL.Query()
	stream, _ := strconv.ParseBool(q.Get("stream"))
	if r.ContentLength != 0 {
		// openai-go's GetStreaming sends stream: true as a JSON body of
		// its GET; the npm client sends ?stream=true.
		var b struct {
			Stream bool `json:"stream"`
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		if err != nil || (len(bytes.TrimSpace(body)) > 0 && json.Unmarshal(body, &b) != nil) {
			closeEarly(w)
			(&apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, code: "invalid_json",
				message: "Invalid request: the body of a retrieve may only be a JSON object {\"stream\": true}."}).write(w)
			return
		}
		stream = stream || b.Stream
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			(&apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: "starting_after", code: "invalid_value",
				message: fmt.Sprintf("Invalid request: starting_after: %q is not a sequence number (want an integer, at least 0).", v)}).write(w)
			return
		}
		after = n
	}
	if stream {
		h.streamResponse(w, r, tenant, after)
		return
	}
	h.withOwnResponse(w, r, tenant, func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) {
		o, e := h.responseState(ctx, id, desc)
		if e != nil {
			e.write(w)
			return
		}
		writeJSON(w, http.StatusOK, o)
	})
}

// streamResponse streams a response's events after sequence number after
// (-1: all): the stream of its call, shared with every other connection
// that streams it (hubs), cut where the client stopped.
func (h *Handler) streamResponse(w http.ResponseWriter, r *http.Request, tenant string, after int) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.LookupTimeout)
	id, desc, apiErr := h.ownResponse(ctx, r.PathValue("id"), tenant)
	cancel()
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	w.Header().Set(HeaderWorkflowID, id)
	created := desc.WorkflowStartTime
	if created.IsZero() {
		created = h.o.Now()
	}
	resume := resumePoint{offset: -1, set: after >= 0}
	// The call may have been started with any deadline the policy allows.
	limit := h.waitLimit(workflows.CallRequest{DeadlineMS: h.o.Config.Call.MaxDeadline.D().Milliseconds()})
	sw := newSSEWriter(w, responseID(id), created)
	h.stream(w, r, id, limit, chatRequest{}, resume, sw, newResponsesFormat(sw, true, after, 0))
}

// cancelResponse serves POST /v1/responses/{id}/cancel: it cancels the
// tenant's running call and answers the response cancelled; a response
// that has ended is answered as it stands.
func (h *Handler) cancelResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	h.withOwnResponse(w, r, tenant, func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) {
		if desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && !answered(desc) {
			err := h.o.Client.Temporal.CancelWorkflow(ctx, id, desc.WorkflowExecution.RunID)
			var nf *serviceerror.NotFound
			switch {
			case err == nil:
				o, e := h.responseState(ctx, id, desc)
				if e != nil {
					e.write(w)
					return
				}
				o.Status = "cancelled"
				writeJSON(w, http.StatusOK, o)
				return
			case errors.As(err, &nf): // it ended in between: read it again
				if desc, err = h.o.Client.Temporal.DescribeWorkflow(ctx, id, ""); err != nil {
					h.lookupFailed(err).write(w)
					return
				}
			default:
				h.lookupFailed(err).write(w)
				return
			}
		}
		o, e := h.responseState(ctx, id, desc)
		if e != nil {
			e.write(w)
			return
		}
		writeJSON(w, http.StatusOK, o)
	})
}
