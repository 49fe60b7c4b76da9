package llmsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// conversationKey groups the attempts of one logical call: the
// Idempotency-Key before its last '/' (the project sends
// "<workflow id>/<attempt>"), else a hash of the last user message, which
// stays the same when a retry prunes the history or switches the model.
func conversationKey(idem, question string) string {
	if idem != "" {
		if i := strings.LastIndex(idem, "/"); i > 0 {
			return idem[:i]
		}
		return idem
	}
	h := sha256.Sum256([]byte(question))
	return "q-" + hex.EncodeToString(h[:8])
}

// plan is what the simulator decided for one request.
type plan struct {
	model   ModelSpec
	pool    *pool
	keep    bool          // continue on disconnect
	phase   string        // active phase name
	base    time.Duration // sampled time to first token
	extra   time.Duration // added by latency faults
	latency bool          // a latency fault fired
	fault   FaultSpec     // the deciding fault (Kind "" for none)
	delay   time.Duration // the deciding fault's own latency
	source  string
	// limit is the model's gateway rate limit after this request, for
	// the rate-limit headers (nil: the model has none).
	limit *limitState
}

// limitState is a rate limiter's state as the rate-limit headers tell it.
type limitState struct {
	perMinute int
	remaining int
	reset     time.Duration // until the bucket is full again
}

// limiter is the rate limiter of model for a caller with key (nil: none):
// the model's, or the key's own when the model limits per key.
func (s *Sim) limiter(m ModelSpec, model, key string, now time.Time) *tokenBucket {
	if m.RateLimit <= 0 || !m.RateLimitPerKey {
		return s.limiters[model]
	}
	id := model + "\x00" + key
	b := s.limiters[id]
	if b == nil {
		b = newTokenBucket(m.RateLimit, m.Burst, now)
		s.limiters[id] = b
	}
	return b
}

// phaseLimiter is the bucket of phase i's rate limit r on model, made
// full at its first request (Phase.RateLimit).
func (s *Sim) phaseLimiter(i int, model string, r float64, now time.Time) *tokenBucket {
	id := model + "\x00phase" + strconv.Itoa(i)
	b := s.limiters[id]
	if b == nil {
		b = newTokenBucket(r, max(1, int(r)), now)
		s.limiters[id] = b
	}
	return b
}

func (s *Sim) plan(arrival time.Time, model, key, conv string, attempt int, dirs []Directive) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := plan{keep: s.sc.keepWorking}
	d := s.draws(conv, attempt)
	m, ok := s.sc.models[model]
	if !ok {
		p.fault, p.source = FaultSpec{Kind: FaultModelNotFound}, "request"
		return p
	}
	p.model, p.pool = m, s.pools[model]
	sp := s.sc.at(arrival.Sub(s.epoch))
	lat := m.ttft()
	if sp != nil {
		p.phase = phaseName(sp)
		if sp.phase.Latency != nil {
			lat = *sp.phase.Latency
		}
		if l, ok := sp.phase.ModelLatency[model]; ok {
			lat = l
		}
	}
	p.base = lat.Sample(d.rng(drawTTFT, 0, 0))
	for i, dir := range dirs {
		if dir.Spec.Kind == FaultNone || !dir.Spec.matchesModel(model) {
			continue
		}
		key := conv + "\x00" + strconv.Itoa(i) + "\x00" + dir.Raw
		if dir.Times != TimesAlways && s.dirUsed[key] >= dir.Times {
			continue
		}
		s.dirUsed[key]++
		if dir.Spec.Kind == FaultLatency {
			p.extra += dir.Spec.Latency.Sample(d.rng(drawDirective, 0, i))
			p.latency, p.source = true, "directive"
			continue
		}
		p.fault, p.source = dir.Spec, "directive"
		break
	}
	if p.fault.Kind == FaultNone {
		b := s.limiter(m, model, key, arrival)
		if sp != nil {
			if r, ok := sp.phase.RateLimit[model]; ok {
				b = s.phaseLimiter(sp.index, model, r, arrival)
			}
		}
		if b != nil {
			if ok, wait := b.take(arrival); !ok {
				p.fault = FaultSpec{Kind: FaultRateLimited, RetryAfter: Duration(max(wait.Round(time.Millisecond), time.Millisecond)), RetryHeader: RetryHeaderBoth}
				p.source = "rate_limit"
			}
			p.limit = b.state(arrival)
		}
	}
	if p.fault.Kind == FaultNone && sp != nil {
		for j, f := range sp.phase.Faults {
			if !f.matchesModel(model) {
				continue
			}
			k := [2]int{sp.index, j}
			s.ruleSeen[k]++
			if f.First > 0 && s.ruleSeen[k] > f.First {
				continue
			}
			if f.Probability > 0 && f.Probability < 1 && d.rng(drawRule, sp.index, j).Float64() >= f.Probability {
				continue
			}
			if f.Kind == FaultLatency {
				p.extra += f.Latency.Sample(d.rng(drawRuleLatency, sp.index, j))
				p.latency = true
				if p.source == "" {
					p.source = "phase:" + p.phase
				}
				continue
			}
			p.fault, p.source = f, "phase:"+p.phase
			break
		}
	}
	if p.fault.Kind != FaultNone {
		p.delay = p.fault.Latency.Sample(d.rng(drawDelay, 0, 0))
	}
	if p.fault.Kind == FaultPause {
		p.delay += s.sc.untilEnd(sp, arrival.Sub(s.epoch))
	}
	return p
}

// exchange is one request in progress, of either wire.
type exchange struct {
	s      *Sim
	w      http.ResponseWriter
	r      *http.Request
	req    chatRequest
	rec    Record
	tk     ticket
	begin  time.Time
	done   bool
	nextID uint64
	gen    *genState // what the request generates, once it got a slot
	wire   Wire
	cont   continuation // the continuation the request asks for
	msgs   []Message    // the messages without directives
	// extra are the request's top-level fields the simulator does not know.
	extra map[string]json.RawMessage
}

func (x *exchange) header() http.Header { return x.w.Header() }

// finish records the outcome once and calls the hook.
func (x *exchange) finish(outcome string, rejected, abandoned bool) {
	if x.done {
		return
	}
	x.done = true
	x.rec.Outcome = outcome
	x.rec.Duration = time.Since(x.begin)
	x.s.stats.respond(x.tk, outcome, x.rec.Fault, rejected, abandoned)
	if x.s.onRequest != nil {
		x.s.onRequest(x.rec)
	}
}

func (x *exchange) setFault(f Fault, source string) {
	x.rec.Fault, x.rec.Source = f, source
	if f != FaultNone {
		x.header().Set("X-Llmsim-Fault", string(f))
	} else {
		x.header().Del("X-Llmsim-Fault")
	}
}

// reply writes a complete response and records its status.
func (x *exchange) reply(status int, v any, h http.Header) {
	x.finish(statusOutcome(status), false, false)
	writeJSON(x.w, status, v, h)
}

// wait sleeps d unless the client leaves or the Sim closes first.
func (x *exchange) wait(d time.Duration) bool {
	return sleep(d, x.r.Context().Done(), x.s.closed)
}

// gone records a client that left before the response began.
func (x *exchange) gone() { x.finish(OutcomeClientGone, false, true) }

// abort ends the connection without a proper end of the response.
func (x *exchange) abort(outcome string) {
	x.finish(outcome, false, false)
	panic(http.ErrAbortHandler)
}

// model returns the resolved spec of the model called name.
func (s *Sim) model(name string) (ModelSpec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.sc.models[name]
	return m, ok
}

// Wire is the API a request came by. Both wires run the same pipeline
// (plan, faults, capacity, latency, rate limits, stats); only the wire
// format of requests, answers, errors and streams differs.
type Wire string

const (
	// WireOpenAI is OpenAI's chat completions: POST /v1/chat/completions.
	WireOpenAI Wire = "openai"
	// WireAnthropic is Anthropic's Messages API: POST /v1/messages.
	WireAnthropic Wire = "anthropic"
)

func (s *Sim) handleChat(w http.ResponseWriter, r *http.Request) { s.serve(w, r, WireOpenAI) }

func (s *Sim) handleMessages(w http.ResponseWriter, r *http.Request) { s.serve(w, r, WireAnthropic) }

// serve runs one request of either wire through the pipeline: accept it,
// plan and answer front faults, then generate on a slot.
func (s *Sim) serve(w http.ResponseWriter, r *http.Request, wire Wire) {
	x := &exchange{s: s, w: w, r: r, wire: wire, begin: time.Now()}
	defer x.recordGeneration()
	dirs, ok := x.accept()
	if !ok {
		return
	}
	p, ok := x.admit(dirs)
	if !ok {
		return
	}
	x.generate(p, dirs)
}

// accept reads the request, records its arrival and checks it; false when
// it was refused (answered).
func (x *exchange) accept() ([]Directive, bool) {
	s, w, r := x.s, x.w, x.r
	x.nextID = s.seq.Add(1)
	rid := r.Header.Get("X-Request-ID")
	if rid == "" {
		rid = fmt.Sprintf("llmsim-%d", x.nextID)
	}
	idem := r.Header.Get("Idempotency-Key")
	w.Header().Set("X-Request-ID", rid)
	if x.wire == WireAnthropic {
		w.Header().Set("Request-Id", rid) // the Anthropic SDK reports it
	}
	if idem != "" {
		w.Header().Set("Idempotency-Key", idem)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err == nil {
		err = x.decode(body)
	}
	question := x.req.question()
	conv := ""
	if err == nil {
		conv = conversationKey(idem, question)
	}
	x.rec = Record{Time: s.clock(), Wire: x.wire, Model: x.req.Model, Stream: x.req.Stream, Conversation: conv,
		RequestID: rid, IdempotencyKey: idem}
	x.rec.Attempt, x.tk = s.stats.arrive(x.req.Model, conv, Attempt{Model: x.req.Model, Wire: x.wire, RequestID: rid, IdempotencyKey: idem})
	if x.rec.Attempt > 0 {
		w.Header().Set("X-Llmsim-Attempt", strconv.Itoa(x.rec.Attempt))
	}
	x.rec.Source = "request"
	if msg, param := x.problem(err); msg != "" {
		e := newAPIError("invalid_request_error", "", msg)
		if param != "" {
			e.Error.Param = strp(param)
		}
		x.fail(http.StatusBadRequest, e, nil)
		return nil, false
	}
	dirs, err := ParseDirectives(question)
	if err != nil {
		x.fail(http.StatusBadRequest, newAPIError("invalid_request_error", "invalid_directive", "llmsim: "+err.Error()), nil)
		return nil, false
	}
	return dirs, x.checkContinuation()
}

// decode reads body in the wire's request format into x.req.
func (x *exchange) decode(body []byte) error {
	if x.wire == WireAnthropic {
		return x.decodeAnthropic(body)
	}
	err := json.Unmarshal(body, &x.req)
	x.extra = extraFields(body, knownFields)
	return err
}

// problem says why the request is invalid ("" when it is not) and the
// parameter to name; decodeErr is the error of reading it (Anthropic's
// decoder also checks the required fields).
func (x *exchange) problem(decodeErr error) (msg, param string) {
	switch {
	case decodeErr != nil && x.wire == WireAnthropic:
		return decodeErr.Error(), ""
	case decodeErr != nil:
		return "We could not parse the JSON body of your request. (" + decodeErr.Error() + ")", ""
	case x.req.Model == "":
		return "you must provide a model parameter", ""
	case len(x.req.Messages) == 0:
		return "[] is too short - 'messages'", "messages"
	}
	return "", ""
}

// checkContinuation refuses a continuation the model rejects or that is
// malformed; false when it did.
func (x *exchange) checkContinuation() bool {
	x.cont = x.req.continuation()
	m, ok := x.s.model(x.req.Model)
	if !ok || !x.cont.asked {
		return true
	}
	switch {
	case m.Continuation == ContinuationReject:
		x.fail(http.StatusBadRequest, newAPIError("invalid_request_error", "", x.says(
			"Unrecognized request argument supplied: "+x.cont.field,
			"This model does not support assistant message prefill. The conversation must end with a user message.")), nil)
		return false
	case m.Continuation == ContinuationPrefix && x.cont.bad != "":
		e := newAPIError("invalid_request_error", "", x.cont.bad)
		e.Error.Param = strp(x.cont.field)
		x.fail(http.StatusBadRequest, e, nil)
		return false
	}
	return true
}

// admit plans the request and answers what comes before the model's
// queue: front faults, pause, the context window; false when it answered.
func (x *exchange) admit(dirs []Directive) (plan, bool) {
	p := x.s.plan(x.rec.Time, x.req.Model, x.apiKey(), x.rec.Conversation, x.rec.Attempt, dirs)
	if p.limit != nil {
		// The rate-limit headers, on every response of a limited model.
		x.limitHeaders(x.header(), *p.limit)
	}
	x.rec.Phase = p.phase
	x.setFault(p.fault.Kind, p.source)
	if p.fault.Kind == FaultNone && p.latency {
		x.setFault(FaultLatency, p.source)
	}
	x.msgs = make([]Message, len(x.req.Messages))
	for i, m := range x.req.Messages {
		m.Content = StripDirectives(m.Content)
		x.msgs[i] = m
	}
	x.rec.PromptTokens = EstimatePromptTokens(x.msgs)
	info, _ := faultInfo(p.fault.Kind)
	switch {
	case p.fault.Kind == FaultPause:
		// A paused server holds the request without taking it into the
		// model's queue; once it resumes, the request is served as usual.
		if !x.wait(p.delay) {
			x.gone()
			return p, false
		}
	case p.fault.Kind == FaultContextLength:
		if !x.contextFault(p) {
			return p, false
		}
	case p.fault.Kind != FaultNone && info.stage == stageFront:
		if x.wait(p.delay) {
			x.front(p)
		} else {
			x.gone()
		}
		return p, false
	}
	if x.rec.PromptTokens > p.model.ContextWindow {
		x.setFault(FaultNone, "context_window")
		x.fail(http.StatusBadRequest, x.contextError(p.model.ContextWindow, x.rec.PromptTokens), nil)
		return p, false
	}
	return p, true
}

// contextFault answers context_length_exceeded while the prompt exceeds
// the fault's window; true when it did not fire and the request goes on.
func (x *exchange) contextFault(p plan) bool {
	window := p.fault.Window
	if window == 0 {
		window = max(1, x.rec.PromptTokens/2)
	}
	if x.rec.PromptTokens <= window {
		x.setFault(FaultNone, "")
		return true
	}
	if !x.wait(p.delay) {
		x.gone()
		return false
	}
	x.fail(http.StatusBadRequest, x.contextError(window, x.rec.PromptTokens), nil)
	return false
}

// generate renders the answer, takes a slot on the model and sends the
// answer (or a back fault) on the job's schedule.
func (x *exchange) generate(p plan, dirs []Directive) {
	rd := x.decide(p, dirs)
	x.rec.CompletionTokens, x.rec.Continuation = rd.completion, rd.continuation
	events := x.events(rd)
	first := p.base + p.extra
	if info, _ := faultInfo(p.fault.Kind); info.stage == stageBack {
		first += p.delay
	}
	j := newJob(first, p.model.itl(), rd.tokens, x.req.Stream)
	if x.req.Stream && x.rec.Fault != FaultSlowDrip && len(events) > 1 {
		j.hold = time.Duration(events[len(events)-1].step) * p.model.StreamInterval.D()
	}
	if !p.pool.submit(j) {
		x.setFault(FaultQueueFull, "capacity")
		h := http.Header{}
		st, e := x.queueFull(p.model.RejectStatus, p.model.Name, h)
		x.finish(statusOutcome(st), true, false)
		writeJSON(x.w, st, x.errBody(st, e), h)
		return
	}
	x.gen = &genState{rd: rd, job: j, end: EndClientGone}
	if !x.slot(p, j) {
		return
	}
	switch x.rec.Fault {
	case FaultServerError:
		x.gen.end = EndError
		x.html(http.StatusInternalServerError, "Internal Server Error")
	case FaultGatewayTimeout:
		x.gen.end = EndError
		x.html(http.StatusGatewayTimeout, "Gateway Time-out")
	default:
		if x.req.Stream {
			x.stream(events, p, j)
		} else {
			x.complete(rd, p, j)
		}
	}
}

// decide renders the answer: render's, with the recall note, and the
// wire's tool-call ids.
func (x *exchange) decide(p plan, dirs []Directive) rendered {
	rd := render(p.model, &x.req, tokensDirective(dirs), x.cont, x.rec.Fault, x.rec.PromptTokens)
	if fact := recallDirective(dirs); fact != "" && !rd.summary {
		rd.recall, rd.recalled = fact, recalled(x.msgs, fact)
		if !rd.continuation && len(rd.toolCalls) == 0 {
			note := recallNote(fact, rd.recalled)
			rd.content = note + rd.content
			rd.completion += EstimateTokens(note)
			rd.tokens += EstimateTokens(note)
		}
	}
	if x.wire == WireAnthropic {
		for i := range rd.toolCalls {
			rd.toolCalls[i].ID = "toolu_" + strings.TrimPrefix(rd.toolCalls[i].ID, "call_")
		}
	}
	return rd
}

// slot waits until the job may send its first byte; false when the client
// left first (the Sim closing resets the connection).
func (x *exchange) slot(p plan, j *job) bool {
	select {
	case <-j.ready:
	case <-x.r.Context().Done():
		if !p.keep {
			p.pool.abandon(j)
		}
		x.rec.Queued = j.waitedSoFar()
		select {
		case <-j.started:
			x.rec.Service, x.rec.FirstToken, x.rec.PerToken = j.service, j.ttft, j.itl
		default:
		}
		x.gone()
		return false
	case <-x.s.closed:
		x.abort(OutcomeReset)
	}
	x.rec.Queued, x.rec.Service = j.waited, j.service
	x.rec.FirstToken, x.rec.PerToken = j.ttft, j.itl
	return true
}

func (j *job) waitedSoFar() time.Duration {
	select {
	case <-j.started:
		return j.waited
	default:
		return time.Since(j.enqueued)
	}
}

// contextError refuses a prompt of tokens over a window, as each wire's
// provider words it.
func (x *exchange) contextError(window, tokens int) errorBody {
	if x.wire == WireAnthropic {
		return newAPIError("invalid_request_error", "context_length_exceeded", fmt.Sprintf(
			"prompt is too long: %d tokens > %d maximum", tokens, window))
	}
	e := newAPIError("invalid_request_error", "context_length_exceeded", fmt.Sprintf(
		"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
		window, tokens))
	e.Error.Param = strp("messages")
	return e
}

// ollamaBusy is the message of Ollama's 503 for a request its queue
// cannot hold (two spaces after the full stop, as Ollama sends it).
const ollamaBusy = "server busy, please try again.  maximum pending requests exceeded"

func queueFullBody(model string) errorBody {
	return newAPIError("server_overloaded", "queue_full", fmt.Sprintf("The request queue for model %s is full. Please retry later.", model))
}

// queueFull is the refusal of a full queue: on the OpenAI wire status st,
// code queue_full and X-RateLimit-Remaining: 0 (set in h); on Anthropic's
// 529 overloaded_error "Overloaded", as Anthropic refuses when busy.
func (x *exchange) queueFull(st int, model string, h http.Header) (int, errorBody) {
	if x.wire == WireAnthropic {
		return 529, newAPIError("overloaded_error", "", "Overloaded")
	}
	h.Set("X-Ratelimit-Remaining", "0")
	return st, queueFullBody(model)
}

func modelNotFound(model string) errorBody {
	return newAPIError("invalid_request_error", "model_not_found", fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model))
}

func (x *exchange) modelNotFound(model string) errorBody {
	if x.wire == WireAnthropic {
		return newAPIError("not_found_error", "model_not_found", "model: "+model)
	}
	return modelNotFound(model)
}

// says picks the message of the request's wire.
func (x *exchange) says(openai, anthropic string) string {
	if x.wire == WireAnthropic {
		return anthropic
	}
	return openai
}

// fail answers an error: e on the OpenAI wire, Anthropic's envelope on
// Anthropic's (see errBody).
func (x *exchange) fail(status int, e errorBody, h http.Header) {
	if x.wire == WireAnthropic && e.Error.Code != nil && *e.Error.Code == "insufficient_quota" {
		status = http.StatusPaymentRequired // Anthropic's billing_error is a 402
	}
	x.reply(status, x.errBody(status, e), h)
}

// errBody is the body of an error answer of status: e itself on the
// OpenAI wire; on Anthropic's {"type":"error","error":{"type":T,
// "message":…}} with T by status (anthropicErrorType): an exhausted quota
// is Anthropic's 402 billing_error.
func (x *exchange) errBody(status int, e errorBody) any {
	if x.wire != WireAnthropic {
		return e
	}
	return anthropicError(anthropicErrorType(status), e.Error.Message)
}

// apiKey is the caller's API key: Anthropic's x-api-key, else the bearer
// token ("" without one).
func (x *exchange) apiKey() string {
	if k := x.r.Header.Get("X-Api-Key"); k != "" && x.wire == WireAnthropic {
		return k
	}
	return bearer(x.r)
}

// limitHeaders advertises a rate limiter's state in h: OpenAI's
// x-ratelimit-*-requests, or Anthropic's anthropic-ratelimit-requests-*
// (the reset as an RFC 3339 time, rounded up to the second).
func (x *exchange) limitHeaders(h http.Header, l limitState) {
	if x.wire == WireAnthropic {
		reset := time.Now().Add(l.reset).UTC()
		if t := reset.Truncate(time.Second); t.Before(reset) {
			reset = t.Add(time.Second)
		}
		h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(l.perMinute))
		h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(l.remaining))
		h.Set("anthropic-ratelimit-requests-reset", reset.Format(time.RFC3339))
		return
	}
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(l.perMinute))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(l.remaining))
	h.Set("x-ratelimit-reset-requests", l.reset.Round(time.Millisecond).String())
}

func setRetryAfter(h http.Header, d time.Duration, style string) {
	secs := strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	switch style {
	case "", RetryHeaderSeconds:
		h.Set("Retry-After", secs)
	case RetryHeaderMS:
		h.Set("Retry-After-Ms", ms)
	case RetryHeaderBoth:
		h.Set("Retry-After", secs)
		h.Set("Retry-After-Ms", ms)
	case RetryHeaderDate:
		h.Set("Retry-After", time.Now().Add(d).UTC().Format(http.TimeFormat))
	}
}

// front answers a fault decided before the model's queue.
func (x *exchange) front(p plan) {
	f := p.fault
	h := http.Header{}
	if ra := f.retryAfter(); ra > 0 {
		setRetryAfter(h, ra, f.RetryHeader)
	}
	switch f.Kind {
	case FaultHang:
		x.hang()
	case FaultReset:
		x.reset()
	case FaultBadGateway:
		x.html(http.StatusBadGateway, "Bad Gateway")
	case FaultOverloaded:
		// Anthropic's overload, the same on both wires.
		x.reply(529, anthropicError("overloaded_error", "Overloaded"), h)
	default:
		st, e := x.frontError(p, h)
		x.fail(st, e, h)
	}
}

// frontError is the status and error of a front fault answered with a
// JSON error; h takes its headers. Messages differ per wire (says); the
// Anthropic envelope is made by fail.
func (x *exchange) frontError(p plan, h http.Header) (int, errorBody) {
	f, model := p.fault, x.req.Model
	switch f.Kind {
	case FaultRateLimited:
		switch {
		case f.NoQuota:
		case x.wire != WireAnthropic:
			h.Set("X-Ratelimit-Limit-Requests", "60")
			h.Set("X-Ratelimit-Remaining-Requests", "0")
			h.Set("X-Ratelimit-Reset-Requests", f.retryAfter().String())
		case p.limit == nil:
			x.limitHeaders(h, limitState{perMinute: 60, reset: f.retryAfter()})
		}
		return http.StatusTooManyRequests, newAPIError("requests", "rate_limit_exceeded", x.says(
			fmt.Sprintf("Rate limit reached for requests on model %s. Please try again in %s.", model, f.retryAfter()),
			fmt.Sprintf("This request would exceed your rate limit for requests on model %s. Please try again in %s.", model, f.retryAfter())))
	case FaultQuotaExceeded:
		return http.StatusTooManyRequests, newAPIError("insufficient_quota", "insufficient_quota", x.says(
			"You exceeded your current quota, please check your plan and billing details.",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."))
	case FaultQueueFull:
		st := f.Status
		if st == 0 {
			st = http.StatusTooManyRequests
		}
		return x.queueFull(st, model, h)
	case FaultServerBusy:
		if x.wire == WireAnthropic {
			return x.queueFull(http.StatusServiceUnavailable, model, h)
		}
		return http.StatusServiceUnavailable, newAPIError("api_error", "", ollamaBusy)
	case FaultMaintenance:
		return http.StatusServiceUnavailable, newAPIError("service_unavailable", "maintenance", "Service under maintenance")
	case FaultUnavailable:
		return http.StatusServiceUnavailable, newAPIError("server_error", "", "The server is overloaded or not ready yet.")
	case FaultUnknownError:
		return http.StatusInternalServerError, newAPIError("engine_error", "E42", "engine E42: queue_full on all replicas, request dropped")
	case FaultBadRequest:
		return x.badRequest(f.Status)
	case FaultInvalidAPIKey:
		return http.StatusUnauthorized, newAPIError("invalid_request_error", "invalid_api_key", x.says(
			"Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.",
			"invalid x-api-key"))
	case FaultForbidden:
		return http.StatusForbidden, newAPIError("permission_error", "permission_denied", x.says(
			fmt.Sprintf("You are not allowed to use model %s with this API key.", model),
			"Your API key does not have permission to use the specified resource."))
	case FaultModelNotFound:
		return http.StatusNotFound, x.modelNotFound(model)
	}
	return http.StatusInternalServerError, newAPIError("server_error", "", "llmsim: unhandled fault "+string(f.Kind))
}

// badRequest is bad_request's answer with status st (0: 400).
func (x *exchange) badRequest(st int) (int, errorBody) {
	var e errorBody
	switch st {
	case http.StatusNotFound:
		e = newAPIError("invalid_request_error", "", x.says(fmt.Sprintf("Invalid URL (%s %s)", x.r.Method, x.r.URL.Path), "Not Found"))
	case http.StatusRequestEntityTooLarge:
		e = newAPIError("invalid_request_error", "request_too_large", x.says(
			"Request too large: the request body exceeds the maximum size.", "Request exceeds the maximum allowed number of bytes."))
	case http.StatusUnprocessableEntity:
		e = newAPIError("invalid_request_error", "unprocessable_entity", "Unprocessable entity: the request is well-formed but cannot be processed.")
	default:
		st = http.StatusBadRequest
		e = newAPIError("invalid_request_error", "invalid_value", x.says(
			"Invalid value for 'temperature': must be between 0 and 2.", "temperature: Input should be less than or equal to 1"))
		e.Error.Param = strp("temperature")
	}
	return st, e
}

// hang answers nothing until the client leaves, the Sim closes or MaxHang
// passes (then the connection is reset).
func (x *exchange) hang() {
	t := time.NewTimer(x.s.maxHang)
	defer t.Stop()
	select {
	case <-x.r.Context().Done():
		x.gone()
	case <-x.s.closed:
		x.abort(OutcomeReset)
	case <-t.C:
		x.abort(OutcomeReset)
	}
}

// reset closes the connection with an RST before any response byte.
func (x *exchange) reset() {
	x.finish(OutcomeReset, false, false)
	hj, ok := x.w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// html answers an nginx-style error page.
func (x *exchange) html(status int, text string) {
	b := fmt.Sprintf("<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", status, text, status, text)
	h := x.header()
	h.Set("Content-Type", "text/html")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	x.finish(statusOutcome(status), false, false)
	x.w.WriteHeader(status)
	_, _ = io.WriteString(x.w, b)
}

// bearer is the API key a request carries ("" without one).
func bearer(r *http.Request) string {
	k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return k
}
