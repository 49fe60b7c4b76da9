package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/policies/structured"
)

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

// callModel is CallModel inside its span: the attempt's steps in order.
func (a *Activities) callModel(ctx context.Context, in CallInput) (CallOutcome, error) {
	m, refused, err := a.attemptModel(in)
	if err != nil {
		return refused, err
	}
	lastChanceWait(ctx, in.Attempt, in.Delay)
	at := a.newAttempt(ctx, in, m)
	defer at.end()
	at.send()
	if err := at.interrupted(); err != nil {
		return at.out, err
	}
	at.observe()
	at.judge()
	at.record()
	return at.publish()
}

// lastChanceWait holds a waiting call's last request (CallInput.Delay)
// until delay after the attempt was scheduled: the worker times that last
// stretch, since a workflow timer fires up to a second late and the
// request would go that much earlier than it must. It beats meanwhile, so
// a cancelled call's wait ends at once (its request is then not sent).
func lastChanceWait(ctx context.Context, attempt int, delay time.Duration) {
	if delay <= 0 || !activity.IsActivity(ctx) {
		return
	}
	info := activity.GetInfo(ctx)
	left := time.Until(info.ScheduledTime.Add(delay))
	if left <= 0 {
		return
	}
	stop := heartbeat(ctx, info.HeartbeatTimeout, func() any { return Progress{Attempt: attempt} })
	defer stop()
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// attemptModel is the model of attempt in, with the attempt's key. When
// the model's breaker opened where the attempt runs since it was planned
// (another worker, or other calls), the attempt is refused before any
// request (breaker_open), unless it goes past open breakers (PastOpen).
func (a *Activities) attemptModel(in CallInput) (config.ModelConfig, CallOutcome, error) {
	m, ok := a.cfg.Model(in.Model)
	if !ok {
		return m, CallOutcome{}, invalid(fmt.Errorf("model %q is not in the ladder", in.Model))
	}
	key := in.Key
	if key == "" {
		key = m.Keys()[0] // one key (a pool of one included)
	} else if !slices.Contains(m.Keys(), key) {
		return m, CallOutcome{}, invalid(fmt.Errorf("key %q is not in the pool of %s", key, m.Name))
	}
	m = m.WithKey(key) // its key, its client, its rate-limit holds
	if !a.breakers.Admit(m.Name, a.now()) && !in.PastOpen && !a.without[guard.RuleBreaker] {
		out := CallOutcome{Class: failure.BreakerOpen, NotSent: true, Reason: fmt.Sprintf("breaker of %s open: no upstream call made", m.Name)}
		a.metrics.Attempt(m.Name, string(failure.BreakerOpen), 0)
		return m, out, temporal.NewApplicationErrorWithOptions(out.Reason, string(failure.BreakerOpen),
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
	}
	return m, CallOutcome{}, nil
}

// attempt is one upstream attempt of a call, from its request to its
// outcome; CallModel runs its steps once each, in order: send, observe,
// judge, record, publish. The stream's callbacks set tokens and firstAt
// while send waits; its watchdog sets cutWhy, at times after.
type attempt struct {
	a    *Activities
	ctx  context.Context // the activity's
	info activity.Info
	in   CallInput
	m    config.ModelConfig // with the attempt's key
	msgs []request.Message  // what it sends
	out  CallOutcome

	// The request: ex records the upstream's reply; reqCtx ends at due
	// (the attempt's timeout and grace), and a hedged attempt's rival may
	// cut it (leaveRace ends that).
	ex        *exchange
	reqCtx    context.Context
	cancel    context.CancelFunc
	leaveRace func()
	grace     time.Duration
	due       time.Time

	// pub streams the answer to the caller; ann sends the call the notes
	// of an attempt that may be hedged; stopHeartbeat ends the SDK's
	// heartbeats (none when pub sends a live attempt's own).
	pub           *callPublisher
	ann           *announcer
	stopHeartbeat func()

	start   time.Time
	tokens  atomic.Int64           // completion tokens received so far
	firstAt time.Time              // when the first streamed token came
	cutWhy  atomic.Pointer[string] // why an overdue request was cut (Activities.overdue)

	// What came back (resp, err, logprobs), what the classifier sees of
	// it with the API key (key) masked out, the verdict and the answer's
	// tool calls.
	resp     openai.ChatCompletionResponse
	err      error
	logprobs json.RawMessage
	key      string
	obs      classify.Observation
	v        classify.Verdict
	calls    []request.ToolCall
}

// newAttempt opens attempt in on m: its messages, its request's context
// and recorder, its publisher, heartbeats and announcer. end closes them.
func (a *Activities) newAttempt(ctx context.Context, in CallInput, m config.ModelConfig) *attempt {
	msgs := attemptMessages(in, m)
	at := &attempt{a: a, ctx: ctx, info: activity.GetInfo(ctx), in: in, m: m, msgs: msgs,
		out: CallOutcome{Messages: len(msgs), PromptTokens: in.Prompt.Tokens}}
	at.ex = a.newExchange(in, m, at.info.WorkflowExecution.ID)
	at.openRequest()
	at.pub = a.publisher(ctx, in, m, at.cancel)
	at.stopHeartbeat = func() {}
	if at.pub.heartbeats() {
		at.pub.tokens = &at.tokens
	} else {
		at.stopHeartbeat = heartbeat(ctx, at.info.HeartbeatTimeout, func() any {
			return Progress{Attempt: in.Attempt, Tokens: int(at.tokens.Load())}
		})
	}
	at.ann = newAnnouncer(ctx, in, at.pub)
	return at
}

// openRequest bounds the attempt's request by its timeout and grace, and
// joins a hedged attempt to its race.
func (at *attempt) openRequest() {
	in, info := at.in, at.info
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = at.m.Timeout.D()
	}
	// An attempt bounded by the call's deadline keeps its request open
	// in.Grace past it, answer started or not: no attempt could start in
	// the fallback's reserve, and the fallback needs only FallbackTime of
	// it. The workflow sized the attempt when it scheduled it: the time
	// the attempt waited to be picked up comes off the grace, so the
	// fallback keeps its FallbackTime.
	at.grace = max(in.Grace-max(info.StartedTime.Sub(info.ScheduledTime), 0), 0)
	if at.a.without[guard.RuleGrace] {
		at.grace = 0
	}
	at.due = at.a.now().Add(timeout + at.grace)
	at.reqCtx, at.cancel = context.WithTimeout(withExchange(at.ctx, at.ex), timeout+at.grace)
	at.leaveRace = func() {}
	if in.Announce {
		// A hedged attempt: its rival's answer may cut its request (races).
		var cut context.CancelCauseFunc
		at.reqCtx, cut = context.WithCancelCause(at.reqCtx)
		at.leaveRace = at.a.races.join(raceKey(info.WorkflowExecution.RunID, in.Attempt, in.Hedge), cut)
	}
}

// end closes what newAttempt opened, the last first.
func (at *attempt) end() {
	at.ann.stop()
	at.pub.close(at.ctx)
	at.leaveRace()
	at.cancel()
}

// send sends the attempt's request, unless its prompt cannot fit the
// model's window, and waits for the reply: streamed or whole. An attempt
// whose rival answered waits, its request closed, for the workflow to
// cancel it.
func (at *attempt) send() {
	a, in, m := at.a, at.in, at.m
	at.start = a.now()
	at.obs = classify.Observation{PromptTokens: in.Prompt.Tokens, ContextWindow: m.ContextWindow}
	if in.Prompt.Fits {
		at.obs.PromptTokens, at.obs.ContextWindow = 0, 0 // fits: let the upstream judge
		if req := a.upstreamRequest(in, m, at.msgs); m.Stream {
			at.sendStreamed(req)
		} else {
			at.sendWhole(req)
		}
	}
	at.stopHeartbeat()
	at.out.Duration = a.now().Sub(at.start)
	if errors.Is(context.Cause(at.reqCtx), errCutByRace) && at.ctx.Err() == nil {
		// Its rival answered: the workflow, taking that answer, cancels
		// this attempt; until then it waits, its request already closed.
		awaitCancel(at.ctx, at.info.HeartbeatTimeout)
	}
	at.noteFirstToken()
}

// sendStreamed reads the reply as a stream, under the first-token and idle
// timeouts; the first-token timeout asks overdue whether to wait on.
func (at *attempt) sendStreamed(req openai.ChatCompletionRequest) {
	a, in, m := at.a, at.in, at.m
	live := at.pub.text
	if checked(in.Request) {
		// An answer that may be repaired reaches the caller once it is
		// checked: an agent must never act on text a repair replaces, nor
		// see it twice.
		live = nil
	}
	done := a.queues.wait(m.Capacity(), at.start, m.FirstTokenTimeout.D())
	// With a grace, no first token by the attempt's deadline cuts it there.
	limits := streamLimits{firstToken: m.FirstTokenTimeout.D(), byDeadline: at.grace > 0, idle: m.IdleTimeout.D(), maxBytes: a.cfg.HTTP.MaxBodyBytes,
		patient: func() (wait bool, recheck time.Duration) {
			var why string
			wait, recheck = a.overdue(in, m, at.start, at.due, at.ann, &why)
			if why != "" {
				at.cutWhy.Store(&why)
			}
			return wait, recheck
		}}
	st := stream(at.reqCtx, a.client(m), req, limits, func(n int) { at.streamedTokens(n, done) }, live)
	done()
	at.resp, at.err, at.obs.Stream, at.logprobs = st.resp, st.err, st.obs, st.logprobs
}

// streamedTokens counts the n tokens streamed so far. The first leaves
// the endpoint's queue (done), claims the race when the first token wins
// it, and is announced to the call before the first delta is published.
func (at *attempt) streamedTokens(n int, done func()) {
	at.tokens.Store(int64(n))
	if n != 1 {
		return
	}
	a, in, m := at.a, at.in, at.m
	at.firstAt = a.now()
	done()
	a.outliers.Record(m.Capacity(), guard.Started, at.start, at.firstAt, 0, 0)
	a.queues.firstToken(m.Capacity(), at.start, at.firstAt.Sub(at.start), m.FirstTokenTimeout.D())
	if in.FirstTokenWins && !a.races.win(at.info.WorkflowExecution.RunID, in.Attempt, in.Hedge) {
		at.pub.loseRace() // its rival's first token came first: it is being cut
		return
	}
	at.ann.firstToken()
}

// sendWhole waits for the whole reply.
func (at *attempt) sendWhole(req openai.ChatCompletionRequest) {
	a, m := at.a, at.m
	at.resp, at.err = a.client(m).create(at.reqCtx, req)
	if at.err == nil {
		a.queues.firstToken(m.Capacity(), at.start, a.now().Sub(at.start), m.Timeout.D())
	}
}

// noteFirstToken records the attempt's time to first token, for the
// adaptive hedge delay.
func (at *attempt) noteFirstToken() {
	a, m, fits := at.a, at.m, at.in.Prompt.Fits
	switch {
	case !at.firstAt.IsZero():
		a.firstToken(m.Name, at.firstAt.Sub(at.start))
	case !m.Stream && at.err == nil && fits:
		a.firstToken(m.Name, at.out.Duration) // the whole reply is its first token
	case at.in.Announce && at.ctx.Err() != nil && fits:
		// A hedged attempt cancelled before its first token (its hedge
		// won): its time to first token is at least what it waited.
		// Leaving it out would lower the p90 each time a hedge wins, and
		// hedge calls that are not slow.
		a.firstToken(m.Name, at.out.Duration)
	}
}

// interrupted is the error of an attempt stopped from outside, nil when
// its reply is to be judged: the worker stopping (worker_lost), the
// workflow cancelling the call, the activity timing out.
func (at *attempt) interrupted() error {
	if err := at.ctx.Err(); err != nil {
		if errors.Is(context.Cause(at.ctx), worker.ErrWorkerShutdown) {
			// This worker is stopping: the attempt is lost, not failed. The
			// workflow resends it elsewhere (worker_lost); text
			// already streamed to the caller is continued, not repeated.
			if at.pub.close(at.ctx) {
				at.out.Content, at.out.Published = answerText(at.resp), max(int(at.tokens.Load()), 1)
				at.out.CompletionTokens = at.out.Published
			}
			return temporal.NewApplicationErrorWithOptions(
				"worker shut down during the attempt", string(failure.WorkerLost),
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{at.out}})
		}
		// The workflow cancelled the call (or the activity timed out): no
		// outcome to judge, and the breaker learns nothing.
		return err
	}
	if at.pub.cancelled() {
		// A live attempt's heartbeat said the call cancelled it.
		at.pub.close(at.ctx)
		return temporal.NewCanceledError()
	}
	return nil
}

// observe gathers what the classifier sees of the attempt: the reply as
// the recorder kept it (status, headers, the first bytes of the body), its
// timeouts, the decoded answer, with the model's API key masked out.
func (at *attempt) observe() {
	obs := &at.obs
	at.out.NotSent = !at.in.Prompt.Fits
	obs.Status, obs.Header, obs.Body, obs.HeaderTimedOut, at.out.ConnectResends = at.ex.snapshot()
	obs.Err = at.err
	obs.AttemptTimedOut = errors.Is(at.reqCtx.Err(), context.DeadlineExceeded)
	if obs.AttemptTimedOut && !at.ex.responded() && !at.m.Stream {
		// A non-streamed reply sends its headers when the answer is done:
		// none within the whole timeout is the read_timeout of such a model.
		obs.HeaderTimedOut = true
	}
	obs.Now = at.a.now()
	if at.err == nil && at.in.Prompt.Fits {
		obs.Response = &at.resp
	}
	at.key = at.a.apiKey(at.m)
	redact(obs, at.key)
}

// judge classifies the reply and checks a well-formed one against what
// the request asked for.
func (at *attempt) judge() {
	in, resp := at.in, &at.resp
	v := classify.Classify(at.obs)
	v = at.a.bodyLimit(v, at.ex, at.obs, *resp)
	if v.Class == failure.OutputTruncated && callersLimit(in) && at.obs.Response != nil && usableAnswer(*resp) &&
		(resp.Usage.CompletionTokens == 0 || resp.Usage.CompletionTokens >= in.Request.MaxTokens) {
		// The caller's own max_tokens reached: its answer, as OpenAI
		// gives it (finish_reason length), never a reason to retry. (A
		// reply cut short of it by the server's own limit is still
		// output_truncated.)
		v.Class, v.Reason = failure.None, fmt.Sprintf("HTTP %d, finish_reason length at the caller's max_tokens (%d)", v.Status, in.Request.MaxTokens)
	}
	if v.Class == failure.None {
		v = at.checkAnswer(v)
	}
	redactVerdict(&v, at.key)
	if why := at.cutWhy.Load(); why != nil && v.Class == failure.ReadTimeout {
		v.Reason += "; " + *why
	}
	at.v = v
}

// checkAnswer judges a well-formed reply: is it the answer the request
// asked for (its tool calls, its JSON schema)?
func (at *attempt) checkAnswer(v classify.Verdict) classify.Verdict {
	at.calls = toolCalls(at.resp.Choices[0].Message.ToolCalls, at.ex.requestID)
	toolErr, schemaErr := at.in.Request.CheckAnswer(at.ctx, at.a.schemas, answerText(at.resp), at.calls)
	// The reason names the field and the constraint; the values and the
	// model's text go only into the repair instruction.
	switch {
	case toolErr != nil:
		v.Class, v.Reason, at.out.Detail = failure.BadToolCall, toolErr.Error(), structured.Detail(toolErr)
	case schemaErr != nil:
		v.Class, v.Reason, at.out.Detail = failure.SchemaMismatch, schemaErr.Error(), structured.Detail(schemaErr)
	}
	return v
}

// record writes the verdict and what the reply used into the outcome,
// and tells the guards and the metrics what the attempt taught them.
func (at *attempt) record() {
	at.recordOutcome()
	at.recordGuards()
}

// recordOutcome writes the verdict, the tokens, and the text of an answer
// that failed after some arrived, into the outcome.
func (at *attempt) recordOutcome() {
	v, out, resp, obs := at.v, &at.out, &at.resp, &at.obs
	out.Class, out.Status, out.Code, out.Reason = v.Class, v.Status, v.Code, v.Reason
	out.Upstream = strings.Trim(v.Message+"; "+v.Detail, "; ")
	if v.Generic {
		out.Diagnosable, out.Type, out.Message = true, v.Type, v.Message
	}
	out.RetryAfter, out.HasRetryAfter = v.RetryAfter, v.HasRetryAfter
	if obs.Response != nil {
		out.CompletionTokens = resp.Usage.CompletionTokens
		if resp.Usage.PromptTokens > 0 {
			out.PromptTokens = resp.Usage.PromptTokens
		}
		if out.CompletionTokens == 0 && len(resp.Choices) > 0 {
			// A stream without a usage chunk: count what arrived.
			out.CompletionTokens = at.a.tokens.Count(resp.Choices[0].Message.Content + resp.Choices[0].Message.ReasoningContent)
		}
	}
	if v.Class != failure.None && obs.Stream != nil && obs.Stream.Chunks > 0 && len(resp.Choices) > 0 {
		// The text that arrived before the attempt failed.
		out.Content, out.CompletionTokens = resp.Choices[0].Message.Content, obs.Stream.Tokens
	}
	if v.Class == failure.OutputTruncated && obs.Response != nil && out.Content == "" {
		// A truncated answer: its text may be continued (action continue).
		out.Content = answerText(*resp)
	}
}

// recordGuards tells the guards what the attempt taught them, as the
// rules after an outcome decide (guard.EndpointTold, guard.ModelLearns):
// the endpoint's ejection, the rate limits and a pooled key's headroom,
// the model's breaker; the spend of a request the upstream generated for;
// and counts the attempt.
func (at *attempt) recordGuards() {
	a, in, m, v, obs := at.a, at.in, at.m, at.v, &at.obs
	a.headroom(m, obs.Header)
	o := guard.Outcome{Class: v.Class, Cut: v.Cut, Started: !at.firstAt.IsZero(), NotSent: at.out.NotSent,
		PromptFits: in.Prompt.Fits, Pooled: m.Pooled(), PromptTokens: in.Prompt.Tokens, MaxTokens: in.Shape.MaxTokens,
		Window: m.ContextWindow, RetryAfter: v.RetryAfter, HasRetryAfter: v.HasRetryAfter}
	now := a.now()
	var refusing time.Duration
	switch told := guard.EndpointTold(o); {
	case told.Overdue:
		a.outliers.Overdue(m.Capacity(), at.start, now, a.rand())
	case told.Tell:
		refusing = a.outliers.Record(m.Capacity(), told.Signal, at.start, now, v.RetryAfter, a.rand())
	}
	learned := guard.ModelLearns(o, refusing, guard.Backpressure{Hold: a.cfg.RateLimit.Hold.D(),
		RetryAfterCap: a.cfg.Backoff.RetryAfterCap.D(), BreakerAfter: a.cfg.RateLimit.BreakerAfter.D(), Without: a.without})
	if learned.Hold > 0 {
		a.holds.Hold(m.Scope(m.RateLimitScope), now, learned.Hold)
	}
	if learned.TellBreaker {
		a.breakers.RecordOutcome(m.Name, now, v.Class)
	}
	if obs.Response != nil || (obs.Stream != nil && obs.Stream.Chunks > 0) {
		// The upstream generated: the request is spend, and a repeat of
		// a request this worker already paid for is duplicate spend.
		at.out.Billed = true
		if in.Fingerprint != "" {
			at.out.SentBefore = a.billed.repeat(in.Fingerprint, a.now())
		}
	}
	if v.Class == failure.None {
		a.answers.Add(m.Name, at.out.Duration)
	}
	a.metrics.Attempt(m.Name, classLabel(v.Class), at.out.Duration)
	a.keyAttempt(m.Name, in.Key, classLabel(v.Class))
}

// answerTime is how long a request to model needs to answer whole: the p90
// of this worker's recent answers, once it has guard.MinSamples of
// them (known false before: a last chance then goes at once, with all the
// time left).
func (a *Activities) answerTime(model string) (need time.Duration, known bool) {
	p90, n := a.answers.P90(model)
	return p90, n >= guard.MinSamples
}

// publish hands the answer over: the rest of it to the caller's stream
// (all of it, as one delta, when the model cannot stream or the answer was
// checked; tool calls whole), and the outcome as the activity's result, a
// good answer also to the answer cache. A failed attempt's outcome is its
// error's details.
func (at *attempt) publish() (CallOutcome, error) {
	in, m, v, out := at.in, at.m, at.v, &at.out
	if v.Class == failure.None && (!m.Stream || checked(in.Request)) {
		at.pub.text(answerText(at.resp))
	}
	if v.Class == failure.None {
		at.pub.toolCalls(at.calls)
	}
	if at.pub.close(at.ctx) {
		out.Published = max(out.CompletionTokens, 1)
	}
	if v.Class != failure.None {
		return at.out, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s on %s: %s", v.Class, m.Name, v.Reason), string(v.Class),
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{at.out}})
	}
	ch := at.resp.Choices[0]
	out.Content = answerText(at.resp)
	out.FinishReason = string(ch.FinishReason)
	out.ToolCalls = at.calls
	out.Logprobs = at.logprobs
	if ch.LogProbs != nil {
		out.Logprobs, _ = json.Marshal(ch.LogProbs)
	}
	if in.Cache && in.Continue == "" && len(at.calls) == 0 && out.FinishReason == string(openai.FinishReasonStop) {
		if err := at.a.cache.put(at.ctx, in.Request, out.Content, m.Name, at.a.now()); err != nil {
			// The answer stands; only the shared cache missed a write.
			activity.GetLogger(at.ctx).Warn("shared answer cache write failed", "error", err)
		}
	}
	return at.out, nil
}
