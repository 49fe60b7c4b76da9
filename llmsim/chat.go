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
	// the x-ratelimit-* headers (nil: the model has none).
	limit *limitState
}

// limitState is a rate limiter's state as OpenAI's headers tell it.
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
		if b := s.limiter(m, model, key, arrival); b != nil {
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

// exchange is one chat request in progress.
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

func (s *Sim) handleChat(w http.ResponseWriter, r *http.Request) {
	x := &exchange{s: s, w: w, r: r, begin: time.Now()}
	defer x.recordGeneration()
	x.nextID = s.seq.Add(1)
	rid := r.Header.Get("X-Request-ID")
	if rid == "" {
		rid = fmt.Sprintf("llmsim-%d", x.nextID)
	}
	idem := r.Header.Get("Idempotency-Key")
	w.Header().Set("X-Request-ID", rid)
	if idem != "" {
		w.Header().Set("Idempotency-Key", idem)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err == nil {
		err = json.Unmarshal(body, &x.req)
		x.extra = extraFields(body)
	}
	question := x.req.question()
	conv := ""
	if err == nil {
		conv = conversationKey(idem, question)
	}
	x.rec = Record{Time: s.clock(), Model: x.req.Model, Stream: x.req.Stream, Conversation: conv,
		RequestID: rid, IdempotencyKey: idem}
	x.rec.Attempt, x.tk = s.stats.arrive(x.req.Model, conv, Attempt{Model: x.req.Model, RequestID: rid, IdempotencyKey: idem})
	if x.rec.Attempt > 0 {
		w.Header().Set("X-Llmsim-Attempt", strconv.Itoa(x.rec.Attempt))
	}
	x.rec.Source = "request"
	switch {
	case err != nil:
		x.reply(http.StatusBadRequest, newAPIError("invalid_request_error", "", "We could not parse the JSON body of your request. ("+err.Error()+")"), nil)
		return
	case x.req.Model == "":
		x.reply(http.StatusBadRequest, newAPIError("invalid_request_error", "", "you must provide a model parameter"), nil)
		return
	case len(x.req.Messages) == 0:
		e := newAPIError("invalid_request_error", "", "[] is too short - 'messages'")
		e.Error.Param = strp("messages")
		x.reply(http.StatusBadRequest, e, nil)
		return
	}
	dirs, err := ParseDirectives(question)
	if err != nil {
		x.reply(http.StatusBadRequest, newAPIError("invalid_request_error", "invalid_directive", "llmsim: "+err.Error()), nil)
		return
	}
	cont := x.req.continuation()
	if m, ok := s.model(x.req.Model); ok && cont.asked {
		switch {
		case m.Continuation == ContinuationReject:
			e := newAPIError("invalid_request_error", "", "Unrecognized request argument supplied: "+cont.field)
			x.reply(http.StatusBadRequest, e, nil)
			return
		case m.Continuation == ContinuationPrefix && cont.bad != "":
			e := newAPIError("invalid_request_error", "", cont.bad)
			e.Error.Param = strp(cont.field)
			x.reply(http.StatusBadRequest, e, nil)
			return
		}
	}
	p := s.plan(x.rec.Time, x.req.Model, bearer(r), conv, x.rec.Attempt, dirs)
	if l := p.limit; l != nil {
		// OpenAI's rate-limit headers, on every response of a limited model.
		h := x.header()
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(l.perMinute))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(l.remaining))
		h.Set("x-ratelimit-reset-requests", l.reset.Round(time.Millisecond).String())
	}
	x.rec.Phase = p.phase
	x.setFault(p.fault.Kind, p.source)
	if p.fault.Kind == FaultNone && p.latency {
		x.setFault(FaultLatency, p.source)
	}
	msgs := make([]Message, len(x.req.Messages))
	for i, m := range x.req.Messages {
		m.Content = StripDirectives(m.Content)
		msgs[i] = m
	}
	x.rec.PromptTokens = EstimatePromptTokens(msgs)

	info, _ := faultInfo(p.fault.Kind)
	if p.fault.Kind == FaultPause {
		// A paused server holds the request without taking it into the
		// model's queue; once it resumes, the request is served as usual.
		if !x.wait(p.delay) {
			x.gone()
			return
		}
	} else if p.fault.Kind != FaultNone && info.stage == stageFront {
		if p.fault.Kind == FaultContextLength {
			window := p.fault.Window
			if window == 0 {
				window = max(1, x.rec.PromptTokens/2)
			}
			if x.rec.PromptTokens > window {
				if !x.wait(p.delay) {
					x.gone()
					return
				}
				x.reply(http.StatusBadRequest, contextError(window, x.rec.PromptTokens), nil)
				return
			}
			x.setFault(FaultNone, "")
		} else {
			if !x.wait(p.delay) {
				x.gone()
				return
			}
			x.front(p)
			return
		}
	}
	if x.rec.PromptTokens > p.model.ContextWindow {
		x.setFault(FaultNone, "context_window")
		x.reply(http.StatusBadRequest, contextError(p.model.ContextWindow, x.rec.PromptTokens), nil)
		return
	}

	rd := render(p.model, &x.req, tokensDirective(dirs), cont, x.rec.Fault, x.rec.PromptTokens)
	if fact := recallDirective(dirs); fact != "" && !rd.summary {
		rd.recall, rd.recalled = fact, recalled(msgs, fact)
		if !rd.continuation && len(rd.toolCalls) == 0 {
			note := recallNote(fact, rd.recalled)
			rd.content = note + rd.content
			rd.completion += EstimateTokens(note)
			rd.tokens += EstimateTokens(note)
		}
	}
	x.rec.CompletionTokens, x.rec.Continuation = rd.completion, rd.continuation
	events := x.chunks(rd)
	first := p.base + p.extra
	if info.stage == stageBack {
		first += p.delay
	}
	j := newJob(first, p.model.itl(), rd.tokens, x.req.Stream)
	if x.req.Stream && x.rec.Fault != FaultSlowDrip && len(events) > 1 {
		j.hold = time.Duration(len(events)-1) * p.model.StreamInterval.D()
	}
	if !p.pool.submit(j) {
		x.setFault(FaultQueueFull, "capacity")
		st := p.model.RejectStatus
		x.finish(statusOutcome(st), true, false)
		writeJSON(x.w, st, queueFullBody(p.model.Name), http.Header{"X-Ratelimit-Remaining": {"0"}})
		return
	}
	x.gen = &genState{rd: rd, job: j, end: EndClientGone}
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
		return
	case <-s.closed:
		x.abort(OutcomeReset)
	}
	x.rec.Queued, x.rec.Service = j.waited, j.service
	x.rec.FirstToken, x.rec.PerToken = j.ttft, j.itl
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

func (j *job) waitedSoFar() time.Duration {
	select {
	case <-j.started:
		return j.waited
	default:
		return time.Since(j.enqueued)
	}
}

func contextError(window, tokens int) errorBody {
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

func modelNotFound(model string) errorBody {
	return newAPIError("invalid_request_error", "model_not_found", fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model))
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
	model := x.req.Model
	switch f.Kind {
	case FaultHang:
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
	case FaultReset:
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
	case FaultRateLimited:
		h.Set("X-Ratelimit-Limit-Requests", "60")
		h.Set("X-Ratelimit-Remaining-Requests", "0")
		h.Set("X-Ratelimit-Reset-Requests", f.retryAfter().String())
		x.reply(http.StatusTooManyRequests, newAPIError("requests", "rate_limit_exceeded", fmt.Sprintf(
			"Rate limit reached for requests on model %s. Please try again in %s.", model, f.retryAfter())), h)
	case FaultQuotaExceeded:
		x.reply(http.StatusTooManyRequests, newAPIError("insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details."), h)
	case FaultQueueFull:
		st := f.Status
		if st == 0 {
			st = http.StatusTooManyRequests
		}
		h.Set("X-Ratelimit-Remaining", "0")
		x.reply(st, queueFullBody(model), h)
	case FaultOverloaded:
		x.reply(529, map[string]any{"type": "error", "error": map[string]string{"type": "overloaded_error", "message": "Overloaded"}}, h)
	case FaultServerBusy:
		x.reply(http.StatusServiceUnavailable, newAPIError("api_error", "", ollamaBusy), h)
	case FaultMaintenance:
		x.reply(http.StatusServiceUnavailable, newAPIError("service_unavailable", "maintenance", "Service under maintenance"), h)
	case FaultUnavailable:
		x.reply(http.StatusServiceUnavailable, newAPIError("server_error", "", "The server is overloaded or not ready yet."), h)
	case FaultUnknownError:
		x.reply(http.StatusInternalServerError, newAPIError("engine_error", "E42", "engine E42: queue_full on all replicas, request dropped"), h)
	case FaultBadGateway:
		x.html(http.StatusBadGateway, "Bad Gateway")
	case FaultBadRequest:
		st := f.Status
		if st == 0 {
			st = http.StatusBadRequest
		}
		var e errorBody
		switch st {
		case http.StatusNotFound:
			e = newAPIError("invalid_request_error", "", fmt.Sprintf("Invalid URL (%s %s)", x.r.Method, x.r.URL.Path))
		case http.StatusRequestEntityTooLarge:
			e = newAPIError("invalid_request_error", "request_too_large", "Request too large: the request body exceeds the maximum size.")
		case http.StatusUnprocessableEntity:
			e = newAPIError("invalid_request_error", "unprocessable_entity", "Unprocessable entity: the request is well-formed but cannot be processed.")
		default:
			e = newAPIError("invalid_request_error", "invalid_value", "Invalid value for 'temperature': must be between 0 and 2.")
			e.Error.Param = strp("temperature")
		}
		x.reply(st, e, h)
	case FaultInvalidAPIKey:
		x.reply(http.StatusUnauthorized, newAPIError("invalid_request_error", "invalid_api_key",
			"Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys."), h)
	case FaultForbidden:
		x.reply(http.StatusForbidden, newAPIError("permission_error", "permission_denied",
			fmt.Sprintf("You are not allowed to use model %s with this API key.", model)), h)
	case FaultModelNotFound:
		x.reply(http.StatusNotFound, modelNotFound(model), h)
	default:
		x.reply(http.StatusInternalServerError, newAPIError("server_error", "", "llmsim: unhandled fault "+string(f.Kind)), h)
	}
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
