package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
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

// redacted replaces an API key that an upstream echoed back.
const redacted = "[redacted]"

// redact removes the model's API key from what the upstream answered
// before anything of it is classified, recorded in history or logged: some
// gateways quote the key they refused in full in their 401 message.
func redact(obs *classify.Observation, key string) {
	if key == "" {
		return
	}
	obs.Body = bytes.ReplaceAll(obs.Body, []byte(key), []byte(redacted))
	var apiErr *openai.APIError
	if errors.As(obs.Err, &apiErr) {
		apiErr.Message = redactString(apiErr.Message, key)
	}
	var reqErr *openai.RequestError
	if errors.As(obs.Err, &reqErr) {
		reqErr.Body = bytes.ReplaceAll(reqErr.Body, []byte(key), []byte(redacted))
	}
}

func redactString(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, redacted)
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
	f := prompt.Fit(req.Messages, prompt.Shape{
		Stage: sh.PruneStage, KeepRounds: sh.KeepRounds, Factor: a.cfg.Pruning.Factor,
		Window: m.ContextWindow, Reserve: reserve, Support: m.SystemPrompt,
	}, a.tokens)
	return Prompt{
		Keep: f.Keep, Before: f.Before, Tokens: f.Tokens, Exact: f.Exact, Fits: f.Fits,
		Messages: len(prompt.Build(req.Messages, f.Keep, m.SystemPrompt)),
	}
}

// CallModel makes one upstream attempt. It heartbeats while it waits, so a
// lost worker is noticed within the heartbeat timeout and a cancelled
// workflow cancels the HTTP request. A failed attempt returns an
// ApplicationError whose type is the failure class and whose details are
// the CallOutcome; the outcome also feeds the model's breaker.
func (a *Activities) CallModel(ctx context.Context, in CallInput) (CallOutcome, error) {
	m, ok := a.cfg.Model(in.Model)
	if !ok {
		return CallOutcome{}, invalid(fmt.Errorf("model %q is not in the ladder", in.Model))
	}
	if !a.breakers.Admit(m.Name, a.now()) {
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
	budget := a.budgets.For(m.Endpoint())
	ex.mayResend = func(n int) bool {
		// A resend is a request like any other: within the call's cap and
		// paid from the endpoint's budget.
		return n < in.Resends && budget.TryRetry(a.now())
	}
	if in.Continue != "" {
		ex.continuation = m.Continuation
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = m.Timeout.D()
	}
	callCtx, cancel := context.WithTimeout(withExchange(ctx, ex), timeout)
	defer cancel()
	pub := a.publisher(ctx, in, m)
	defer pub.close(ctx)
	var tokens atomic.Int64
	stopHeartbeat := heartbeat(ctx, info.HeartbeatTimeout, func() any {
		return Progress{Attempt: in.Attempt, Tokens: int(tokens.Load())}
	})

	start := a.now()
	var resp openai.ChatCompletionResponse
	var err error
	obs := classify.Observation{PromptTokens: in.Prompt.Tokens, ContextWindow: m.ContextWindow}
	if fits {
		obs.PromptTokens, obs.ContextWindow = 0, 0 // fits: let the upstream judge
		req := chatRequest(m.Name, msgs, in.Shape.MaxTokens, in.Shape.Temperature)
		if m.Stream {
			st := stream(callCtx, a.client(m), req, streamTimeouts{firstToken: m.FirstTokenTimeout.D(), idle: m.IdleTimeout.D()},
				func(n int) { tokens.Store(int64(n)) }, pub.text)
			resp, err, obs.Stream = st.resp, st.err, st.obs
		} else {
			resp, err = a.client(m).CreateChatCompletion(callCtx, req)
		}
	}
	stopHeartbeat()
	out.Duration = a.now().Sub(start)
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
	v.Reason = redactString(v.Reason, key)
	out.Class, out.Status, out.Code, out.Reason = v.Class, v.Status, v.Code, v.Reason
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
	if !a.backpressure(m, v) { // a rate limit alone does not make the model sick
		a.breakers.RecordOutcome(m.Name, a.now(), v.Class)
	}
	a.metrics.Attempt(m.Name, classLabel(v.Class), out.Duration)

	if v.Class != failure.None && obs.Stream != nil && obs.Stream.Chunks > 0 && len(resp.Choices) > 0 {
		// The text that arrived before the attempt failed.
		out.Content, out.CompletionTokens = resp.Choices[0].Message.Content, obs.Stream.Tokens
	}
	if v.Class == failure.None && !m.Stream {
		// A model that cannot stream: its answer is one delta.
		pub.text(answerText(resp))
	}
	if pub.close(ctx) {
		out.Published = max(out.CompletionTokens, 1)
	}
	if v.Class == failure.None {
		out.Content = answerText(resp)
		out.FinishReason = string(resp.Choices[0].FinishReason)
		return out, nil
	}
	return out, temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("%s on %s: %s", v.Class, m.Name, v.Reason), string(v.Class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
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
// when x-ratelimit-remaining-requests or -tokens says 0, the model's
// rate_limit_scope is held until the matching x-ratelimit-reset-* ("1s",
// "6m0s", "20ms", or seconds), so the next call waits its turn instead of
// being refused.
func (a *Activities) headroom(m config.ModelConfig, h http.Header) {
	now := a.now()
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

func chatRequest(model string, msgs []request.Message, maxTokens int, temperature *float64) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: model, MaxTokens: maxTokens}
	if temperature != nil {
		req.Temperature = float32(*temperature)
		if req.Temperature == 0 {
			// go-openai omits a zero temperature; this is its documented
			// way to send 0.
			req.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if openai.NewReasoningValidator().Validate(req) != nil {
		// Reasoning models take max_completion_tokens and a fixed
		// temperature: adapt rather than fail the attempt before sending.
		req.MaxCompletionTokens, req.MaxTokens, req.Temperature = req.MaxTokens, 0, 0
	}
	req.Messages = make([]openai.ChatCompletionMessage, len(msgs))
	for i, m := range msgs {
		cm := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolType(tc.Type),
				Function: openai.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
			})
		}
		req.Messages[i] = cm
	}
	return req
}

// Progress is the call activity's heartbeat: the attempt and the
// completion tokens received so far (streamed attempts).
type Progress struct {
	Attempt int `json:"attempt"`
	Tokens  int `json:"tokens"`
}

// heartbeat records heartbeats with details() until stop is called, often
// enough for the heartbeat timeout; it also delivers cancellation to ctx.
func heartbeat(ctx context.Context, timeout time.Duration, details func() any) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	every := max(timeout/3, 100*time.Millisecond)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details())
			}
		}
	}()
	return func() { close(done) }
}
