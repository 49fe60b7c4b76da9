package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// apiError is an error answer in OpenAI's shape. Every answer the front
// door refuses or fails with is made in this file.
type apiError struct {
	status     int
	message    string
	typ        string
	param      string
	code       string
	retryAfter time.Duration
	resilience *Resilience
}

// Error types of OpenAI's error bodies.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuth           = "authentication_error"
	typeNotFound       = "not_found_error"
	typeServer         = "server_error"
	typeUnavailable    = "service_unavailable_error"
)

type errorBody struct {
	Error      errorObject `json:"error"`
	Resilience *Resilience `json:"x_resilience,omitempty"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.message, Type: e.typ}, Resilience: e.resilience}
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

func (e *apiError) write(w http.ResponseWriter) {
	if _, ok := w.(*anthropicWire); ok {
		e.writeAnthropic(w)
		return
	}
	noteCode(w, e.code)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="durable-llm"`)
	}
	writeJSON(w, e.status, e.body())
}

// anthropicWire is the response of a route of Anthropic's Messages API:
// its errors go in Anthropic's envelope (writeAnthropic).
type anthropicWire struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController reach the connection.
func (w *anthropicWire) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// anthropicType is the status and error type of e in Anthropic's API: the
// status is kept but for an unknown model (404 not_found_error, as
// Anthropic answers it) and a busy server (529 overloaded_error, which
// Anthropic's SDKs retry with backoff like a 503).
func (e *apiError) anthropicType() (int, string) {
	switch {
	case e.code == "model_not_found":
		return http.StatusNotFound, "not_found_error"
	case e.status == http.StatusUnauthorized:
		return e.status, "authentication_error"
	case e.status == http.StatusForbidden:
		return e.status, "permission_error"
	case e.status == http.StatusNotFound:
		return e.status, "not_found_error"
	case e.status == http.StatusRequestEntityTooLarge:
		return e.status, "request_too_large"
	case e.status == http.StatusTooManyRequests:
		return e.status, "rate_limit_error"
	case e.status == http.StatusServiceUnavailable || e.status == 529:
		return 529, "overloaded_error"
	case e.status == http.StatusGatewayTimeout:
		return e.status, "timeout_error"
	case e.status >= 500:
		return e.status, "api_error"
	}
	return e.status, "invalid_request_error"
}

// writeAnthropic writes e in Anthropic's error envelope,
// {"type":"error","error":{"type":…,"message":…}}, with its Retry-After
// and x_resilience as the OpenAI-shaped answer has them.
func (e *apiError) writeAnthropic(w http.ResponseWriter) {
	noteCode(w, e.code)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	status, typ := e.anthropicType()
	writeJSON(w, status, anthropicErrorBody{Type: "error", Error: anthropicErrorObject{Type: typ, Message: e.message}, Resilience: e.resilience})
}

type anthropicErrorBody struct {
	Type       string               `json:"type"`
	Error      anthropicErrorObject `json:"error"`
	Resilience *Resilience          `json:"x_resilience,omitempty"`
}

type anthropicErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// closeEarly prepares the answer to a request refused before its body was
// read (bad token, over a limit, too large, too slow): the connection
// closes after the answer and nothing more is read from it, so a refused
// client cannot make the server drain its body (up to 256 KiB, otherwise).
func closeEarly(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// invalidRequest is a 400 invalid_request_error.
func invalidRequest(param, code, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: param, code: code, message: message}
}

// Routes and tokens.

func unknownURL(r *http.Request) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeNotFound, code: "unknown_url",
		message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)}
}

// methodNotAllowed is the 405 of a route's path asked with another
// method than allow.
func methodNotAllowed(r *http.Request, allow string) *apiError {
	return &apiError{status: http.StatusMethodNotAllowed, typ: typeInvalidRequest, code: "method_not_allowed",
		message: fmt.Sprintf("%s is not allowed on %s (use %s).", r.Method, r.URL.Path, allow)}
}

func missingAPIKey() *apiError {
	return &apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "missing_api_key",
		message: "You didn't provide an API key. Send it as the bearer token of an Authorization header (Authorization: Bearer YOUR_KEY)."}
}

// missingAnthropicKey is missingAPIKey on a route of the Messages API.
func missingAnthropicKey() *apiError {
	return &apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "missing_api_key",
		message: "x-api-key header is required (or send the key as the bearer token of an Authorization header)."}
}

func invalidAPIKey() *apiError {
	return &apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "invalid_api_key",
		message: "Incorrect API key provided."}
}

func duplicateHeader(name string, n int) *apiError {
	return invalidRequest(name, "duplicate_header", fmt.Sprintf("Invalid request: the %s header is sent %d times; send it once.", name, n))
}

func invalidContentType() *apiError {
	return invalidRequest("Content-Type", "invalid_content_type",
		"Invalid request: the Content-Type header is not a media type; send Content-Type: application/json.")
}

// unsupportedMediaType is the 415 of a body that is not JSON (or not in
// UTF-8, with utf8 set).
func unsupportedMediaType(utf8 bool) *apiError {
	e := &apiError{status: http.StatusUnsupportedMediaType, typ: typeInvalidRequest, param: "Content-Type", code: "unsupported_media_type",
		message: "Invalid request: the body must be JSON; send Content-Type: application/json."}
	if utf8 {
		e.message = "Invalid request: the body must be UTF-8 JSON; send Content-Type: application/json (charset=utf-8, or none)."
	}
	return e
}

func modelNotFound(id string, models []string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: "model", code: "model_not_found",
		message: fmt.Sprintf("The model %q does not exist (models: %s).", id, strings.Join(models, ", "))}
}

// Request bodies.

func bodyTimeout(d time.Duration) *apiError {
	return &apiError{status: http.StatusRequestTimeout, typ: typeInvalidRequest, code: "request_timeout",
		message: fmt.Sprintf("The request body did not arrive within %s.", d)}
}

func bodyTooLarge(maxBytes int64, maxPrompt int) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, code: "request_too_large",
		message: fmt.Sprintf("The request body is over the limit of %d bytes (prompts may be at most %d bytes).", maxBytes, maxPrompt)}
}

func unreadableBody(err error) *apiError {
	return invalidRequest("", "unreadable_body", "Cannot read the request body: "+err.Error())
}

// invalidBody is the 400 of a body the decoder refused, naming the field.
func invalidBody(ferr *fieldError) *apiError {
	code := "invalid_value"
	if ferr.field == "" {
		code = "invalid_json"
	}
	return invalidRequest(ferr.field, code, "Invalid request: "+ferr.Error())
}

func unknownModel(model string, models []string) *apiError {
	return invalidRequest("model", "model_not_found",
		fmt.Sprintf("Invalid request: model: unknown model %q (want %q or one of %s).", model, AutoModel, strings.Join(models, ", ")))
}

func invalidDeadline(problem string) *apiError {
	return invalidRequest(HeaderDeadlineMS, "invalid_value", fmt.Sprintf("Invalid request: %s header: %s.", HeaderDeadlineMS, problem))
}

func invalidLastEventID(err error) *apiError {
	return invalidRequest(HeaderLastEventID, "invalid_value", "Invalid request: "+HeaderLastEventID+" header: "+err.Error())
}

func promptTooLarge(n, limit int) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, param: "messages", code: "request_too_large",
		message: fmt.Sprintf("The prompt is %d bytes, over the limit of %d bytes.", n, limit)}
}

// validationError turns Validate's problems into a 400 that names
// the fields as the client sent them.
func validationError(err error, cr chatRequest) *apiError {
	var ve *request.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) == 0 {
		return invalidRequest("", "invalid_value", "Invalid request: "+err.Error())
	}
	rename := map[string]string{
		"user_id": "user", "session_id": HeaderSessionID + " header", "scenario": HeaderScenario + " header",
		"deadline_ms": HeaderDeadlineMS + " header", "idempotency_key": HeaderIdempotencyKey + " header",
		"max_tokens": cr.maxTokensBy,
	}

	problems := make([]string, 0, len(ve.Problems))
	param := ""
	for i, p := range ve.Problems {
		field := strings.TrimPrefix(p.Field, "passthrough.") // a top-level field at the front door
		if n, ok := rename[field]; ok && n != "" {
			field = n
		}
		if cr.fieldOf != nil {
			field = cr.fieldOf(field)
		}
		if i == 0 {
			param = strings.TrimSuffix(field, " header")
		}
		problems = append(problems, field+": "+p.Problem)
	}
	msg := "Invalid request: " + strings.Join(problems, "; ")
	if ve.Omitted > 0 {
		msg += fmt.Sprintf("; and %d more problem(s)", ve.Omitted)
	}
	return invalidRequest(param, "invalid_value", msg)
}

// Tenants' limits.

// rateLimited is the 429 of a call refused by its tenant's limits, in
// OpenAI's shape: type "requests" or "tokens", code rate_limit_exceeded.
func rateLimited(r *Refusal) *apiError {
	typ, unit := "requests", "per minute"
	switch r.Limit {
	case LimitTokens:
		typ = "tokens"
	case LimitInFlight:
		unit = "calls in flight"
	case LimitValidation:
		unit = "ms of validation per minute"
	}
	return &apiError{status: http.StatusTooManyRequests, typ: typ, code: "rate_limit_exceeded", retryAfter: r.RetryAfter,
		message: fmt.Sprintf("Rate limit reached for tenant %q on %s: limit %d %s at this front door. Please try again in %s.",
			r.Tenant, r.Limit, r.Max, unit, max(r.RetryAfter, time.Second).Round(time.Second))}
}

// Temporal and the calls.

// unreachable reports whether err says Temporal could not be reached or
// did not answer in time.
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var (
		unavailable *serviceerror.Unavailable
		deadline    *serviceerror.DeadlineExceeded
		exhausted   *serviceerror.ResourceExhausted
	)
	if errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// unavailable is the 503 of an unreachable Temporal. Errors of the
// service go to the log, not to the client: they name internal addresses.
func (h *Handler) unavailable(err error) *apiError {
	h.o.Logger.Warn("Temporal unreachable", "error", err)
	return &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, code: "temporal_unavailable",
		retryAfter: h.o.RetryAfter,
		message: "The durable call service is unreachable or slow; retry with the same request or Idempotency-Key, " +
			"which never runs a call twice."}
}

// startFailed maps an error of starting a call.
func (h *Handler) startFailed(err error) *apiError {
	var reused *llmclient.KeyReusedError
	switch {
	case errors.As(err, &reused):
		return keyReused(reused)
	case errors.Is(err, llmclient.ErrInvalidRequest):
		return invalidRequest("", "invalid_value", err.Error())
	case unreachable(err):
		return h.unavailable(err)
	}
	h.o.Logger.Error("cannot start a call", "error", err)
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "start_failed",
		message: "Cannot start the call; the front door's log says why."}
}

// keyReused is the 422 of an Idempotency-Key sent again with another
// request, as payment APIs answer it.
func keyReused(kr *llmclient.KeyReusedError) *apiError {
	return &apiError{status: http.StatusUnprocessableEntity, typ: typeInvalidRequest, param: HeaderIdempotencyKey, code: "idempotency_key_reused",
		message: fmt.Sprintf("The %s %q was already used for a different request (call %s). A key names one request: "+
			"send a new key for a new request, or the same request to get its answer.", HeaderIdempotencyKey, kr.Key, kr.WorkflowID)}
}

// callFailed maps the error of a call that ended without an answer, or of
// waiting for it.
func (h *Handler) callFailed(id string, err error) *apiError {
	var appErr *temporal.ApplicationError
	var canceled *temporal.CanceledError
	var terminated *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &appErr):
		return h.callError(id, appErr)
	// 410, not 409 or 5xx: OpenAI clients retry those by themselves, which
	// would run again at once a call an operator just stopped.
	case errors.As(err, &canceled):
		return &apiError{status: http.StatusGone, typ: typeInvalidRequest, code: "call_canceled",
			message: "The call was canceled; send the request again to run it anew."}
	case errors.As(err, &terminated):
		return &apiError{status: http.StatusGone, typ: typeInvalidRequest, code: "call_terminated",
			message: "The call was terminated by an operator; send the request again to run it anew."}
	case errors.As(err, &timeout):
		return timedOut(id)
	case unreachable(err):
		return h.unavailable(err)
	}
	h.o.Logger.Error("a call failed", "workflow_id", id, "error", err)
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "call_failed",
		message: "The call failed; the front door's log says why."}
}

// callError is the answer of a call that failed with appErr: a 500 with
// the call's x_resilience, unless its failure class is the client's.
func (h *Handler) callError(id string, appErr *temporal.ApplicationError) *apiError {
	var res workflows.CallResult
	_ = appErr.Details(&res)
	res.Reason = appErr.Message()
	rs := resilienceOf(id, StatusFailed, res)
	e := &apiError{status: http.StatusInternalServerError, typ: typeServer, code: appErr.Type(),
		message: "The call failed: " + appErr.Message(), resilience: &rs}
	switch {
	case appErr.Type() == activities.SpendCapError:
		// The tenant's daily spend cap: 429 with the time to midnight
		// UTC, when its calls are admitted again.
		var until time.Time
		e.status, e.typ, e.code, e.retryAfter = http.StatusTooManyRequests, typeInvalidRequest, activities.SpendCapError, h.o.RetryAfter
		if appErr.Details(&until) == nil && !until.IsZero() {
			e.retryAfter = max(time.Until(until), time.Second)
		}
		e.message = "The tenant's daily spend cap is reached: " + appErr.Message()
	case appErr.Type() == workflows.ErrFallbackUnavailable:
		// The request needs a model's answer (a tool call, a JSON
		// schema) and none came: try again later, not a text fallback.
		e.status, e.typ, e.code, e.retryAfter = http.StatusServiceUnavailable, typeUnavailable, workflows.ErrFallbackUnavailable, h.o.RetryAfter
		e.message = "No model could answer and this request needs a model's answer: " + appErr.Message()
	case failure.Class(appErr.Type()) == failure.InvalidRequest:
		e.status, e.typ, e.code = http.StatusBadRequest, typeInvalidRequest, "upstream_invalid_request"
		e.message = "The model refused the request as invalid: " + appErr.Message()
	case failure.Class(appErr.Type()) == failure.ContentFilter:
		e.status, e.typ, e.code = http.StatusBadRequest, typeInvalidRequest, "content_filter"
		e.message = "The request was refused by a content filter: " + appErr.Message()
	}
	return e
}

// timedOut is the answer for a call whose workflow timed out: no worker
// took it, or none finished it, within its deadline plus a margin.
func timedOut(id string) *apiError {
	return &apiError{status: http.StatusGatewayTimeout, typ: typeServer, code: "call_timed_out",
		message: fmt.Sprintf("The call %s timed out: it did not finish within its deadline plus a margin (is a worker running?). "+
			"Send the same request (same %s header, if you set one) to run it again.", id, HeaderIdempotencyKey)}
}

// stillRunning is the answer to a request whose wait for call id ended
// (after limit) while the call goes on: the same request attaches to it.
func stillRunning(id string, limit time.Duration) *apiError {
	rs := Resilience{WorkflowID: id, Status: StatusRunning, Attempts: []workflows.Attempt{}, Classes: []string{}}
	return &apiError{status: http.StatusGatewayTimeout, typ: typeServer, code: "call_still_running", resilience: &rs,
		message: fmt.Sprintf("The call %s did not answer within %s (its deadline plus a margin; is a worker running?). "+
			"It goes on: send the same request (same %s header, if you set one) to attach to it, or GET %s.",
			id, limit.Round(time.Millisecond), HeaderIdempotencyKey, callURL(id))}
}

// waitFailed maps the error of waiting for call id under wctx (which
// ended after limit when the wait was too long).
func (h *Handler) waitFailed(wctx context.Context, id string, limit time.Duration, err error) *apiError {
	if llmclient.WaitEnded(wctx, err) {
		return stillRunning(id, limit)
	}
	return h.callFailed(id, err)
}

func (h *Handler) lookupFailed(err error) *apiError {
	if unreachable(err) {
		return h.unavailable(err)
	}
	h.o.Logger.Error("cannot read a call", "error", err)
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "lookup_failed",
		message: "Cannot read the call; the front door's log says why."}
}

// callNotFound is the 404 of an unknown call, and of another tenant's:
// the two are answered alike, so a tenant cannot tell them apart.
func callNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeNotFound, param: "id", code: "call_not_found",
		message: fmt.Sprintf("No call with ID %q.", id)}
}

// callNotRunning is the 409 of cancelling call id, which ended (how).
func callNotRunning(id, how string) *apiError {
	return &apiError{status: http.StatusConflict, typ: typeInvalidRequest, param: "id", code: "call_not_running",
		message: fmt.Sprintf("The call %s already ended (%s): there is nothing to cancel.", id, how)}
}

// Feedback.

func callRunning(id string) *apiError {
	return &apiError{status: http.StatusConflict, typ: typeInvalidRequest, param: "id", code: "call_running",
		message: fmt.Sprintf("The call %s has not answered yet: send feedback once it has (GET %s says when).", id, callURL(id))}
}

func callNotAnswered(id, how string) *apiError {
	return &apiError{status: http.StatusConflict, typ: typeInvalidRequest, param: "id", code: "call_not_answered",
		message: fmt.Sprintf("The call %s ended without an answer (%s): there is no answer to give feedback on.", id, how)}
}

func feedbackTooLarge() *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, code: "request_too_large",
		message: fmt.Sprintf(`The request body is over the limit of %d bytes (a feedback is {"outcome":"…"}).`, maxFeedbackBytes)}
}

func feedbackTimeout() *apiError {
	return &apiError{status: http.StatusRequestTimeout, typ: typeInvalidRequest, code: "request_timeout",
		message: "The request body did not arrive in time."}
}

// feedbackUnreadable is the 400 of a feedback's body that broke off; not
// the error's text, which names the connection's addresses.
func feedbackUnreadable() *apiError {
	return invalidRequest("", "unreadable_body", "Cannot read the request body.")
}

func feedbackInvalidJSON(err error) *apiError {
	return invalidRequest("", "invalid_json",
		`Invalid request: want a JSON object {"outcome":"resolved|abandoned|handoff_requested|complaint"}: `+err.Error())
}

func missingOutcome() *apiError {
	return invalidRequest("outcome", "missing_outcome",
		"Invalid request: outcome is required: one of resolved, abandoned, handoff_requested, complaint.")
}

func invalidOutcome(err error) *apiError {
	return invalidRequest("outcome", "invalid_outcome", "Invalid request: outcome: "+err.Error()+".")
}

// Responses.

// responseNotFound is the 404 of an unknown response, and of another
// tenant's, alike.
func responseNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: "response_id", code: "response_not_found",
		message: fmt.Sprintf("No response with ID %q.", id)}
}

// notStoredNote is in the message of the 404 of a response created with
// store: false.
const notStoredNote = "was created with store: false"

// responseNotStored is the 404 of the tenant's own response created with
// store: false, which is not kept.
func responseNotStored(rid string) *apiError {
	e := responseNotFound(rid)
	e.message = fmt.Sprintf("Response %q %s: it is not kept, so it cannot be retrieved, listed, continued, cancelled or deleted.", rid, notStoredNote)
	return e
}

func responseNotCompleted(rid string) *apiError {
	return invalidRequest("", "response_not_completed",
		fmt.Sprintf("Response %q has not completed (only a completed response can be continued or listed).", rid))
}

func responseExpired(rid string, keep time.Duration) *apiError {
	return invalidRequest("", "response_expired", fmt.Sprintf("Response %q is past its retention of %s.", rid, keep))
}

func invalidRetrieveBody() *apiError {
	return invalidRequest("", "invalid_json", "Invalid request: the body of a retrieve may only be a JSON object {\"stream\": true}.")
}

func invalidStartingAfter(v string) *apiError {
	return invalidRequest("starting_after", "invalid_value",
		fmt.Sprintf("Invalid request: starting_after: %q is not a sequence number (want an integer, at least 0).", v))
}

func invalidOrder() *apiError {
	return invalidRequest("order", "invalid_value", "Invalid request: order: want \"asc\" or \"desc\".")
}

// prevError is the 400 or 404 of a previous_response_id, naming the field.
func prevError(status int, code, message string) *apiError {
	return &apiError{status: status, typ: typeInvalidRequest, param: "previous_response_id", code: code,
		message: "Invalid request: previous_response_id: " + message}
}

// itemNotFound is the 404 of an item_reference whose item is not served.
func itemNotFound(at, id, why string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: at + ".id", code: "item_not_found",
		message: fmt.Sprintf("Invalid request: %s.id: no item with ID %q%s.", at, id, why)}
}

func missingItemID(at string) *apiError {
	return invalidRequest(at+".id", "invalid_value",
		fmt.Sprintf("Invalid request: %s.id: missing (want the ID of an output item of a stored response: msg_… or fc_…).", at))
}

// itemNotUsable is the 400 of an item_reference at input path at whose
// response cannot be read for e (not completed, expired).
func itemNotUsable(at, id string, e *apiError) *apiError {
	return &apiError{status: e.status, typ: e.typ, param: at + ".id", code: e.code,
		message: fmt.Sprintf("Invalid request: %s.id: item %q: %s", at, id, e.message)}
}

func rebuildFailed(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "internal_error",
		message: "Cannot rebuild the request with its referenced items: " + err.Error()}
}
