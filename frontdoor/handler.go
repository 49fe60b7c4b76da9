package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Headers the front door reads and writes.
const (
	// HeaderIdempotencyKey names the caller's idempotency key; scoped by
	// tenant, it selects the workflow.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderSessionID is the session part of the derived key (docs/how-it-works.md "Idempotency and audit").
	HeaderSessionID = "X-Session-Id"
	// HeaderScenario selects business rules (customer_service, medical, …).
	HeaderScenario = "X-Scenario"
	// HeaderDeadlineMS is the whole call's deadline in milliseconds.
	HeaderDeadlineMS = "X-Deadline-Ms"
	// HeaderWorkflowID carries the call's workflow ID in every answer
	// about a call.
	HeaderWorkflowID = "X-Workflow-Id"
	// HeaderSource says who answered (model, fallback_model, faq, …).
	HeaderSource = "X-Resilience-Source"
	// HeaderDegraded is "true" when the preferred model did not answer.
	HeaderDegraded = "X-Resilience-Degraded"
)

// AutoModel, like an empty model, asks for the ladder's first model.
const AutoModel = "auto"

// Options configure a Handler. Zero values mean the defaults stated.
type Options struct {
	// Client starts and reads calls. Required.
	Client *llmclient.Client
	// Tenants maps bearer tokens to tenants. Required.
	Tenants *Tenants
	// Config is the policy the workers run: its ladder is the list of
	// models, its limits validate requests before any call starts.
	// Default config.DefaultConfig().
	Config *config.Config
	// KeepAlive is how often a stream that waits (for the first token, or
	// for a retry) sends an SSE comment (": keep-alive"), and how long a
	// stream waits for its first delta before committing to a 200. Default
	// 5s.
	KeepAlive time.Duration
	// SubscriptionGrace is how long the subscription to a streamed call's
	// workflow stream, shared by every connection that streams the call,
	// outlives its last connection: a client that reconnects within it
	// (Last-Event-ID) reuses it rather than adding a poll to the workflow,
	// which admits only a few updates in flight. Default 5s; negative:
	// closed with the last connection.
	SubscriptionGrace time.Duration
	// StartTimeout bounds starting a call; Temporal not answering within it
	// is a 503. Default 10s.
	StartTimeout time.Duration
	// LookupTimeout bounds the reads of GET /v1/calls/{id}. Default 10s.
	LookupTimeout time.Duration
	// WaitMargin is added to a call's execution timeout (its deadline plus
	// llmclient's ExecutionMargin) to bound every wait for its answer, plain
	// or streamed: then the request is answered 504 call_still_running,
	// which names the call, and the same request attaches to it again.
	// Default 5s.
	WaitMargin time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers: a body not there within it is a 408 and the connection is
	// closed. Default 30s.
	BodyTimeout time.Duration
	// RetryAfter is the Retry-After of a 503 when Temporal is unreachable.
	// Default 5s.
	RetryAfter time.Duration
	// MaxBodyBytes caps the request body (larger: 413). Default twice the
	// policy's prompt limit plus 64 KiB: JSON escaping can double the bytes
	// of a prompt (\u-escaped CJK text), and a prompt over the limit is
	// still refused with 413 after decoding.
	MaxBodyBytes int64
	// Logger receives one line per request (tenant, workflow ID, status;
	// never tokens or prompts). Default: no logging.
	Logger *slog.Logger
	// StoreRetention is how long a completed response may be continued
	// (previous_response_id) and its input listed. Default
	// DefaultStoreRetention (30 days).
	StoreRetention time.Duration
	// DataConverter decodes a stored call's request; default the SDK's
	// (a deployment that encrypts payloads passes its codec's).
	DataConverter converter.DataConverter
	// Now is the clock of the created fields; default time.Now.
	Now func() time.Time
	// Metrics, when set, receives the front door's Prometheus series
	// (requests by route and status, refusals by code, durations, streams
	// open: doorMetrics).
	Metrics prometheus.Registerer
}

// Handler is the OpenAI-compatible front door: an http.Handler that serves
//
//	POST /v1/chat/completions   start or attach to a durable call
//	POST /v1/responses          the same, in the Responses API (background, stored, chained)
//	GET  /v1/responses/{id}     a background response (?stream=true&starting_after=N: its events)
//	POST /v1/responses/{id}/cancel  cancel it
//	DELETE /v1/responses/{id}   delete a stored response
//	GET  /v1/responses/{id}/input_items  its input items
//	GET  /v1/models             the ladder's models
//	GET  /v1/models/{model}     one of them
//	GET  /v1/calls/{id}         a call started with Prefer: respond-async
//	DELETE /v1/calls/{id}       cancel the tenant's own running call
//	POST /v1/calls/{id}/feedback  what the user did after the call (docs/rules.md "Rules that learn from users")
//	GET  /healthz               liveness, no token needed
//
// It is safe for concurrent use.
type Handler struct {
	o      Options
	mux    *http.ServeMux
	models []string
	// passthrough are the fields some model of the policy forwards.
	passthrough map[string]bool
	hubs        *hubs // the subscriptions of streamed calls
	limiter     *Limiter
	metrics     *doorMetrics // nil: none
}

// New checks o, resolves its defaults and returns the Handler.
func New(o Options) (*Handler, error) {
	if o.Client == nil || o.Client.Temporal == nil {
		return nil, errors.New("frontdoor: Options.Client with a Temporal client is required")
	}
	if o.Tenants == nil || o.Tenants.Len() == 0 {
		return nil, fmt.Errorf("frontdoor: %w", ErrNoTenants)
	}
	if o.Config == nil {
		o.Config = config.DefaultConfig()
	}
	if len(o.Config.Models) == 0 {
		return nil, errors.New("frontdoor: the policy has no models")
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.SubscriptionGrace == 0 {
		o.SubscriptionGrace = 5 * time.Second
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 10 * time.Second
	}
	if o.WaitMargin <= 0 {
		o.WaitMargin = 5 * time.Second
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 5 * time.Second
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 2*int64(request.MaxPromptBytes(o.Config.Limits)) + 64<<10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{o: o, mux: http.NewServeMux(), limiter: NewLimiter(o.Tenants.Limits)}
	h.hubs = newHubs(func(ctx context.Context, id string, yield func(llmclient.StreamItem) error) (workflows.CallResult, error) {
		return o.Client.Follow(ctx, id, 0, "", yield)
	}, o.SubscriptionGrace)
	h.passthrough = map[string]bool{}
	for _, m := range o.Config.Models {
		h.models = append(h.models, m.Name)
		for _, f := range m.Passthrough {
			h.passthrough[f] = true
		}
	}
	h.mux.HandleFunc("/v1/chat/completions", h.authed(http.MethodPost, h.chatCompletions))
	h.mux.HandleFunc("/v1/responses", h.authed(http.MethodPost, h.responses))
	getResp, delResp := h.authed(http.MethodGet, h.getResponse), h.authed(http.MethodDelete, h.deleteResponse)
	h.mux.HandleFunc("/v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			delResp(w, r)
			return
		}
		getResp(w, r)
	})
	h.mux.HandleFunc("/v1/responses/{id}/cancel", h.authed(http.MethodPost, h.cancelResponse))
	h.mux.HandleFunc("/v1/responses/{id}/input_items", h.authed(http.MethodGet, h.listInputItems))
	h.mux.HandleFunc("/v1/models", h.authed(http.MethodGet, h.listModels))
	h.mux.HandleFunc("/v1/models/{model}", h.authed(http.MethodGet, h.getModel))
	h.mux.HandleFunc("/v1/calls/{id}", h.callRoute())
	h.mux.HandleFunc("/v1/calls/{id}/feedback", h.authed(http.MethodPost, h.postFeedback))
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		closeEarly(w)
		(&apiError{status: http.StatusNotFound, typ: typeNotFound, code: "unknown_url",
			message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)}).write(w)
	})
	if o.Metrics != nil {
		m, err := newDoorMetrics(o.Metrics, h)
		if err != nil {
			return nil, err
		}
		h.metrics = m
	}
	return h, nil
}

// StreamSubscriptions reports how many subscriptions to the workflow
// streams of streamed calls the Handler has opened since it was made, and
// how many are open now. Every connection that streams a call shares the
// call's one subscription, so opened grows by one per streamed call (and
// per reconnect after the subscription was closed), not per connection.
func (h *Handler) StreamSubscriptions() (opened int64, open int) {
	return h.hubs.opened.Load(), h.hubs.open()
}

// ServeHTTP serves the front door's routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	start := time.Now()
	if r.ContentLength != 0 {
		// The body must come within BodyTimeout, and what a handler leaves
		// of it is drained by the server within it too. (Not on requests
		// without a body: the server watches for the client leaving by a
		// read that this deadline would end.)
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.o.BodyTimeout))
	}
	h.mux.ServeHTTP(rec, r)
	if r.URL.Path == "/healthz" {
		return
	}
	h.metrics.observe(r.Pattern, rec, time.Since(start))
	h.o.Logger.Info("request",
		"method", r.Method, "path", r.URL.Path, "status", rec.status,
		"tenant", rec.tenant, "workflow_id", rec.Header().Get(HeaderWorkflowID),
		"duration", time.Since(start))
}

// recorder remembers the status and the tenant for the request log.
type recorder struct {
	http.ResponseWriter
	status int
	tenant string
	wrote  bool
	// code is the error code of an error answer (noteCode).
	code string
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush of the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// authed checks the method and the bearer token, then serves with the
// token's tenant.
func (h *Handler) authed(method string, next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			closeEarly(w)
			w.Header().Set("Allow", method)
			(&apiError{status: http.StatusMethodNotAllowed, typ: typeInvalidRequest, code: "method_not_allowed",
				message: fmt.Sprintf("%s is not allowed on %s (use %s).", r.Method, r.URL.Path, method)}).write(w)
			return
		}
		if e := headerProblem(r); e != nil {
			closeEarly(w)
			e.write(w)
			return
		}
		token := bearerToken(r)
		if token == "" {
			closeEarly(w)
			(&apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "missing_api_key",
				message: "You didn't provide an API key. Send it as the bearer token of an Authorization header (Authorization: Bearer YOUR_KEY)."}).write(w)
			return
		}
		tenant, ok := h.o.Tenants.Lookup(token)
		if !ok {
			closeEarly(w)
			(&apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "invalid_api_key",
				message: "Incorrect API key provided."}).write(w)
			return
		}
		if rec, ok := w.(*recorder); ok {
			rec.tenant = tenant
		}
		next(w, r, tenant)
	}
}

// api is one of the OpenAI APIs the front door serves on top of the same
// durable call: chat completions, responses.
type api interface {
	// decode reads a request body (see decodeChatRequest).
	decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError)
	// write answers a finished call with 200; idem is the request's
	// idempotency window (nil: not told).
	write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency)
	// stream is the format of a streamed answer; resume is where a
	// reconnecting client's stream stopped.
	stream(sw *sseWriter, cr chatRequest, resume resumePoint) streamFormat
	// objectID is the API object's id for a call's workflow ID.
	objectID(workflowID string) string
}

// chatAPI is POST /v1/chat/completions.
type chatAPI struct{}

func (chatAPI) decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	return decodeChatRequest(body, passthrough)
}
func (chatAPI) write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	writeCompletion(w, id, created, res, idem)
}
func (chatAPI) stream(sw *sseWriter, cr chatRequest, _ resumePoint) streamFormat {
	return chatFormat{sw: sw, includeUsage: cr.IncludeUsage}
}
func (chatAPI) objectID(id string) string { return completionID(id) }

// chatCompletions serves POST /v1/chat/completions.
func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request, tenant string) {
	h.serveCall(w, r, tenant, chatAPI{})
}

// serveCall starts or attaches to the durable call of a request of api and
// answers it: at once (Prefer: respond-async), streamed, or when it ends.
func (h *Handler) serveCall(w http.ResponseWriter, r *http.Request, tenant string, a api) {
	created := h.o.Now()
	// The request's place in its tenant's limits comes before its body is
	// read: reading, decoding and validating it (schemas compiled, tokens
	// estimated) run under the tenant's max_in_flight, and a request
	// refused after that still spent one of its requests_per_minute.
	adm, apiErr := h.enter(w, tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	defer h.leave(adm, r) // no call started: the slot is freed
	body, apiErr := h.readBody(w, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	// Decoded and validated in the tenant's turn, on its budget.
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
	async := preferAsync(r.Header)
	stream := cr.Stream && !async // respond-async wins
	resume := resumePoint{offset: -1}
	if stream {
		var err error
		if resume, err = parseLastEventID(r.Header.Get(HeaderLastEventID)); err != nil {
			(&apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: HeaderLastEventID, code: "invalid_value",
				message: "Invalid request: " + HeaderLastEventID + " header: " + err.Error()}).write(w)
			return
		}
		req.Stream = true // the call hosts a workflow stream of its deltas
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
		// The first answer: a hedge's quick one under hedge.replace (its
		// x_resilience says replaceable), else the call's result; waited
		// for no longer than the call's deadline and margins.
		limit := h.waitLimit(req)
		wctx, cancel := context.WithTimeout(r.Context(), limit)
		defer cancel()
		res, err := h.o.Client.Answer(wctx, id)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client left; the call goes on and the same key finds it
			}
			h.waitFailed(wctx, id, limit, err).write(w)
			return
		}
		w.Header().Set(HeaderWorkflowID, id)
		w.Header().Set(HeaderSource, string(res.Source))
		w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
		a.write(w, id, created, res, idem)
	}
}

// writeCompletion answers a finished call with its chat.completion.
func writeCompletion(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	w.Header().Set(HeaderWorkflowID, id)
	w.Header().Set(HeaderSource, string(res.Source))
	w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
	c := newCompletion(id, created, res)
	c.Resilience.Idempotency = idem
	writeJSON(w, http.StatusOK, c)
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
		return nil, &apiError{status: http.StatusRequestTimeout, typ: typeInvalidRequest, code: "request_timeout",
			message: fmt.Sprintf("The request body did not arrive within %s.", h.o.BodyTimeout)}
	}
	if errors.As(err, &tooBig) {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, code: "request_too_large",
			message: fmt.Sprintf("The request body is over the limit of %d bytes (prompts may be at most %d bytes).", h.o.MaxBodyBytes, request.MaxPromptBytes(h.o.Config.Limits))}
	}
	return nil, &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, code: "unreadable_body",
		message: "Cannot read the request body: " + err.Error()}
}

// callRequest decodes and validates a body into a CallRequest. No call
// starts for a request it refuses.
func (h *Handler) callRequest(body []byte, r *http.Request, tenant string, a api) (workflows.CallRequest, chatRequest, *apiError) {
	var req workflows.CallRequest
	if _, ok := a.(responsesAPI); ok {
		var apiErr *apiError
		if body, apiErr = h.resolveItemReferences(r.Context(), body, tenant); apiErr != nil {
			return req, chatRequest{}, apiErr
		}
	}
	cr, ferr := decodeBody(a, body, h.passthrough)
	if ferr != nil {
		code := "invalid_value"
		if ferr.field == "" {
			code = "invalid_json"
		}
		return req, cr, &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: ferr.field, code: code,
			message: "Invalid request: " + ferr.Error()}
	}

	model := cr.Model
	if model == AutoModel {
		model = ""
	}
	if model != "" && !slices.Contains(h.models, model) {
		return req, cr, &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: "model", code: "model_not_found",
			message: fmt.Sprintf("Invalid request: model: unknown model %q (want %q or one of %s).", cr.Model, AutoModel, strings.Join(h.models, ", "))}
	}
	req = cr.Agent
	req.Tenant, req.UserID, req.SessionID = tenant, cr.User, r.Header.Get(HeaderSessionID)
	req.Scenario, req.Model, req.Messages = r.Header.Get(HeaderScenario), model, cr.Messages
	req.MaxTokens, req.Temperature = cr.MaxTokens, cr.Temperature
	req.IdempotencyKey = r.Header.Get(HeaderIdempotencyKey)
	if cr.prev != "" {
		if apiErr := h.chain(r.Context(), &req, cr.prev, tenant); apiErr != nil {
			return req, cr, apiErr
		}
	}
	if v := r.Header.Get(HeaderDeadlineMS); v != "" {
		ms, problem := parseDeadlineMS(v, h.o.Config.Call.MaxDeadline.D())
		if problem != "" {
			return req, cr, &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: HeaderDeadlineMS, code: "invalid_value",
				message: fmt.Sprintf("Invalid request: %s header: %s.", HeaderDeadlineMS, problem)}
		}
		req.DeadlineMS = ms
	}

	if n, limit := request.PromptBytes(req.Messages), request.MaxPromptBytes(h.o.Config.Limits); n > limit {
		return req, cr, &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, param: "messages", code: "request_too_large",
			message: fmt.Sprintf("The prompt is %d bytes, over the limit of %d bytes.", n, limit)}
	}
	if err := request.Validate(req, h.o.Config); err != nil {
		return req, cr, validationError(err, cr)
	}
	return req, cr, nil
}

// validationError turns Validate's problems into a 400 that names
// the fields as the client sent them.
func validationError(err error, cr chatRequest) *apiError {
	var ve *request.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) == 0 {
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, code: "invalid_value", message: "Invalid request: " + err.Error()}
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
	return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: param, code: "invalid_value", message: msg}
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
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, code: "invalid_value", message: err.Error()}
	case unreachable(err):
		return h.unavailable(err)
	}
	h.o.Logger.Error("cannot start a call", "error", err)
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "start_failed",
		message: "Cannot start the call; the front door's log says why."}
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
		var res workflows.CallResult
		_ = appErr.Details(&res)
		res.Reason = appErr.Message()
		rs := resilienceOf(id, StatusFailed, res)
		e := &apiError{status: http.StatusInternalServerError, typ: typeServer, code: appErr.Type(),
			message: "The call failed: " + appErr.Message(), resilience: &rs}
		if appErr.Type() == activities.SpendCapError {
			// The tenant's daily spend cap: 429 with the time to midnight
			// UTC, when its calls are admitted again.
			var until time.Time
			e.status, e.typ, e.code, e.retryAfter = http.StatusTooManyRequests, typeInvalidRequest, activities.SpendCapError, h.o.RetryAfter
			if appErr.Details(&until) == nil && !until.IsZero() {
				e.retryAfter = max(time.Until(until), time.Second)
			}
			e.message = "The tenant's daily spend cap is reached: " + appErr.Message()
			return e
		}
		if appErr.Type() == workflows.ErrFallbackUnavailable {
			// The request needs a model's answer (a tool call, a JSON
			// schema) and none came: try again later, not a text fallback.
			e.status, e.typ, e.code, e.retryAfter = http.StatusServiceUnavailable, typeUnavailable, workflows.ErrFallbackUnavailable, h.o.RetryAfter
			e.message = "No model could answer and this request needs a model's answer: " + appErr.Message()
			return e
		}
		switch failure.Class(appErr.Type()) {
		case failure.InvalidRequest:
			e.status, e.typ, e.code = http.StatusBadRequest, typeInvalidRequest, "upstream_invalid_request"
			e.message = "The model refused the request as invalid: " + appErr.Message()
		case failure.ContentFilter:
			e.status, e.typ, e.code = http.StatusBadRequest, typeInvalidRequest, "content_filter"
			e.message = "The request was refused by a content filter: " + appErr.Message()
		}
		return e
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

// listModels serves GET /v1/models.
func (h *Handler) listModels(w http.ResponseWriter, r *http.Request, _ string) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range h.models {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "durable-llm"})
	}
	writeJSON(w, http.StatusOK, list)
}

// getModel serves GET /v1/models/{model}.
func (h *Handler) getModel(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("model")
	if !slices.Contains(h.models, id) {
		(&apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: "model", code: "model_not_found",
			message: fmt.Sprintf("The model %q does not exist (models: %s).", id, strings.Join(h.models, ", "))}).write(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "durable-llm"})
}
