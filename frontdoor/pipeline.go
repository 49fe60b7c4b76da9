package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// api is one of the OpenAI APIs the front door serves on top of the same
// durable call: chat completions, responses.
type api interface {
	// decode reads a request body into the call it asks for, in the shape
	// the APIs share (see decodeChatRequest, decodeResponsesRequest).
	decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError)
	// decodeCall turns a body read in the tenant's turn into the call to
	// start: decoded, with what the API adds (stored responses), and
	// checked as the workers will check it (Handler.newCall).
	decodeCall(h *Handler, r *http.Request, tenant string, body []byte) (call, *apiError)
	// write answers a finished call with 200; idem is the request's
	// idempotency window (nil: not told).
	write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency)
	// stream is the format of c's streamed answer.
	stream(sw *sseWriter, c call) streamFormat
	// objectID is the API object's id for a call's workflow ID.
	objectID(workflowID string) string
}

// call is a request decoded and validated: the CallRequest to start, the
// request as its client sent it, and how its answer is delivered.
type call struct {
	req workflows.CallRequest
	cr  chatRequest
	// background: a background response (Responses API), answered as
	// queued once its call started.
	background bool
	// async: Prefer: respond-async, answered 202 once its call started.
	async bool
	// stream: answered as server-sent events, from resume on.
	stream bool
	resume resumePoint
}

// serveCall is the one pipeline of the requests that start calls, in
// either API: admit (the request's place in its tenant's limits, before
// its body is read), decode, start (or attach to) the durable call, and
// answer: at once (respond-async, background), streamed, or when it ends.
// Each stage answers its own refusals.
func (h *Handler) serveCall(w http.ResponseWriter, r *http.Request, tenant string, a api) {
	created := h.o.Now()
	adm, apiErr := h.admit(w, tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	defer h.leave(adm, r) // frees the slot, or keeps it for a call that runs on
	c, ok := h.decode(w, r, adm, a)
	if !ok {
		return
	}
	id, idem, ok := h.start(w, r, adm, c)
	if !ok {
		return
	}
	h.answer(w, r, a, c, id, idem, created)
}

// decode reads the request's body, then, in its tenant's turn and on its
// validation budget, decodes and validates it into the call it asks for
// and takes the call's tokens from the tenant's limits. A request refused
// once read still spent one of its tenant's requests_per_minute.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, adm *admission, a api) (call, bool) {
	body, apiErr := h.readBody(w, r)
	if apiErr != nil {
		apiErr.write(w)
		return call{}, false
	}
	end, ref, err := adm.slot.Validate(r.Context(), h.o.Now)
	if err != nil {
		return call{}, false // the client left
	}
	if ref != nil {
		closeEarly(w)
		rateLimited(ref).write(w)
		return call{}, false
	}
	c, apiErr := a.decodeCall(h, r, adm.tenant, body)
	if apiErr == nil {
		apiErr = h.charge(w, adm, c.req)
	}
	end()
	if apiErr == nil {
		apiErr = c.delivery(r)
	}
	if apiErr != nil {
		apiErr.write(w)
		return call{}, false
	}
	return c, true
}

// delivery decides from the request's headers how c is answered:
// background (which wins), respond-async (which wins over stream: true),
// streamed from where a reconnecting client stopped, or when it ends.
func (c *call) delivery(r *http.Request) *apiError {
	c.resume = resumePoint{offset: -1}
	switch {
	case c.background:
		// The call hosts a workflow stream whether or not this request
		// streams, so that GET ?stream=true can follow it live.
		c.stream, c.req.Stream = c.cr.Stream, true
	case preferAsync(r.Header):
		c.async = true
	case c.cr.Stream:
		resume, err := parseLastEventID(r.Header.Get(HeaderLastEventID))
		if err != nil {
			return invalidLastEventID(err)
		}
		c.stream, c.resume = true, resume
		c.req.Stream = true // the call hosts a workflow stream of its deltas
	}
	return nil
}

// start starts c's call, or attaches to the one the same request started
// before: its workflow ID and the idempotency window that applied.
// Starting outlives a client that leaves, within StartTimeout.
func (h *Handler) start(w http.ResponseWriter, r *http.Request, adm *admission, c call) (string, *Idempotency, bool) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.o.StartTimeout)
	run, replayed, err := h.o.Client.Begin(sctx, c.req)
	cancel()
	if err != nil {
		h.startFailed(err).write(w)
		return "", nil, false
	}
	id := run.GetID()
	w.Header().Set(HeaderWorkflowID, id)
	adm.id, adm.async = id, c.async || c.background // the call runs on without a client waiting
	return id, h.idempotencyOf(c.req, replayed), true
}

// answer answers the started call id as c asks.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, a api, c call, id string, idem *Idempotency, created time.Time) {
	switch {
	case c.stream:
		sw := newSSEWriter(w, a.objectID(id), created)
		sw.idem = idem
		h.stream(w, r, id, h.waitLimit(c.req), h.startModel(c.req), c.resume, sw, a.stream(sw, c))
	case c.background:
		writeJSON(w, http.StatusOK, queuedResponse(id, created, h.startModel(c.req)))
	case c.async:
		w.Header().Set("Location", callURL(id))
		w.Header().Set("Preference-Applied", "respond-async")
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusAccepted, CallStatus{ID: id, Object: "chat.completion.call", Status: StatusRunning, URL: callURL(id)})
	default:
		// The first answer: a hedge's quick one under hedge.replace (its
		// x_resilience says replaceable), else the call's result; waited
		// for no longer than the call's deadline and margins.
		limit := h.waitLimit(c.req)
		wctx, cancel := context.WithTimeout(r.Context(), limit)
		defer cancel()
		res, err := h.firstAnswer(wctx, c.req, id)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client left; the call goes on and the same key finds it
			}
			h.waitFailed(wctx, id, limit, err).write(w)
			return
		}
		w.Header().Set(HeaderSource, string(res.Source))
		w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
		a.write(w, id, created, res, idem)
	}
}

// firstAnswer waits for the first answer of the started call id of req:
// through the call's answer update where a hedge's quick answer may come
// first (hedge.replace for its scenario), else from the call's result,
// which a closed history hands over without the workflow task an update
// costs the server when it arrives after the call's first one.
func (h *Handler) firstAnswer(ctx context.Context, req workflows.CallRequest, id string) (workflows.CallResult, error) {
	if rule := h.o.Config.Hedge.Rule(req.Scenario); rule.Replace {
		if _, _, on := rule.Delay(); on {
			return h.o.Client.Answer(ctx, id)
		}
	}
	res, err := h.o.Client.Result(ctx, id)
	var ended *temporal.TerminatedError
	if errors.As(err, &ended) && ctx.Err() == nil {
		// The run this wait followed was ended: by a reset, its new run
		// answers (the lookup finds it); by an operator, the same again.
		res, err = h.o.Client.Result(ctx, id)
	}
	if err != nil {
		err = fmt.Errorf("LLM call %s: %w", id, err)
	}
	return res, err
}

// readBody reads a call's body, within MaxBodyBytes and BodyTimeout.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBodyBytes))
	if err == nil {
		// Read: no deadline while the call runs (the server's watch for
		// the client leaving reads the connection).
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		return body, nil
	}
	closeEarly(w) // the rest of the body is not read
	var tooBig *http.MaxBytesError
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, bodyTimeout(h.o.BodyTimeout)
	}
	if errors.As(err, &tooBig) {
		return nil, bodyTooLarge(h.o.MaxBodyBytes, request.MaxPromptBytes(h.o.Config.Limits))
	}
	return nil, unreadableBody(err)
}

// newCall maps a decoded request of tenant onto the CallRequest it asks
// for, with the headers that shape it, and checks it as the workers will
// (the policy's limits, scenarios, image hosts): no call starts for a
// request it refuses. extend, when set, adds to the request before its
// deadline, size and policy are checked (a stored response's
// conversation).
func (h *Handler) newCall(r *http.Request, tenant string, cr chatRequest, extend func(*workflows.CallRequest) *apiError) (call, *apiError) {
	model := cr.Model
	if model == AutoModel {
		model = ""
	}
	if model != "" && !slices.Contains(h.models, model) {
		return call{}, unknownModel(cr.Model, h.models)
	}
	req := cr.Agent
	req.Tenant, req.UserID, req.SessionID = tenant, cr.User, r.Header.Get(HeaderSessionID)
	req.Scenario, req.Model, req.Messages = r.Header.Get(HeaderScenario), model, cr.Messages
	req.MaxTokens, req.Temperature = cr.MaxTokens, cr.Temperature
	req.IdempotencyKey = r.Header.Get(HeaderIdempotencyKey)
	if extend != nil {
		if apiErr := extend(&req); apiErr != nil {
			return call{}, apiErr
		}
	}
	if v := r.Header.Get(HeaderDeadlineMS); v != "" {
		ms, problem := parseDeadlineMS(v, h.o.Config.Call.MaxDeadline.D())
		if problem != "" {
			return call{}, invalidDeadline(problem)
		}
		req.DeadlineMS = ms
	}

	if n, limit := request.PromptBytes(req.Messages), request.MaxPromptBytes(h.o.Config.Limits); n > limit {
		return call{}, promptTooLarge(n, limit)
	}
	if err := request.Validate(req, h.o.Config); err != nil {
		return call{}, validationError(err, cr)
	}
	return call{req: req, cr: cr}, nil
}

// parseDeadlineMS reads an X-Deadline-Ms header: a whole number of
// milliseconds, returned for Validate to check against the limits; or the
// problem. A number too large for int64 is over the limit max, not "not a
// number" (nor, as a time.Duration, negative).
func parseDeadlineMS(v string, max time.Duration) (int64, string) {
	ms, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil:
		return ms, ""
	case errors.Is(err, strconv.ErrRange) && ms > 0:
		return 0, fmt.Sprintf("over the limit of %d ms (%v)", max.Milliseconds(), max)
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("negative (want 0 for the default, or %d..%d)", request.MinRequestDeadline.Milliseconds(), max.Milliseconds())
	}
	if len(v) > 32 {
		return 0, "not a whole number of milliseconds"
	}
	return 0, fmt.Sprintf("%q is not a whole number of milliseconds", v)
}

// preferAsync reports whether the Prefer header asks for respond-async.
func preferAsync(hdr http.Header) bool {
	for _, v := range hdr.Values("Prefer") {
		for _, p := range strings.Split(v, ",") {
			tok, _, _ := strings.Cut(p, ";")
			if strings.EqualFold(strings.TrimSpace(tok), "respond-async") {
				return true
			}
		}
	}
	return false
}

// startModel is the model a call of req starts with: the one it names,
// else the ladder's first.
func (h *Handler) startModel(req workflows.CallRequest) string {
	if req.Model != "" {
		return req.Model
	}
	return h.models[0]
}

// waitLimit is how long a request waits for req's call: its execution
// timeout (deadline plus llmclient's margin) and WaitMargin, so that the
// call's own timeout answers first and this limit is the backstop for a
// call that has none (started by an older client).
func (h *Handler) waitLimit(req workflows.CallRequest) time.Duration {
	c := *h.o.Client
	if c.Deadline <= 0 {
		c.Deadline = h.o.Config.Call.Deadline.D()
	}
	return c.ExecutionTimeout(req) + h.o.WaitMargin
}
