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

// The Responses API (POST /v1/responses), the default API of OpenAI's
// Agents SDK, for its stateless subset: input items (messages with text
// and images, function calls and their outputs), instructions, function
// tools, structured outputs (text.format), streaming events. It maps onto
// the same LLMCall as chat completions (serveCall); previous_response_id
// continues a stored response (stored.go).
//
// A response is its call, resp_<workflow ID>. With background: true it
// is answered at once, queued, and runs on without the client: GET
// /v1/responses/{id} reads it as it stands (one Describe, and the result
// once the call ended), with ?stream=true&starting_after=N its events
// after sequence number N; POST /v1/responses/{id}/cancel cancels it.
// Another tenant's response, and an unknown ID, are 404 alike.

// responsesAPI is POST /v1/responses.
type responsesAPI struct{}

func (responsesAPI) decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	rr, err := decodeResponsesRequest(body, passthrough)
	return rr.chatRequest, err
}

// decodeCall puts the items that item references name in the body, and
// the conversation of the stored response it continues before its input.
func (responsesAPI) decodeCall(h *Handler, r *http.Request, tenant string, body []byte) (call, *apiError) {
	body, apiErr := h.resolveItemReferences(r.Context(), body, tenant)
	if apiErr != nil {
		return call{}, apiErr
	}
	rr, ferr := decodeText(body, h.passthrough, decodeResponsesRequest)
	if ferr != nil {
		return call{}, invalidBody(ferr)
	}
	var chain func(*workflows.CallRequest) *apiError
	if rr.prev != "" {
		chain = func(req *workflows.CallRequest) *apiError { return h.chain(r.Context(), req, rr.prev, tenant) }
	}
	c, apiErr := h.newCall(r, tenant, rr.chatRequest, chain)
	c.background = rr.background
	return c, apiErr
}

func (responsesAPI) write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	o := newResponseObject(id, created, res, "completed")
	o.Resilience.Idempotency = idem
	writeJSON(w, http.StatusOK, o)
}

func (responsesAPI) stream(sw *sseWriter, c call) streamFormat {
	// A client that reconnects (Last-Event-ID) has the two events that
	// open the stream, and the text up to the byte its id names.
	after := -1
	if c.resume.set {
		after = seqInProgress
	}
	return newResponsesFormat(sw, c.background, after, c.resume.bytes)
}

func (responsesAPI) objectID(id string) string { return responseID(id) }

// createResponse serves POST /v1/responses.
func (h *Handler) createResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	h.serveCall(w, r, tenant, responsesAPI{})
}

// responseIDPrefix starts every response ID: resp_<workflow ID>.
const responseIDPrefix = "resp_"

// responseID is the id of a call's response object.
func responseID(workflowID string) string { return responseIDPrefix + workflowID }

// responseObject is the Responses API's response object plus x_resilience.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []any           `json:"output"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Background        bool            `json:"background"`
	Tools             []any           `json:"tools"`
	Usage             *responseUsage  `json:"usage,omitempty"`
	Metadata          map[string]any  `json:"metadata"`
	Resilience        *Resilience     `json:"x_resilience,omitempty"`
}

type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// outputText is an output_text content part.
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// messageItem is an assistant message output item.
type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// functionCallItem is a function call output item.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

func msgItemID(id string) string { return "msg_" + id }

func fnItemID(id string, i int) string { return fmt.Sprintf("fc_%s_%d", id, i) }

func textPart(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

func respMessage(id, text, status string) messageItem {
	content := []outputText{}
	if status == "completed" {
		content = []outputText{textPart(text)}
	}
	return messageItem{Type: "message", ID: msgItemID(id), Status: status, Role: "assistant", Content: content}
}

// newResponseObject is the response object of a call (res may be empty
// while in progress).
func newResponseObject(id string, created time.Time, res workflows.CallResult, status string) responseObject {
	o := responseObject{ID: responseID(id), Object: "response", CreatedAt: created.Unix(), Status: status,
		Model: modelOf(res), Output: []any{}, Error: jsonNull, IncompleteDetails: jsonNull, ParallelToolCalls: true,
		Tools: []any{}, Metadata: map[string]any{}}
	if status != "completed" {
		return o
	}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		o.Output = append(o.Output, respMessage(id, res.Content, "completed"))
	}
	for i, c := range res.ToolCalls {
		o.Output = append(o.Output, functionCallItem{Type: "function_call", ID: fnItemID(id, i), CallID: c.ID,
			Name: c.Function.Name, Arguments: c.Function.Arguments, Status: "completed"})
	}
	if res.FinishReason == "length" {
		o.Status, o.IncompleteDetails = "incomplete", json.RawMessage(`{"reason":"max_output_tokens"}`)
	}
	u := res.Usage
	o.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens,
		InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	rs := resilienceOf(id, answerStatus(res), res)
	o.Resilience = &rs
	return o
}

// queuedResponse is the answer to a background request once its call
// started: the response, queued, of model.
func queuedResponse(id string, created time.Time, model string) responseObject {
	o := newResponseObject(id, created, workflows.CallResult{Model: model}, "queued")
	o.Background = true
	return o
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
			invalidRetrieveBody().write(w)
			return
		}
		stream = stream || b.Stream
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			invalidStartingAfter(v).write(w)
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
	h.stream(w, r, id, limit, h.models[0], resume, sw, newResponsesFormat(sw, true, after, 0))
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
		return id, nil, responseNotStored(rid)
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
