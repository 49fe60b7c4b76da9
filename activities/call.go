package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/policies/structured"
	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

type modelClient struct {
	client *openai.Client
}

// apiKey reads a model's API key from the environment variable it names,
// here and nowhere else.
func (a *Activities) apiKey(m config.ModelConfig) string {
	if m.APIKeyEnv == "" {
		return ""
	}
	return a.getenv(m.APIKeyEnv)
}

// client returns the go-openai client of a model.
func (a *Activities) client(m config.ModelConfig) *openai.Client {
	key := a.apiKey(m)
	id := m.BaseURL + "\x00" + m.APIKeyEnv + "\x00" + key
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[id]; ok {
		return c.client
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = m.BaseURL
	oc.HTTPClient = a.http
	c := &modelClient{client: openai.NewClientWithConfig(oc)}
	a.clients[id] = c
	return c.client
}

// cut is the prompt an attempt on model m sends for the call's shape.
func (a *Activities) cut(req request.Request, m config.ModelConfig, sh callstate.Shape) Prompt {
	reserve := sh.MaxTokens
	if reserve <= 0 {
		reserve = a.cfg.Pruning.ReserveOutputTokens
	}
	// Tools and a JSON schema are prompt too: the window keeps room for
	// them, and the attempt counts them.
	defs := a.definitionTokens(req)
	f := prompt.Fit(req.Messages, prompt.Shape{
		Stage: sh.PruneStage, KeepRounds: sh.KeepRounds, Factor: a.cfg.Pruning.Factor,
		Window: m.ContextWindow, Reserve: reserve + defs, Support: m.SystemPrompt,
	}, a.tokens)
	sent := prompt.Build(req.Messages, f.Keep, m.SystemPrompt)
	p := Prompt{
		Keep: f.Keep, Before: f.Before, Tokens: f.Tokens + defs, Exact: f.Exact, Fits: f.Fits,
		Messages: len(sent),
	}
	if prompt.DropsSystem(req.Messages, m.SystemPrompt) {
		p.Note = "system prompt dropped: " + m.Name + " takes no system role"
	}
	return p
}

// definitionTokens counts the tools and the response schema of req as the
// upstream reads them: their JSON, tokenized.
func (a *Activities) definitionTokens(req request.Request) int {
	if len(req.Tools) == 0 && req.Schema() == nil {
		return 0
	}
	b, err := json.Marshal(struct {
		Tools  []request.Tool  `json:"tools,omitempty"`
		Schema json.RawMessage `json:"schema,omitempty"`
	}{req.Tools, req.Schema()})
	if err != nil {
		return 0
	}
	return a.tokens.Count(string(b))
}

// CallModel makes one upstream attempt. It heartbeats while it waits, so a
// lost worker is noticed within the heartbeat timeout and a cancelled
// workflow cancels the HTTP request. A failed attempt returns an
// ApplicationError whose type is the failure class and whose details are
// the CallOutcome; the outcome also feeds the model's breaker.
func (a *Activities) CallModel(ctx context.Context, in CallInput) (CallOutcome, error) {
	ctx, span := a.chatSpan(ctx, in)
	out, err := a.callModel(ctx, in)
	if err == nil && cutsRival(in) {
		// Its answer is the call's: the rival's request, if it runs in
		// this process, stops now rather than at its next heartbeat.
		a.races.cut(raceKey(activity.GetInfo(ctx).WorkflowExecution.RunID, in.Attempt, !in.Hedge))
	}
	endChatSpan(span, in, out, err)
	return out, err
}

// callModel is CallModel inside its span.
func (a *Activities) callModel(ctx context.Context, in CallInput) (CallOutcome, error) {
	m, ok := a.cfg.Model(in.Model)
	if !ok {
		return CallOutcome{}, invalid(fmt.Errorf("model %q is not in the ladder", in.Model))
	}
	keyID := in.Key
	if keyID == "" {
		keyID = m.Keys()[0] // one key (a pool of one included)
	} else if !slices.Contains(m.Keys(), keyID) {
		return CallOutcome{}, invalid(fmt.Errorf("key %q is not in the pool of %s", keyID, m.Name))
	}
	m = m.WithKey(keyID) // its key, its client, its rate-limit holds
	if !a.breakers.Admit(m.Name, a.now()) && !in.PastOpen {
		// The breaker opened where this attempt runs since it was planned
		// (another worker, or other calls): no request.
		out := CallOutcome{Class: failure.BreakerOpen, NotSent: true, Reason: fmt.Sprintf("breaker of %s open: no upstream call made", m.Name)}
		a.metrics.Attempt(m.Name, string(failure.BreakerOpen), 0)
		return out, temporal.NewApplicationErrorWithOptions(out.Reason, string(failure.BreakerOpen),
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
	}
	msgs := prompt.Build(in.Request.Messages, in.Prompt.Keep, m.SystemPrompt)
	if in.Continue != "" {
		msgs = append(msgs, request.Message{Role: request.RoleAssistant, Content: in.Continue})
	}
	fits := in.Prompt.Fits
	out := CallOutcome{Messages: len(msgs), PromptTokens: in.Prompt.Tokens}

	info := activity.GetInfo(ctx)
	ex := &exchange{requestID: fmt.Sprintf("%s/%d", info.WorkflowExecution.ID, in.Attempt)}
	if in.Hedge {
		ex.requestID += "h"
	}
	budget := a.budgets.For(m.Endpoint())
	ex.mayResend = func(n int) bool {
		// A resend is a request like any other: within the call's cap and
		// paid from the endpoint's budget, within the tenant's share.
		if n >= in.Resends {
			return false
		}
		ok, _ := budget.TryRetryFor(a.now(), in.Request.Tenant) // within the tenant's share
		return ok
	}
	if in.Continue != "" {
		ex.continuation = m.Continuation
	}
	ex.extra = passthrough(m, in.Request)
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = m.Timeout.D()
	}
	// An attempt bounded by the call's deadline keeps its request open
	// in.Grace past it, answer started or not: no attempt could start in
	// the fallback's reserve, and the fallback needs only FallbackTime of
	// it. The workflow sized the attempt when it scheduled it: the time
	// the attempt waited to be picked up comes off the grace, so the
	// fallback keeps its FallbackTime.
	grace := max(in.Grace-max(info.StartedTime.Sub(info.ScheduledTime), 0), 0)
	due := a.now().Add(timeout + grace)
	callCtx, cancel := context.WithTimeout(withExchange(ctx, ex), timeout+grace)
	defer cancel()
	if in.Announce {
		// A hedged attempt: its rival's answer may cut its request (races).
		var cut context.CancelCauseFunc
		callCtx, cut = context.WithCancelCause(callCtx)
		defer a.races.join(raceKey(info.WorkflowExecution.RunID, in.Attempt, in.Hedge), cut)()
	}
	pub := a.publisher(ctx, in, m, cancel)
	defer pub.close(ctx)
	var tokens atomic.Int64
	stopHeartbeat := func() {}
	if pub.heartbeats() {
		pub.tokens = &tokens
	} else {
		stopHeartbeat = heartbeat(ctx, info.HeartbeatTimeout, func() any {
			return Progress{Attempt: in.Attempt, Tokens: int(tokens.Load())}
		})
	}

	ann := newAnnouncer(ctx, in, pub)
	defer ann.stop()
	var firstAt time.Time
	var cutWhy string // why an overdue request was cut (Activities.overdue)
	start := a.now()
	var resp openai.ChatCompletionResponse
	var err error
	var logprobs json.RawMessage
	obs := classify.Observation{PromptTokens: in.Prompt.Tokens, ContextWindow: m.ContextWindow}
	if fits {
		obs.PromptTokens, obs.ContextWindow = 0, 0 // fits: let the upstream judge
		req := chatRequest(m, in.Request, msgs, in.Shape)
		if req.MaxTokens == 0 && a.cfg.Limits.DefaultMaxTokens > 0 {
			// No limit of the caller's or the policy's yet: the default,
			// within what the window leaves after the prompt (a server's
			// own default may be small enough to cut most answers).
			req.MaxTokens = defaultMaxTokens(a.cfg.Limits.DefaultMaxTokens, m.ContextWindow, in.Prompt.Tokens, a.cfg.Pruning.ReserveOutputTokens)
			if openai.NewReasoningValidator().Validate(req) != nil {
				req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0
			}
		}
		if m.Stream {
			live := pub.text
			if checked(in.Request) {
				// An answer that may be repaired reaches the caller once
				// it is checked: an agent must never act on text a repair
				// replaces, nor see it twice.
				live = nil
			}
			done := a.queues.wait(m.Endpoint(), start, m.FirstTokenTimeout.D())
			ftt := m.FirstTokenTimeout.D()
			watch := ftt
			if grace > 0 {
				watch = max(min(ftt, due.Sub(a.now())), time.Millisecond) // no first token by due: cut there
			}
			st := stream(callCtx, a.client(m), req, streamLimits{firstToken: watch, idle: m.IdleTimeout.D(), maxBytes: a.cfg.HTTP.MaxBodyBytes,
				patient: func() (bool, time.Duration) { return a.overdue(in, m, start, due, ann, &cutWhy) }},
				func(n int) {
					tokens.Store(int64(n))
					if n == 1 {
						firstAt = a.now()
						done()
						a.queues.firstToken(m.Endpoint(), start, firstAt.Sub(start), ftt)
						if in.FirstTokenWins && !a.races.win(info.WorkflowExecution.RunID, in.Attempt, in.Hedge) {
							return // its rival's first token came first: it is being cut
						}
						ann.firstToken() // before the first delta is published
					}
				}, live)
			done()
			resp, err, obs.Stream, logprobs = st.resp, st.err, st.obs, st.logprobs
		} else {
			resp, err = a.client(m).CreateChatCompletion(callCtx, req)
			if err == nil {
				a.queues.firstToken(m.Endpoint(), start, a.now().Sub(start), m.Timeout.D())
			}
		}
	}
	stopHeartbeat()
	out.Duration = a.now().Sub(start)
	if errors.Is(context.Cause(callCtx), errCutByRace) && ctx.Err() == nil {
		// Its rival answered: the workflow, taking that answer, cancels
		// this attempt; until then it waits, its request already closed.
		awaitCancel(ctx, info.HeartbeatTimeout)
	}
	switch {
	case !firstAt.IsZero():
		a.firstToken(m.Name, firstAt.Sub(start))
	case !m.Stream && err == nil && fits:
		a.firstToken(m.Name, out.Duration) // the whole reply is its first token
	case in.Announce && ctx.Err() != nil && fits:
		// A hedged attempt cancelled before its first token (its hedge
		// won): its time to first token is at least what it waited.
		// Leaving it out would lower the p90 each time a hedge wins, and
		// hedge calls that are not slow.
		a.firstToken(m.Name, out.Duration)
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), worker.ErrWorkerShutdown) {
			// This worker is stopping: the attempt is lost, not failed. The
			// workflow resends it elsewhere (worker_lost); text
			// already streamed to the caller is continued, not repeated.
			if pub.close(ctx) {
				out.Content, out.Published = answerText(resp), max(int(tokens.Load()), 1)
				out.CompletionTokens = out.Published
			}
			return out, temporal.NewApplicationErrorWithOptions(
				"worker shut down during the attempt", string(failure.WorkerLost),
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
		}
		// The workflow cancelled the call (or the activity timed out): no
		// outcome to judge, and the breaker learns nothing.
		return out, ctx.Err()
	}
	if pub.cancelled() {
		// A live attempt's heartbeat said the call cancelled it.
		pub.close(ctx)
		return out, temporal.NewCanceledError()
	}
	out.NotSent = !fits

	status, header, body, headerTimedOut, resends := ex.snapshot()
	obs.Err = err
	obs.Status = status
	obs.Header = header
	obs.Body = body
	obs.HeaderTimedOut = headerTimedOut
	obs.AttemptTimedOut = errors.Is(callCtx.Err(), context.DeadlineExceeded)
	if obs.AttemptTimedOut && !ex.responded() && !m.Stream {
		// A non-streamed reply sends its headers when the answer is done:
		// none within the whole timeout is the read_timeout of such a model.
		obs.HeaderTimedOut = true
	}
	obs.Now = a.now()
	if err == nil && fits {
		obs.Response = &resp
	}
	key := a.apiKey(m)
	redact(&obs, key)
	v := classify.Classify(obs)
	v = a.bodyLimit(v, ex, obs, resp)
	if v.Class == failure.OutputTruncated && callersLimit(in) && obs.Response != nil && usableAnswer(resp) &&
		(resp.Usage.CompletionTokens == 0 || resp.Usage.CompletionTokens >= in.Request.MaxTokens) {
		// The caller's own max_tokens reached: its answer, as OpenAI
		// gives it (finish_reason length), never a reason to retry. (A
		// reply cut short of it by the server's own limit is still
		// output_truncated.)
		v.Class, v.Reason = failure.None, fmt.Sprintf("HTTP %d, finish_reason length at the caller's max_tokens (%d)", v.Status, in.Request.MaxTokens)
	}
	var calls []request.ToolCall
	if v.Class == failure.None {
		// A well-formed reply: is it the answer the request asked for?
		calls = toolCalls(resp.Choices[0].Message.ToolCalls, ex.requestID)
		toolErr, schemaErr := in.Request.CheckAnswer(ctx, a.schemas, answerText(resp), calls)
		// The reason names the field and the constraint; the values and
		// the model's text go only into the repair instruction.
		switch {
		case toolErr != nil:
			v.Class, v.Reason, out.Detail = failure.BadToolCall, toolErr.Error(), structured.Detail(toolErr)
		case schemaErr != nil:
			v.Class, v.Reason, out.Detail = failure.SchemaMismatch, schemaErr.Error(), structured.Detail(schemaErr)
		}
	}
	redactVerdict(&v, key)
	if cutWhy != "" && v.Class == failure.ReadTimeout {
		v.Reason += "; " + cutWhy
	}
	out.Class, out.Status, out.Code, out.Reason = v.Class, v.Status, v.Code, v.Reason
	out.Upstream = strings.Trim(v.Message+"; "+v.Detail, "; ")
	if v.Generic {
		out.Diagnosable, out.Type, out.Message = true, v.Type, v.Message
	}
	out.RetryAfter, out.HasRetryAfter = v.RetryAfter, v.HasRetryAfter
	out.ConnectResends = resends
	if obs.Response != nil {
		out.CompletionTokens = resp.Usage.CompletionTokens
		if resp.Usage.PromptTokens > 0 {
			out.PromptTokens = resp.Usage.PromptTokens
		}
		if out.CompletionTokens == 0 && len(resp.Choices) > 0 {
			// A stream without a usage chunk: count what arrived.
			out.CompletionTokens = a.tokens.Count(resp.Choices[0].Message.Content + resp.Choices[0].Message.ReasoningContent)
		}
	}

	a.headroom(m, header)
	if !a.backpressure(m, v) && !(m.Pooled() && v.Class == failure.Auth) && !ownShape(m, in, v.Class) {
		// A rate limit alone does not make the model sick, nor one key of
		// a pool refused (DecideNext parks the key), nor a request too
		// large to answer in time.
		a.breakers.RecordOutcome(m.Name, a.now(), v.Class)
	}
	if obs.Response != nil || (obs.Stream != nil && obs.Stream.Chunks > 0) {
		// The upstream generated: the request is spend, and a repeat of
		// a request this worker already paid for is duplicate spend.
		out.Billed = true
		if in.Fingerprint != "" {
			out.SentBefore = a.seen.sent(in.Fingerprint, a.now())
		}
	}
	a.metrics.Attempt(m.Name, classLabel(v.Class), out.Duration)
	a.keyAttempt(m.Name, in.Key, classLabel(v.Class))

	if v.Class != failure.None && obs.Stream != nil && obs.Stream.Chunks > 0 && len(resp.Choices) > 0 {
		// The text that arrived before the attempt failed.
		out.Content, out.CompletionTokens = resp.Choices[0].Message.Content, obs.Stream.Tokens
	}
	if v.Class == failure.OutputTruncated && obs.Response != nil && out.Content == "" {
		// A truncated answer: its text may be continued (action continue).
		out.Content = answerText(resp)
	}
	if v.Class == failure.None && (!m.Stream || checked(in.Request)) {
		// A model that cannot stream, or a checked answer: one delta.
		pub.text(answerText(resp))
	}
	if v.Class == failure.None {
		pub.toolCalls(calls)
	}
	if pub.close(ctx) {
		out.Published = max(out.CompletionTokens, 1)
	}
	if v.Class == failure.None {
		ch := resp.Choices[0]
		out.Content = answerText(resp)
		out.FinishReason = string(ch.FinishReason)
		out.ToolCalls = calls
		out.Logprobs = logprobs
		if ch.LogProbs != nil {
			out.Logprobs, _ = json.Marshal(ch.LogProbs)
		}
		if in.Cache && in.Continue == "" && len(calls) == 0 && out.FinishReason == string(openai.FinishReasonStop) {
			if err := a.cache.put(ctx, in.Request, out.Content, m.Name, a.now()); err != nil {
				// The answer stands; only the shared cache missed a write.
				activity.GetLogger(ctx).Warn("shared answer cache write failed", "error", err)
			}
		}
		return out, nil
	}
	return out, temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("%s on %s: %s", v.Class, m.Name, v.Reason), string(v.Class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
}

// callersLimit reports whether the attempt's max_tokens is the one the
// caller set (the request's, not grown by a retry).
func callersLimit(in CallInput) bool {
	return in.Request.MaxTokens > 0 && in.Shape.MaxTokens == in.Request.MaxTokens && in.Continue == ""
}

// usableAnswer reports whether a reply that stopped at its limit holds an
// answer: text besides thinking, or a tool call (checked after).
func usableAnswer(resp openai.ChatCompletionResponse) bool {
	if len(resp.Choices) == 0 {
		return false
	}
	msg := resp.Choices[0].Message
	return len(msg.ToolCalls) > 0 || classify.StripThinking(answerText(resp)) != ""
}

// defaultMaxTokens is the max_tokens sent for a request that sets none:
// the policy's default, at most what the model's context window leaves
// after the prompt, and at least the output reserve the prompt's cut kept
// free.
func defaultMaxTokens(def, window, promptTokens, reserve int) int {
	if window > 0 && promptTokens > 0 && window-promptTokens < def {
		return max(window-promptTokens, min(reserve, def))
	}
	return def
}

// bodyLimit makes an attempt whose reply went over http.max_body_bytes
// body_error, whatever the rest of the reply said: its body, one of its
// stream's lines or its streamed answer (read up to the limit, then
// dropped), or a reply whose answer is over the limit once JSON-encoded
// for history (a plain body may write < as one byte; history takes six).
// The status and the upstream's Retry-After stay.
func (a *Activities) bodyLimit(v classify.Verdict, ex *exchange, obs classify.Observation, resp openai.ChatCompletionResponse) classify.Verdict {
	lim := ex.tooLarge()
	if lim == nil && obs.Stream != nil {
		errors.As(obs.Stream.Err, &lim)
	}
	if lim == nil && v.Class == failure.None {
		if n, limit := answerSize(resp), a.cfg.HTTP.MaxBodyBytes; limit > 0 && n > limit {
			lim = &bodyLimitError{what: fmt.Sprintf("answer (%d bytes JSON-encoded)", n), limit: int64(limit)}
		}
	}
	if lim == nil {
		return v
	}
	reason := lim.Error()
	if v.Status != 0 {
		reason = fmt.Sprintf("HTTP %d, %s", v.Status, reason)
	}
	if obs.Stream != nil && obs.Stream.Chunks > 0 {
		reason += fmt.Sprintf(" after %d chunk(s)", obs.Stream.Chunks)
	}
	return classify.Verdict{Class: failure.BodyError, Status: v.Status, Reason: reason,
		RetryAfter: v.RetryAfter, HasRetryAfter: v.HasRetryAfter,
		RateLimitRemaining: v.RateLimitRemaining, HasRateLimitRemaining: v.HasRateLimitRemaining}
}

// answerSize is what the answer of a reply takes in the attempt's
// outcome, JSON-encoded: text, tool calls and logprobs.
func answerSize(resp openai.ChatCompletionResponse) int {
	if len(resp.Choices) == 0 {
		return 0
	}
	ch := resp.Choices[0]
	n := encodedLen(answerText(resp))
	for _, tc := range ch.Message.ToolCalls {
		n += encodedLen(tc.ID) + encodedLen(tc.Function.Name) + encodedLen(tc.Function.Arguments)
	}
	if ch.LogProbs != nil {
		for _, lp := range ch.LogProbs.Content {
			n += logprobSize(lp.Token, nil) + 4*len(lp.Bytes)
			for _, top := range lp.TopLogProbs {
				n += logprobSize(top.Token, nil) + 4*len(top.Bytes)
			}
		}
	}
	return n
}

// ownShape reports whether a failure says more about the request than
// about the model, so that it does not count against the model's breaker
// (one tenant's huge requests would otherwise open it for everyone): a
// timeout of an attempt whose prompt took more than half of the model's
// context window (a long prefill), or that asked for more than a quarter
// of it as max_tokens (a long generation). Classes caused by the request
// alone (context_length_exceeded, output_truncated, invalid_request)
// never count (failure.Class.CountsForBreaker).
func ownShape(m config.ModelConfig, in CallInput, class failure.Class) bool {
	switch class {
	case failure.Timeout, failure.ReadTimeout:
	default:
		return false
	}
	w := m.ContextWindow
	return w > 0 && (in.Prompt.Tokens*2 > w || in.Shape.MaxTokens*4 > w)
}

// backpressure holds the scope of a rate-limited attempt (a 429: the
// model's rate_limit_scope; queue_full: the model's queue) for the
// upstream's Retry-After, else rate_limit.hold, and reports whether the
// refusal is backpressure: true until that scope has been held without a
// break for rate_limit.breaker_after, when it starts to count against the
// model's breaker.
func (a *Activities) backpressure(m config.ModelConfig, v classify.Verdict) bool {
	var scope string
	switch v.Class {
	case failure.RateLimited:
		scope = m.Scope(m.RateLimitScope)
	case failure.QueueFull:
		scope = m.Scope(config.ScopeModel)
	default:
		return false
	}
	d := a.cfg.RateLimit.Hold.D()
	if v.HasRetryAfter && v.RetryAfter > 0 {
		d = min(v.RetryAfter, a.cfg.Backoff.RetryAfterCap.D())
	}
	return a.holds.Hold(scope, a.now(), d) < a.cfg.RateLimit.BreakerAfter.D()
}

// headroom reads the provider's own rate-limit headers on any response:
// a pooled key's share of its limits left is noted for the key choice;
// when x-ratelimit-remaining-requests or -tokens says 0, the model's
// rate_limit_scope is held until the matching x-ratelimit-reset-* ("1s",
// "6m0s", "20ms", or seconds), so the next call waits its turn instead of
// being refused.
func (a *Activities) headroom(m config.ModelConfig, h http.Header) {
	now := a.now()
	if m.Pooled() {
		// The share of its limits the key has left: the key choice
		// favours the keys with the most.
		room, step, told := 1.0, 0.0, false
		for _, kind := range []string{"requests", "tokens"} {
			left, lerr := strconv.ParseFloat(strings.TrimSpace(h.Get("x-ratelimit-remaining-"+kind)), 64)
			limit, merr := strconv.ParseFloat(strings.TrimSpace(h.Get("x-ratelimit-limit-"+kind)), 64)
			if lerr == nil && merr == nil && limit > 0 {
				room, told = min(room, left/limit), true
				if kind == "requests" {
					step = 1 / limit
				}
			}
		}
		if told {
			a.keys.report(m, room, step, now)
		}
	}
	for _, kind := range []string{"requests", "tokens"} {
		if strings.TrimSpace(h.Get("x-ratelimit-remaining-"+kind)) != "0" {
			continue
		}
		reset := strings.TrimSpace(h.Get("x-ratelimit-reset-" + kind))
		d, err := time.ParseDuration(reset)
		if err != nil {
			s, ferr := strconv.ParseFloat(reset, 64)
			if ferr != nil || s < 0 {
				continue
			}
			d = time.Duration(s * float64(time.Second))
		}
		if d > 0 {
			a.holds.Hold(m.Scope(m.RateLimitScope), now, min(d, a.cfg.Backoff.RetryAfterCap.D()))
		}
	}
}

// answerText is the text of a reply's first choice.
func answerText(resp openai.ChatCompletionResponse) string {
	if len(resp.Choices) == 0 {
		return ""
	}
	msg := resp.Choices[0].Message
	if msg.Content != "" {
		return msg.Content
	}
	var b strings.Builder
	for _, part := range msg.MultiContent {
		b.WriteString(part.Text)
	}
	return b.String()
}

func classLabel(c failure.Class) string {
	if c == failure.None {
		return "ok"
	}
	return string(c)
}

// chatRequest is the upstream request of one attempt on model m: the
// request's fields (docs/agents.md), the attempt's messages and shape.
func chatRequest(m config.ModelConfig, r request.Request, msgs []request.Message, sh callstate.Shape) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: m.Name, MaxTokens: sh.MaxTokens}
	if sh.Temperature != nil {
		req.Temperature = float32(*sh.Temperature)
		if req.Temperature == 0 {
			// go-openai omits a zero temperature; this is its documented
			// way to send 0.
			req.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if r.NeedsTools() || (len(r.Tools) > 0 && m.Can(config.CapTools)) {
		for _, t := range r.Tools {
			fd := &openai.FunctionDefinition{Name: t.Function.Name, Description: t.Function.Description}
			if len(t.Function.Parameters) > 0 {
				fd.Parameters = t.Function.Parameters
			}
			if t.Function.Strict != nil {
				fd.Strict = *t.Function.Strict
			}
			req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: fd})
		}
		if c := r.ToolChoice; c != nil {
			if c.Function != "" {
				req.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: c.Function}}
			} else {
				req.ToolChoice = c.Mode
			}
		}
		if r.ParallelToolCalls != nil {
			req.ParallelToolCalls = *r.ParallelToolCalls
		}
	}
	if f := r.ResponseFormat; f != nil {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatType(f.Type)}
		if s := f.JSONSchema; s != nil {
			js := &openai.ChatCompletionResponseFormatJSONSchema{Name: s.Name, Description: s.Description, Schema: s.Schema}
			if s.Strict != nil {
				js.Strict = *s.Strict
			}
			req.ResponseFormat.JSONSchema = js
		}
	}
	req.Stop = r.Stop
	if r.Seed != nil {
		seed := int(*r.Seed)
		req.Seed = &seed
	}
	f32 := func(v *float64) float32 {
		if v == nil {
			return 0
		}
		if *v == 0 {
			// go-openai omits a zero; its documented way to send 0.
			return math.SmallestNonzeroFloat32
		}
		return float32(*v)
	}
	req.TopP, req.PresencePenalty, req.FrequencyPenalty = f32(r.TopP), f32(r.PresencePenalty), f32(r.FrequencyPenalty)
	req.LogitBias, req.LogProbs, req.ReasoningEffort = r.LogitBias, r.Logprobs, r.ReasoningEffort
	if r.TopLogprobs != nil {
		req.TopLogProbs = *r.TopLogprobs
	}
	if openai.NewReasoningValidator().Validate(req) != nil {
		// Reasoning models take max_completion_tokens and a fixed
		// temperature: adapt rather than fail the attempt before sending.
		req.MaxCompletionTokens, req.MaxTokens, req.Temperature = req.MaxTokens, 0, 0
		// They take no logprobs and only the default sampling either
		// (go-openai refuses such a request before sending it).
		req.LogProbs, req.TopLogProbs, req.TopP, req.PresencePenalty, req.FrequencyPenalty = false, 0, 0, 0, 0
	}
	req.Messages = make([]openai.ChatCompletionMessage, 0, len(msgs)+1)
	for _, m := range msgs {
		cm := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, p := range m.Parts {
			part := openai.ChatMessagePart{Type: openai.ChatMessagePartType(p.Type), Text: p.Text}
			if p.ImageURL != nil {
				part.ImageURL = &openai.ChatMessageImageURL{URL: p.ImageURL.URL, Detail: openai.ImageURLDetail(p.ImageURL.Detail)}
			}
			cm.MultiContent = append(cm.MultiContent, part)
		}
		if len(cm.MultiContent) > 0 {
			cm.Content = ""
		}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolType(tc.Type),
				Function: openai.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
			})
		}
		req.Messages = append(req.Messages, cm)
	}
	if sh.Repair != "" {
		// A repair: the model is told what was wrong with its last answer.
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: sh.Repair})
	}
	return req
}

// passthrough are the request's passthrough fields that model m forwards.
func passthrough(m config.ModelConfig, r request.Request) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for _, f := range m.Passthrough {
		if v, ok := r.Passthrough[f]; ok {
			if out == nil {
				out = map[string]json.RawMessage{}
			}
			out[f] = v
		}
	}
	return out
}

// toolCalls converts a reply's tool calls. A call without an id (some
// servers send none) gets one made from the attempt's request ID, so the
// agent can answer it in its next turn, and a resend names it alike.
func toolCalls(calls []openai.ToolCall, requestID string) []request.ToolCall {
	var out []request.ToolCall
	for i, c := range calls {
		typ := string(c.Type)
		if typ == "" {
			typ = "function"
		}
		id := c.ID
		if id == "" {
			sum := sha256.Sum256([]byte(requestID))
			id = fmt.Sprintf("call_%s_%d", hex.EncodeToString(sum[:8]), i)
		}
		out = append(out, request.ToolCall{ID: id, Type: typ, Function: request.FunctionCall{Name: c.Function.Name, Arguments: c.Function.Arguments}})
	}
	return out
}

// checked reports whether an answer to r is checked before the caller sees
// any of it: tool calls and JSON answers may be repaired.
func checked(r request.Request) bool { return r.NeedsTools() || r.JSONAnswer() }

// Progress is the call activity's heartbeat: the attempt and the
// completion tokens received so far (streamed attempts).
type Progress struct {
	Attempt int `json:"attempt"`
	Tokens  int `json:"tokens"`
	// Text is a live attempt's text so far, all of it handed to its
	// followers (liveAttempt): after a lost worker the call continues it.
	Text string `json:"text,omitempty"`
	Live bool   `json:"live,omitempty"`
}

// heartbeat records heartbeats with details() until stop is called, often
// enough for the heartbeat timeout; it also delivers cancellation to ctx.
// It is a timer, not a goroutine: a worker runs up to WORKER_MAX_CALLS
// attempts at once, most of them waiting on the upstream, and a parked
// goroutine per attempt is memory (docs/benchmarks.md, memory).
func heartbeat(ctx context.Context, timeout time.Duration, details func() any) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	every := max(timeout/3, 100*time.Millisecond)
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		done := stopped || ctx.Err() != nil
		mu.Unlock()
		if done {
			return
		}
		activity.RecordHeartbeat(ctx, details())
		mu.Lock()
		if !stopped {
			t.Reset(every)
		}
		mu.Unlock()
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// endpoints lists the endpoints of the ladder's models, each once.
func (a *Activities) endpoints() []string {
	endpoints := make([]string, 0, len(a.cfg.Models))
	for _, l := range a.cfg.Models {
		if !slices.Contains(endpoints, l.Endpoint()) {
			endpoints = append(endpoints, l.Endpoint())
		}
	}
	return endpoints
}
