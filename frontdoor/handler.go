package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/converter"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/prompt"
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

// Handler is the OpenAI-compatible front door: an http.Handler that
// serves the routes of its route table (routes) for the tenants of
// Options.Tenants. It is safe for concurrent use.
type Handler struct {
	o      Options
	mux    *http.ServeMux // the route table
	models []string
	// passthrough are the fields some model of the policy forwards.
	passthrough map[string]bool
	hubs        *hubs // the subscriptions of streamed calls
	limiter     *Limiter
	metrics     *doorMetrics // nil: none
	// tokens is the policy's token counter, loaded on count_tokens' first
	// use (nil when its encoding cannot be loaded).
	tokens func() *prompt.TokenCounter
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
	h := &Handler{o: o, limiter: NewLimiter(o.Tenants.Limits)}
	h.tokens = sync.OnceValue(func() *prompt.TokenCounter {
		tc, err := prompt.NewTokenCounter(o.Config.Pruning.Encoding)
		if err != nil {
			return nil
		}
		return tc
	})
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
	h.mux = h.routes()
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"cannot encode the answer","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
