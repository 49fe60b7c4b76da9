package llmsim

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Sim. The zero value is usable.
type Options struct {
	// Scenario to run; nil means the zero Scenario (default models,
	// unlimited capacity, no latency, no faults).
	Scenario *Scenario
	// Clock is the time source of the phase timeline, the rate limiters and
	// the stats buckets; nil means time.Now. Service times and waits always
	// run on real timers.
	Clock func() time.Time
	// OnRequest, when set, is called once per request (chat completions
	// or messages) after its
	// response ended (from the request's goroutine). The simulator itself
	// never logs.
	OnRequest func(Record)
	// MaxBodyBytes limits request bodies; 0 means 32 MiB.
	MaxBodyBytes int64
	// MaxHang bounds the hang fault and the stall fault's silence; 0 means
	// 10 minutes.
	MaxHang time.Duration
	// KeepGenerations is how many of the most recent generations (what
	// each answer generated and sent, see Generation) the stats keep; 0
	// means 1000, a negative number none.
	KeepGenerations int
	// CallNumber, when set, numbers a conversation (its key, see
	// Stats.Conversations) by the logical call it belongs to; false: not
	// known. The faults and latencies of a numbered call's requests are
	// then drawn per request — from the scenario's seed, the call number
	// and the attempt — instead of in arrival order from one RNG, so that
	// clients compared one after another on the same scenario, whose calls
	// carry different keys, meet the same schedule request for request.
	CallNumber func(conversation string) (call int, ok bool)
}

// Record describes one request (of either wire) for Options.OnRequest.
type Record struct {
	// Time of arrival on the simulator's clock.
	Time time.Time
	// Wire is the API the request came by: WireOpenAI (POST
	// /v1/chat/completions) or WireAnthropic (POST /v1/messages).
	Wire Wire
	// Model requested.
	Model string
	// Stream reports a stream: true request.
	Stream bool
	// Conversation is the conversation key (see Stats.Conversations).
	Conversation string
	// Attempt numbers the request within its conversation from 1.
	Attempt int
	// RequestID is the X-Request-ID header, generated when absent.
	RequestID string
	// IdempotencyKey is the Idempotency-Key header.
	IdempotencyKey string
	// Outcome is the entry of Stats.Responses: a status code, "499" or
	// "reset".
	Outcome string
	// Fault is the injected fault ("" for none).
	Fault Fault
	// Source says who decided the fault: "directive", "phase:<name>",
	// "capacity", "rate_limit", "context_window" or "request".
	Source string
	// Phase active at arrival.
	Phase string
	// PromptTokens is the estimate of the prompt.
	PromptTokens int
	// Queued is the time spent waiting for a slot.
	Queued time.Duration
	// Service is the simulated generation time: FirstToken +
	// CompletionTokens × PerToken (0 when no slot was taken). A
	// non-streamed answer is sent when it ends.
	Service time.Duration
	// FirstToken is the time from the slot to the first token: the time to
	// first token plus latency faults, stretched by the load factor.
	FirstToken time.Duration
	// PerToken is the inter-token latency, stretched by the load factor.
	PerToken time.Duration
	// CompletionTokens is the usage's completion_tokens (reasoning
	// included); the tokens generated unless the answer is an error.
	CompletionTokens int
	// Continuation reports a request that continued its last assistant
	// message.
	Continuation bool
	// Duration is the time from arrival to the end of the response.
	Duration time.Duration
}

// Sim is the simulator: an http.Handler serving the OpenAI-compatible API
// and Anthropic's Messages API, the stats and the admin endpoints. Safe
// for concurrent use.
type Sim struct {
	clock      func() time.Time
	onRequest  func(Record)
	callNumber func(string) (int, bool)
	maxBody    int64
	maxHang    time.Duration
	mux        *http.ServeMux
	stats      *recorder
	seq        atomic.Uint64
	closed     chan struct{}
	closeOnce  sync.Once

	mu       sync.Mutex
	sc       *resolved
	epoch    time.Time
	rng      *rand.Rand
	ruleSeen map[[2]int]int
	dirUsed  map[string]int
	pools    map[string]*pool
	limiters map[string]*tokenBucket
}

// New returns a simulator running opts.Scenario; it fails when the
// scenario is invalid.
func New(opts Options) (*Sim, error) {
	s := &Sim{
		clock:      opts.Clock,
		onRequest:  opts.OnRequest,
		callNumber: opts.CallNumber,
		maxBody:    opts.MaxBodyBytes,
		maxHang:    opts.MaxHang,
		closed:     make(chan struct{}),
		pools:      map[string]*pool{},
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.maxBody <= 0 {
		s.maxBody = 32 << 20
	}
	if s.maxHang <= 0 {
		s.maxHang = 10 * time.Minute
	}
	s.stats = newRecorder(s.clock)
	s.stats.keepGens = opts.KeepGenerations
	if s.stats.keepGens == 0 {
		s.stats.keepGens = 1000
	}
	sc := opts.Scenario
	if sc == nil {
		sc = &Scenario{}
	}
	if err := s.SetScenario(sc); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func (s *Sim) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/chat/completions", s.handleChat)
	m.HandleFunc("POST /v1/messages", s.handleMessages)
	m.HandleFunc("GET /v1/models", s.handleModels)
	m.HandleFunc("GET /v1/models/{id}", s.handleModel)
	m.HandleFunc("GET /stats", s.handleStats)
	m.HandleFunc("POST /stats/reset", func(w http.ResponseWriter, r *http.Request) {
		s.ResetStats()
		writeJSON(w, http.StatusOK, map[string]any{"ok": true}, nil)
	})
	m.HandleFunc("GET /admin/scenario", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Scenario(), nil)
	})
	m.HandleFunc("POST /admin/scenario", s.handleSetScenario)
	m.HandleFunc("POST /admin/reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "scenario": s.Scenario().Name}, nil)
	})
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, newAPIError("invalid_request_error", "", fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)), nil)
	})
	s.mux = m
}

// ServeHTTP implements http.Handler.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetScenario validates sc and makes it current, restarting the timeline,
// the RNG, the fault counters and the stats (see Reset). Work in flight
// keeps its slots; capacity limits of models that stay take effect at once.
func (s *Sim) SetScenario(sc *Scenario) error {
	r, err := sc.resolve()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.sc = r
	for _, name := range r.order {
		m := r.models[name]
		p := s.pools[name]
		if p == nil {
			p = &pool{name: name, closed: s.closed}
			p.onGauge = func(in, q int) { s.stats.gauge(name, in, q) }
			p.onDone = func() { s.stats.complete(name) }
			s.pools[name] = p
		}
		p.configure(m.Slots, m.Queue, m.LoadFactor)
	}
	s.mu.Unlock()
	s.Reset()
	return nil
}

// Scenario returns the current scenario (do not modify it).
func (s *Sim) Scenario() *Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.sc
}

// Reset restarts the current scenario: the timeline starts again now, the
// RNG is reseeded, per-rule and per-directive counters and rate limiters
// start afresh, and the stats are reset. Work in flight is not touched.
func (s *Sim) Reset() {
	s.mu.Lock()
	now := s.clock()
	s.epoch = now
	s.rng = rand.New(rand.NewPCG(s.sc.sc.Seed, s.sc.sc.Seed^0x9e3779b97f4a7c15))
	s.ruleSeen = map[[2]int]int{}
	s.dirUsed = map[string]int{}
	s.limiters = map[string]*tokenBucket{}
	for name, m := range s.sc.models {
		if m.RateLimit > 0 {
			s.limiters[name] = newTokenBucket(m.RateLimit, m.Burst, now)
		}
	}
	s.mu.Unlock()
	s.stats.reset()
}

// ResetStats clears the stats only (not the timeline or fault counters).
func (s *Sim) ResetStats() { s.stats.reset() }

// Stats returns a snapshot of the stats, with buckets and conversations
// (without generations: see Generations).
func (s *Sim) Stats() Stats { return s.snapshot(true, true) }

// Generations returns the generations kept (Options.KeepGenerations) of
// conversation, or of every conversation when it is "", oldest first.
func (s *Sim) Generations(conversation string) []Generation {
	return s.stats.generations(conversation)
}

// Generated returns the last answer the model generated for conversation:
// Generation.Answer of its last kept generation (for a continuation, the
// prefix it continued and the new text, i.e. the whole answer), or "" when
// none is kept. A test compares it with what a client delivered.
func (s *Sim) Generated(conversation string) string {
	gens := s.stats.generations(conversation)
	if len(gens) == 0 || conversation == "" {
		return ""
	}
	return gens[len(gens)-1].Answer()
}

func (s *Sim) snapshot(buckets, convs bool) Stats {
	st := s.stats.snapshot(buckets, convs)
	s.mu.Lock()
	st.Scenario = s.sc.sc.Name
	if sp := s.sc.at(s.clock().Sub(s.epoch)); sp != nil {
		st.Phase = phaseName(sp)
	}
	s.mu.Unlock()
	return st
}

// Phase returns the name of the phase active now ("" outside phases).
func (s *Sim) Phase() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.sc.at(s.clock().Sub(s.epoch)); sp != nil {
		return phaseName(sp)
	}
	return ""
}

func phaseName(sp *span) string {
	if sp.phase.Name != "" {
		return sp.phase.Name
	}
	return fmt.Sprintf("phases[%d]", sp.index)
}

// InFlight returns the requests holding a slot and waiting for one on
// model, right now.
func (s *Sim) InFlight(model string) (inFlight, queued int) {
	s.mu.Lock()
	p := s.pools[model]
	s.mu.Unlock()
	if p == nil {
		return 0, 0
	}
	return p.gauges()
}

// Close ends hanging requests and releases every slot at once; the Sim
// keeps answering afterwards but no longer waits. Call it before closing
// the HTTP server.
func (s *Sim) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

func (s *Sim) handleStats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st := s.snapshot(q.Get("buckets") != "0" && q.Get("buckets") != "false",
		q.Get("conversations") != "0" && q.Get("conversations") != "false")
	if g := q.Get("generations"); g != "" && g != "0" && g != "false" {
		gens := s.Generations(q.Get("conversation"))
		if gens == nil {
			gens = []Generation{}
		}
		// The list is present, even empty, when asked for.
		writeJSON(w, http.StatusOK, struct {
			Stats
			Generations []Generation `json:"generations"`
		}{st, gens}, nil)
		return
	}
	writeJSON(w, http.StatusOK, st, nil)
}

func (s *Sim) handleSetScenario(w http.ResponseWriter, r *http.Request) {
	var sc *Scenario
	var err error
	if name := r.URL.Query().Get("name"); name != "" {
		sc, err = BuiltinScenario(name)
	} else {
		var data []byte
		data, err = io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		if err == nil {
			src := "request body"
			if strings.Contains(r.Header.Get("Content-Type"), "json") {
				src = "request body.json"
			}
			sc, err = ParseScenario(data, src)
		}
	}
	if err == nil {
		err = s.SetScenario(sc)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, newAPIError("invalid_request_error", "invalid_scenario", err.Error()), nil)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "scenario": sc.Name}, nil)
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Sim) handleModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	order := append([]string(nil), s.sc.order...)
	s.mu.Unlock()
	data := make([]modelObject, len(order))
	for i, n := range order {
		data[i] = modelObject{ID: n, Object: "model", Created: 1700000000, OwnedBy: "llmsim"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data}, nil)
}

func (s *Sim) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	_, ok := s.sc.models[id]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, modelNotFound(id), nil)
		return
	}
	writeJSON(w, http.StatusOK, modelObject{ID: id, Object: "model", Created: 1700000000, OwnedBy: "llmsim"}, nil)
}

func writeJSON(w http.ResponseWriter, status int, v any, h http.Header) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"llmsim: encoding failed","type":"server_error"}}`)
	}
	for k, vs := range h {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Server is a Sim listening on a loopback port, for tests and benchmarks.
type Server struct {
	*Sim
	// URL is the server's root ("http://127.0.0.1:port").
	URL string
	// BaseURL is URL + "/v1", ready for an OpenAI client's base URL. An
	// Anthropic client takes URL itself (its SDK appends /v1/messages).
	BaseURL string

	srv *httptest.Server
}

// NewServer starts a Sim on a loopback port.
func NewServer(opts Options) (*Server, error) {
	sim, err := New(opts)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(sim)
	return &Server{Sim: sim, URL: srv.URL, BaseURL: srv.URL + "/v1", srv: srv}, nil
}

// Close ends hangs and in-flight work and stops the server.
func (s *Server) Close() {
	s.Sim.Close()
	s.srv.CloseClientConnections()
	s.srv.Close()
}
