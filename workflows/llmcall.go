package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

// QueryState is the query that returns the CallResult so far.
const QueryState = "state"

// LLMCall runs one LLM call to an answer: a model's, else the business
// fallback's. It fails only for a request that must change (invalid
// request, content the upstream refuses to process) or when cancelled.
func LLMCall(ctx workflow.Context, req CallRequest) (CallResult, error) {
	c := newCall(ctx, req)
	workflow.SetQueryHandler(ctx, QueryState, func() (CallResult, error) { return c.res, nil })
	if err := workflow.SetUpdateHandler(ctx, UpdateAnswer, c.answer); err != nil {
		return c.res, err
	}
	if req.Stream {
		s, err := workflowstreams.NewWorkflowStream(ctx, nil)
		if err != nil {
			return c.res, err
		}
		c.stream = s
		defer func() {
			// Let subscribers fetch the last items before the stream closes;
			// a late one reads the rest from the result.
			_ = s.Drain(ctx, c.admission.Linger)
		}()
	}
	res, err := c.run(ctx)
	switch {
	case err != nil && temporal.IsCanceledError(err):
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		c.finish(dctx, OutcomeCanceled)
	case err != nil && !c.finished:
		// A decision step itself failed: the outcome must not stay "running".
		c.res.Reason = err.Error()
		c.finish(ctx, OutcomeFailed)
	}
	c.done, c.err = true, err
	// The answer updates waiting for the end return before the run does
	// (the stream's parked polls are the stream's to end).
	_ = workflow.Await(ctx, func() bool { return c.answering == 0 })
	return res, err
}

// answer is the UpdateAnswer handler: the quick answer once a hedge gave
// one, else the call's result when it ends (an error when the call
// failed; the caller then reads the workflow's own error).
func (c *call) answer(ctx workflow.Context) (CallResult, error) {
	c.answering++
	defer func() { c.answering-- }()
	if err := workflow.Await(ctx, func() bool { return c.done || c.quick != nil }); err != nil {
		return CallResult{}, err
	}
	switch {
	case c.done && c.err != nil:
		return CallResult{}, c.err
	case c.done:
		return c.res, nil
	}
	return *c.quick, nil
}

// call is one LLMCall: its request, its decision state and the result
// being written.
type call struct {
	req       CallRequest
	start     time.Time
	res       CallResult
	admission activities.Admission
	st        callstate.State
	finished  bool
	// delivered is the text already streamed to the caller: later
	// attempts continue it and the answer starts with it.
	delivered string
	// refined is the refined request and partial answer (refine.go).
	refined refiner
	// best is the longest text a model wrote for the call in an attempt
	// that failed (cut at its limit, or its stream broken) and that the
	// caller has not seen: the answer when no model answers in full,
	// instead of a canned one.
	best bestText
	// sent are the fingerprints of the requests the call's attempts sent:
	// the same one again is duplicate spend.
	sent []string
	// guards are the guards that skipped models (budget, hold, …).
	guards []string
	// rulesTried are the rules with a technical condition that acted
	// without answering (step-by-step mode that gave up): not again.
	rulesTried []string
	// toolCallsPublished: the answering attempt streamed its tool calls.
	toolCallsPublished bool
	// stream is the call's workflow stream when the caller asked to
	// stream, else nil.
	stream *workflowstreams.WorkflowStream
	// filter is the stream's publish filter set by the call's last race.
	filter func(string) bool
	// quick is a hedge's answer delivered before the first model's
	// (hedge.replace); done and err tell the answer updates the call
	// ended; answering counts the updates waiting.
	quick     *CallResult
	quickAt   time.Duration
	done      bool
	err       error
	answering int
}

// event publishes an event to the call's stream, if it has one.
func (c *call) event(ctx workflow.Context, e Event) {
	if c.stream == nil {
		return
	}
	if err := c.stream.Topic(TopicEvent).Publish(e); err != nil {
		workflow.GetLogger(ctx).Warn("stream event not published", "error", err)
	}
}

func newCall(ctx workflow.Context, req CallRequest) *call {
	return &call{
		req:   req,
		start: workflow.GetInfo(ctx).WorkflowStartTime,
		res:   CallResult{RequestID: workflow.GetInfo(ctx).WorkflowExecution.ID, Attempts: []Attempt{}},
	}
}

func localOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:             summary,
	})
}

func (c *call) run(ctx workflow.Context) (CallResult, error) {
	var a *activities.Activities
	c.upsert(ctx, SAOutcome.ValueSet(OutcomeRunning), SAScenario.ValueSet(keyword(c.req.Scenario)), SATenant.ValueSet(keyword(c.req.Tenant)))
	workflow.SetCurrentDetails(ctx, "admitting: validate the request, check business rules")

	err := workflow.ExecuteLocalActivity(localOptions(ctx, "admit: validate, business rules, count in budget"),
		a.Admit, c.req).Get(ctx, &c.admission)
	if err != nil {
		if !temporal.IsCanceledError(err) {
			c.res.Reason = err.Error()
			c.finish(ctx, OutcomeFailed)
		}
		return c.res, err
	}
	c.res.ShadowRules = c.admission.Shadow
	if r := c.admission.Rule; r != nil {
		c.res.RuleID, c.res.Flag = r.ID, r.Flag
		switch r.Action {
		case config.RuleHandoff, config.RuleSafeMessage:
			return c.res, c.fire(ctx, *r, "business rule "+r.ID)
		}
	}
	c.st = c.admission.State
	reason, err := c.attempts(ctx)
	if err != nil {
		return c.res, err
	}
	if c.res.Source != "" {
		return c.res, nil
	}
	return c.fallback(ctx, reason)
}

// attempts runs upstream attempts until one answers (c.res.Source is set),
// the decision falls back (the reason is returned) or fails (an error):
// prepare → call → decide → record → wait.
func (c *call) attempts(ctx workflow.Context) (string, error) {
	for {
		next, reason, end, err := c.prepare(ctx)
		if err != nil || end {
			return reason, err
		}
		if next.again {
			continue
		}
		prep := next.prep
		in, streamedFrom, remaining := c.attemptInput(ctx, prep, next.remaining)
		ran := c.callModel(ctx, &prep, in, remaining)
		// A hedged attempt may have been carried by its hedge.
		prep, started, out, err := ran.prep, ran.started, ran.out, ran.err
		if err != nil && temporal.IsCanceledError(err) {
			return "", err
		}
		class := failure.None
		if err != nil {
			class = classOf(err, &out) // fills out from the error's details
			c.recoverLost(ctx, class, err, &out, streamedFrom)
		}
		att := Attempt{
			N: c.st.N, Model: prep.Model, Key: prep.Key, Status: out.Status, Messages: prep.Prompt.Messages, PromptTokens: prep.Prompt.Tokens,
			DurationMS: workflow.Now(ctx).Sub(started).Milliseconds(), RetriedFrom: c.st.From.String(), Hedge: ran.hedge,
		}
		if out.Messages > 0 {
			att.Messages, att.PromptTokens = out.Messages, out.PromptTokens
		}
		c.spent(ctx, prep, class, out, att.PromptTokens)
		note := c.takeNote(prep)
		if err == nil {
			c.answered(ctx, att, out, note)
			return "", nil
		}
		if reason, end, err := c.afterFailure(ctx, prep, att, class, out, note); err != nil || end {
			return reason, err
		}
	}
}

// nextAttempt is what prepare found: the attempt to send, how long is
// left for it, or again: a wait for the guard to decide (rule wait) that
// ended, so the attempt is prepared anew.
type nextAttempt struct {
	prep      activities.Prepared
	remaining time.Duration
	again     bool
}

// prepare readies the call's next attempt (PrepareAttempt) and waits out
// the hold it asks for; end: no attempt, the fallback answers for reason.
func (c *call) prepare(ctx workflow.Context) (next nextAttempt, reason string, end bool, err error) {
	var a *activities.Activities
	if reason, full := c.historyFull(ctx); full {
		return next, reason, true, nil
	}
	remaining := c.timeLeft(ctx)
	if remaining < guard.MinAttemptTime {
		return next, fmt.Sprintf("deadline: %s left, %s kept for the fallback",
			callstate.FormatDuration(remaining+c.admission.FallbackReserve), callstate.FormatDuration(c.admission.FallbackReserve)), true, nil
	}
	if err := c.refine(ctx, remaining); err != nil {
		return next, "", true, err
	}
	var prep activities.Prepared
	err = workflow.ExecuteLocalActivity(localOptions(ctx, fmt.Sprintf("prepare attempt %d: model, pruning", c.st.N)),
		a.PrepareAttempt, activities.PrepareInput{Request: c.attemptRequest(), State: c.st, Elapsed: workflow.Now(ctx).Sub(c.start)}).Get(ctx, &prep)
	if err != nil {
		return next, "", true, err
	}
	c.skipped(prep.Skipped)
	c.st = prep.State
	if prep.Model == "" {
		return next, prep.Reason, true, nil
	}
	if prep.Hold > 0 {
		// Only when a recorded PrepareAttempt says so: histories of
		// earlier builds have no hold and replay unchanged.
		if err := c.hold(ctx, prep); err != nil {
			return next, "", true, err
		}
		if prep.Recheck {
			// A wait (rule wait) or a hold (rule hold): prepare
			// again, and let the guard say whether this call goes now.
			return nextAttempt{again: true}, "", false, nil
		}
		remaining = c.timeLeft(ctx)
		if remaining < guard.MinAttemptTime {
			return next, fmt.Sprintf("deadline: the wait for %s left %s, %s kept for the fallback",
				prep.Model, callstate.FormatDuration(remaining+c.admission.FallbackReserve), callstate.FormatDuration(c.admission.FallbackReserve)), true, nil
		}
	}
	return nextAttempt{prep: prep, remaining: remaining}, "", false, nil
}

// attemptInput announces the attempt of prep and builds its input, with
// remaining left for it (returned as a last chance's delay and timeout
// leave it); streamedFrom is the call's stream offset before it, where
// what it publishes begins.
func (c *call) attemptInput(ctx workflow.Context, prep activities.Prepared, remaining time.Duration) (in *activities.CallInput, streamedFrom int64, _ time.Duration) {
	if c.delivered != "" {
		c.event(ctx, Event{Type: EventResumed, Attempt: c.st.N, Model: prep.Model})
	} else {
		c.event(ctx, Event{Type: EventAttemptStarted, Attempt: c.st.N, Model: prep.Model})
	}
	if c.stream != nil {
		streamedFrom = c.stream.Offset()
	}
	in = &activities.CallInput{
		Request: c.attemptRequest(), Model: prep.Model, Attempt: c.st.N, Shape: c.st.Shape,
		Prompt: prep.Prompt, Timeout: min(prep.Timeout, remaining), Continue: c.continued(), Resends: prep.Resends,
		Key: prep.Key, Fingerprint: prep.Fingerprint, PastOpen: prep.PastOpen,
		Grace: callstate.Grace(min(prep.Timeout, remaining), prep.Timeout, c.admission.FallbackReserve),
		// Only the first model's whole answer may be kept: any other is
		// a degraded one (docs/how-it-works.md "Answer cache").
		Cache: prep.Model == c.admission.FirstModel && c.delivered == "",
	}
	if prep.Delay > 0 {
		// A waiting call's last chance (only a PrepareAttempt recorded
		// by this build says so): its request waits in the worker and
		// runs to the fallback's own time, with no grace after.
		// The delay never eats into the least attempt time (the
		// top of the loop left at least that much before the reserve).
		window := callstate.FallbackWindow(c.admission.Deadline, workflow.Now(ctx).Sub(c.start), c.admission.FallbackReserve)
		in.Delay = min(prep.Delay, max(window-guard.MinAttemptTime, 0))
		in.Timeout, in.Grace = min(prep.Timeout, window-in.Delay), 0
		remaining = in.Delay + in.Timeout
	}
	return in, streamedFrom, remaining
}

// recoverLost gives an attempt lost with its worker (class worker_lost)
// the text it had streamed, so that its resend continues it.
func (c *call) recoverLost(ctx workflow.Context, class failure.Class, err error, out *activities.CallOutcome, streamedFrom int64) {
	if class != failure.WorkerLost || out.Published > 0 {
		return
	}
	if c.stream != nil && workflow.GetVersion(ctx, "lost-attempt-deltas", workflow.DefaultVersion, 1) == 1 {
		// A killed worker never reports what its attempt streamed; the
		// deltas it published are on this call's stream. Counted as
		// delivered, the resend continues after them instead of
		// starting the answer over for a reader who has them. Behind
		// the version: reading takes the batches waiting in the
		// stream's channel, which earlier builds did not do here.
		if text, n := c.streamedBy(streamedFrom, c.st.N); n > 0 {
			out.Content, out.Published = text, n
		}
	}
	if out.Published > 0 {
		return
	}
	// A live attempt (activities.Live) hands its followers only text its
	// heartbeats hold: the last one's text is what the caller may have,
	// and the resend continues it.
	if p, ok := liveText(err); ok && p.Attempt == c.st.N &&
		workflow.GetVersion(ctx, "live-lost-attempt", workflow.DefaultVersion, 1) == 1 {
		out.Content, out.Published = p.Text, max(p.Tokens, 1)
	}
}

// afterFailure decides and records the step after the failed attempt
// att of prep (DecideNext), and waits its wait; end: the call ends here,
// by the fallback (for reason), a finish, a failure (err) or a business
// rule.
func (c *call) afterFailure(ctx workflow.Context, prep activities.Prepared, att Attempt, class failure.Class, out activities.CallOutcome, note string) (reason string, end bool, err error) {
	var a *activities.Activities
	if out.Diagnosable && c.admission.Diagnose {
		// Only when a recorded CallModel says so: histories of
		// earlier builds have no such attempt and replay unchanged.
		var derr error
		if class, att.Diagnosis, derr = c.diagnose(ctx, class, out); derr != nil {
			return "", true, derr
		}
		out.Reason += "; " + att.Diagnosis
	}
	c.event(ctx, Event{Type: EventAttemptFailed, Attempt: c.st.N, Model: prep.Model, Class: string(class), Reason: out.Reason})
	var step callstate.Step
	err = workflow.ExecuteLocalActivity(localOptions(ctx, fmt.Sprintf("decide after %s on %s", class, prep.Model)),
		a.DecideNext, activities.DecideInput{State: c.st, Outcome: callstate.Outcome{
			Class: class, RetryAfter: out.RetryAfter, HasRetryAfter: out.HasRetryAfter,
			NotSent: out.NotSent, Elapsed: workflow.Now(ctx).Sub(c.start), Delivered: out.Published,
			ConnectResends: out.ConnectResends, Detail: cmp.Or(out.Detail, out.Reason), Partial: c.partialTokens(class, out),
			CallerLimit: c.req.MaxTokens > 0,
		}, Needs: c.req.Needs(), Scenario: c.req.Scenario, Stream: c.req.Stream}).Get(ctx, &step)
	if err != nil {
		return "", true, err
	}
	if out.Published > 0 {
		c.delivered += out.Content
	}
	c.keepBest(class, prep.Model, out)
	c.keepPartial(step, out)
	if note != "" {
		step.Reason += "; " + note
	}
	c.failed(ctx, att, class, out, step)
	if acted, err := c.rulesAfterFailure(ctx, step.Next); acted || err != nil {
		return "", true, err
	}
	switch step.Kind {
	case callstate.Fallback:
		return step.Reason, true, nil
	case callstate.Finish:
		c.finishDelivered(ctx, prep.Model, step.Reason)
		return "", true, nil
	case callstate.Fail:
		c.res.Reason = step.Reason
		c.finish(ctx, OutcomeFailed)
		return "", true, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s", out.Reason, step.Reason), string(class), nil, c.res)
	}
	c.st = step.Next
	return "", false, c.wait(ctx, class, step)
}

// streamedBy is the text attempt n published on the call's stream from
// offset from on, and in how many deltas.
func (c *call) streamedBy(from int64, n int) (string, int) {
	var b strings.Builder
	count := 0
	c.stream.Topic(TopicDelta).Each(from, func(_ int64, decode func(any) error) bool {
		var d activities.Delta
		if decode(&d) == nil && d.Attempt == n && d.Text != "" {
			b.WriteString(d.Text)
			count++
		}
		return true
	})
	return b.String(), count
}

// historyFull reports whether the call's history has grown past the
// history guard's limits (Admission.HistoryBytes, HistoryEvents): then the
// call falls back instead of making another attempt, which would record
// its prompt again, long before Temporal's limits fail the workflow.
// Histories of builds without the guard replay unchanged: the version
// marker is written only when the guard acts.
func (c *call) historyFull(ctx workflow.Context) (string, bool) {
	if c.admission.HistoryBytes <= 0 && c.admission.HistoryEvents <= 0 {
		return "", false
	}
	info := workflow.GetInfo(ctx)
	size, events := info.GetCurrentHistorySize(), info.GetCurrentHistoryLength()
	var reason string
	switch {
	case c.admission.HistoryBytes > 0 && size > c.admission.HistoryBytes:
		reason = fmt.Sprintf("history guard: the call's history is %d bytes, over call.max_history_bytes (%d): no more attempts", size, c.admission.HistoryBytes)
	case c.admission.HistoryEvents > 0 && events > c.admission.HistoryEvents:
		reason = fmt.Sprintf("history guard: the call's history has %d events, over call.max_history_events (%d): no more attempts", events, c.admission.HistoryEvents)
	default:
		return "", false
	}
	if workflow.GetVersion(ctx, "history-guard", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return "", false
	}
	return reason, true
}

// timeLeft is what the call has left for attempts now, the fallback's
// reserve kept (callstate.TimeLeft).
func (c *call) timeLeft(ctx workflow.Context) time.Duration {
	return callstate.TimeLeft(c.admission.Deadline, workflow.Now(ctx).Sub(c.start), c.admission.FallbackReserve)
}

// diagnose asks the diagnosis model to name the class of a failure no
// classifier rule recognised; a class it names replaces the status's. It
// returns the class and what the diagnosis said.
func (c *call) diagnose(ctx workflow.Context, class failure.Class, out activities.CallOutcome) (failure.Class, string, error) {
	var a *activities.Activities
	var d activities.Diagnosis
	left := c.timeLeft(ctx) - guard.MinAttemptTime
	if left < time.Second {
		return class, "no diagnosis: the deadline leaves no time for one", nil
	}
	dctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: min(40*time.Second, left),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             fmt.Sprintf("diagnose: %s names the class of an unrecognised HTTP %d", c.admission.DiagnoseModel, out.Status),
	})
	err := workflow.ExecuteActivity(dctx, a.Diagnose, activities.DiagnoseInput{
		Attempt: c.st.N, Class: class, Status: out.Status, Code: out.Code, Type: out.Type, Message: out.Message,
	}).Get(ctx, &d)
	switch {
	case err != nil && temporal.IsCanceledError(err):
		return class, "", err
	case err != nil:
		workflow.GetLogger(ctx).Warn("diagnosis failed", "error", err)
		return class, "no diagnosis: the diagnosis attempt failed", nil
	}
	// What tenants read names the model and the class only: the diagnosis
	// model's own words may quote the error body (docs/security.md); they are in the Diagnose activity's result.
	switch {
	case d.Class == "":
		return class, d.Reason, nil
	case d.Class == class:
		return class, fmt.Sprintf("%s agrees: %s", d.Model, d.Class), nil
	}
	return d.Class, fmt.Sprintf("diagnosed by %s as %s (not %s)", d.Model, d.Class, class), nil
}

// raceOptions are callOptions for one attempt of a hedged call: the
// attempt that loses is not waited for (it stops at its next heartbeat).
func (c *call) raceOptions(ctx workflow.Context, prep activities.Prepared, timeout time.Duration, summary string) workflow.Context {
	ctx = c.callOptions(ctx, prep, timeout, summary)
	o := workflow.GetActivityOptions(ctx)
	o.WaitForCancellation = false
	return workflow.WithActivityOptions(ctx, o)
}

// callOptions are the options of one upstream attempt bounded by timeout;
// summary, when set, replaces the attempt's own.
func (c *call) callOptions(ctx workflow.Context, prep activities.Prepared, timeout time.Duration, summary string) workflow.Context {
	n := c.st.Requests // this attempt's request, counted by PrepareAttempt
	if n == 0 {
		n = c.st.Upstream + 1 // prepared by an older build
	}
	if summary == "" {
		attempt := fmt.Sprintf("attempt %d/%d", n, c.admission.MaxAttempts)
		if c.st.Refused > 0 {
			// Refusals (backpressure) are no attempts against the cap.
			attempt = fmt.Sprintf("attempt %d/%d (request %d)", c.st.Attempts(), c.admission.MaxAttempts, n)
		}
		summary = fmt.Sprintf("%s · %s · %d→%d msgs", attempt, prep.Model, prep.Prompt.Before, prep.Prompt.Messages)
		if prep.Key != "" {
			summary += " · key " + prep.Key
		}
		if c.st.From.Resend {
			summary += " · resend"
		}
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** (%s timeout)\n\nattempts so far: %d", summary, callstate.FormatDuration(timeout), len(c.res.Attempts)))
	// The attempt bounds itself by timeout; the slack lets a lost worker
	// be noticed by its heartbeat (worker_lost) rather than by this
	// timeout, and ScheduleToClose bounds the time in the queue too.
	startToClose := timeout + c.admission.HeartbeatTimeout + time.Second
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: startToClose + 5*time.Second,
		StartToCloseTimeout:    startToClose,
		HeartbeatTimeout:       c.admission.HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                summary,
	})
}

// skipped records the models the ladder skipped, each with the guard's
// rule that skipped it.
func (c *call) skipped(models []activities.SkippedModel) {
	for _, s := range models {
		rule := s.Guard
		if rule == "" {
			rule = guard.RuleBreaker // recorded before rules were named
		}
		c.guards = append(c.guards, string(rule))
		class, decision := "", "skip" // not a failure of the model
		if rule == guard.RuleBreaker {
			class, decision = string(failure.BreakerOpen), callstate.Switch.String()
		}
		c.res.Attempts = append(c.res.Attempts, Attempt{
			N: c.st.N, Model: s.Model, Class: class, Rule: string(rule),
			Decision: decision, Reason: s.Reason, RetriedFrom: c.st.From.String(),
		})
	}
}

// failed records a failed attempt and the decision that followed it.
func (c *call) failed(ctx workflow.Context, att Attempt, class failure.Class, out activities.CallOutcome, step callstate.Step) {
	att.Class = string(class)
	att.Decision, att.Reason, att.DelayMS = step.Decision, step.Reason, step.Wait.Delay.Milliseconds()
	if step.Rule != "" {
		att.Rule = string(step.Rule)
	}
	switch {
	case out.Published > 0:
		// The text it streamed is part of the answer the caller gets.
		c.res.Usage.CompletionTokens += out.CompletionTokens
		c.res.Usage.FailedAttemptTokens += att.PromptTokens
		c.tokens(ctx, "completion", att.Model, out.CompletionTokens)
		c.tokens(ctx, "failed", att.Model, att.PromptTokens)
	case !out.NotSent:
		c.res.Usage.FailedAttemptTokens += att.PromptTokens + out.CompletionTokens
		c.tokens(ctx, "failed", att.Model, att.PromptTokens+out.CompletionTokens)
	}
	c.res.Attempts = append(c.res.Attempts, att)
	c.st.Classes = step.Next.Classes
	c.upsert(ctx, SAAttempts.ValueSet(int64(len(c.res.Attempts))), SAClasses.ValueSet(c.classes()))
}

// hold waits out the rate-limit hold or the pacing of the attempt's model,
// on a timer that names the scope and the reason.
func (c *call) hold(ctx workflow.Context, prep activities.Prepared) error {
	d := callstate.FormatDuration(prep.Hold)
	why := prep.HoldReason
	if why == "" {
		why = "rate-limit hold on " + prep.HoldScope
	}
	reason := fmt.Sprintf("%s: wait %s, then %s", why, d, prep.Model)
	if prep.Rule != "" {
		reason = fmt.Sprintf("[%s] %s", prep.Rule, reason)
	}
	workflow.SetCurrentDetails(ctx, "waiting "+d+": "+reason)
	c.event(ctx, Event{Type: EventWaiting, Reason: reason, DelayMS: prep.Hold.Milliseconds()})
	return workflow.NewTimerWithOptions(ctx, prep.Hold, workflow.TimerOptions{Summary: reason}).Get(ctx, nil)
}

// wait sleeps the step's wait on a timer whose summary says why.
func (c *call) wait(ctx workflow.Context, class failure.Class, step callstate.Step) error {
	w := step.Wait
	if w.Delay <= 0 {
		return nil
	}
	d := callstate.FormatDuration(w.Delay)
	var summary string
	switch {
	case w.Reason == callstate.RetryAfter:
		summary = fmt.Sprintf("Retry-After %s after %s", d, class)
	case step.Kind == callstate.Switch:
		summary = fmt.Sprintf("wait %s after %s, then %s", d, class, step.Next.Model)
	case w.Reason == callstate.Backoff:
		summary = fmt.Sprintf("backoff %s after %s", d, class)
	case w.Reason == callstate.HoldWait:
		summary = fmt.Sprintf("hold %s after %s, then resend", d, class)
	default:
		summary = fmt.Sprintf("wait %s after %s", d, class)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("waiting %s: %s", d, step.Reason))
	c.event(ctx, Event{Type: EventWaiting, Reason: step.Reason, DelayMS: w.Delay.Milliseconds()})
	return workflow.NewTimerWithOptions(ctx, w.Delay, workflow.TimerOptions{Summary: summary}).Get(ctx, nil)
}

// liveText is the last heartbeat of a live attempt lost with its worker,
// when it held text.
func liveText(err error) (activities.Progress, bool) {
	var toErr *temporal.TimeoutError
	var p activities.Progress
	if !errors.As(err, &toErr) || !toErr.HasLastHeartbeatDetails() || toErr.LastHeartbeatDetails(&p) != nil {
		return p, false
	}
	return p, p.Live && p.Text != ""
}

// classOf maps an attempt's error to its failure class and fills out from
// the error's details when the activity reported them.
func classOf(err error, out *activities.CallOutcome) failure.Class {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if appErr.HasDetails() {
			_ = appErr.Details(out)
		}
		if c := failure.Class(appErr.Type()); c.Valid() {
			return c
		}
		return failure.ServerError
	}
	var toErr *temporal.TimeoutError
	if errors.As(err, &toErr) {
		if toErr.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
			return failure.WorkerLost
		}
		return failure.Timeout
	}
	return failure.ServerError
}

// classes are the failure classes seen, for the LlmClasses attribute.
func (c *call) classes() []string {
	out := make([]string, len(c.st.Classes))
	for i, k := range c.st.Classes {
		out[i] = string(k)
	}
	return out
}

// finishDelivered ends the call with the text already streamed to the
// caller, when no model can continue it.
func (c *call) finishDelivered(ctx workflow.Context, model, reason string) {
	c.res.Content, c.res.Model, c.res.FinishReason = c.delivered, model, ""
	c.res.Source, c.res.Degraded, c.res.Reason = SourceModel, true, reason
	if model != c.admission.FirstModel {
		c.res.Source = SourceFallbackModel
	}
	c.finish(ctx, OutcomeDegraded)
}

// answered records a model's answer; note says how the attempt's prompt
// was refined or adapted ("" for nothing), in its reason and the call's.
func (c *call) answered(ctx workflow.Context, att Attempt, out activities.CallOutcome, note string) {
	var a *activities.Activities
	att.Decision, att.Reason = "answer", "the model answered"
	if note != "" {
		att.Reason += "; " + note
	}
	c.res.Attempts = append(c.res.Attempts, att)
	content := c.delivered + joinContinuation(c.refined.partial, out.Content)
	if out.Published > 0 || c.res.Replaced != nil {
		// Streamed, or sent whole in the replaced event.
		c.delivered = content
	}
	c.res.Content, c.res.Model, c.res.FinishReason = content, att.Model, out.FinishReason
	c.res.ToolCalls, c.res.Logprobs = out.ToolCalls, out.Logprobs
	// A replacing answer's own batches never joined the stream: finish
	// publishes its tool calls.
	c.toolCallsPublished = out.Published > 0 && c.res.Replaced == nil
	c.res.Usage.PromptTokens += out.PromptTokens
	c.res.Usage.CompletionTokens += out.CompletionTokens
	c.tokens(ctx, "prompt", att.Model, out.PromptTokens)
	c.tokens(ctx, "completion", att.Model, out.CompletionTokens)
	c.res.Source = SourceModel
	if att.Model != c.admission.FirstModel {
		c.res.Source, c.res.Degraded = SourceFallbackModel, true
		c.res.Reason = "answered by " + att.Model + " after " + c.admission.FirstModel + " failed"
		if att.Hedge {
			c.res.Reason = "answered by " + att.Model + ", the hedge of " + c.admission.FirstModel + ", which had no first token in time"
		}
	}
	if note != "" {
		c.res.Reason = strings.TrimPrefix(c.res.Reason+"; "+note, "; ")
	}
	if c.st.Pending != failure.None {
		// Tell the class breaker that the retry of that class worked.
		_ = workflow.ExecuteLocalActivity(localOptions(ctx, "retry of "+string(c.st.Pending)+" succeeded"),
			a.RecordRetrySuccess, c.st.Pending).Get(ctx, nil)
	}
	outcome := OutcomeAnswered
	// A fallback model's answer is degraded: LlmOutcome says so, as
	// LlmDegraded does (calls that began before this build keep "answered").
	if c.res.Degraded && workflow.GetVersion(ctx, "degraded-outcome", workflow.DefaultVersion, 1) == 1 {
		outcome = OutcomeDegraded
	}
	c.finish(ctx, outcome)
}

// fallback answers from the business fallback; a request only a model can
// answer (Structured) fails with ErrFallbackUnavailable instead.
func (c *call) fallback(ctx workflow.Context, reason string) (CallResult, error) {
	var a *activities.Activities
	if c.req.Structured() && workflow.GetVersion(ctx, "structured-fallback", workflow.DefaultVersion, 1) == 1 {
		// Versioned: a run started by an older build (which ignored these
		// request fields) keeps answering from the FAQ when it replays.
		need := "a JSON object"
		if c.req.Schema() != nil {
			need = "a JSON answer matching its schema"
		}
		if c.req.RequiresToolCall() {
			need = "a tool call (tool_choice " + c.req.ToolChoice.String() + ")"
		}
		c.res.Reason = fmt.Sprintf("no model answered (%s) and the request needs %s, which the FAQ cannot give", reason, need)
		c.finish(ctx, OutcomeFailed)
		return c.res, temporal.NewApplicationErrorWithOptions(c.res.Reason, ErrFallbackUnavailable,
			temporal.ApplicationErrorOptions{Details: []any{c.res}})
	}
	if c.best.text != "" && c.delivered == "" && workflow.GetVersion(ctx, "best-model-text", workflow.DefaultVersion, 1) == 1 {
		// Versioned: a run of an older build that went to the FAQ here
		// keeps doing so when it replays.
		c.answerBest(ctx, reason)
		return c.res, nil
	}
	workflow.SetCurrentDetails(ctx, "business fallback: "+reason)
	var ans activities.FallbackAnswer
	err := workflow.ExecuteLocalActivity(localOptions(ctx, "fallback: cache → FAQ → rule card → placeholder"),
		a.Fallback, activities.FallbackInput{Request: c.req, Reason: reason, Classes: c.st.Classes, Guards: c.guards}).Get(ctx, &ans)
	if err != nil {
		return c.res, err
	}
	c.res.Content, c.res.Source, c.res.Degraded = ans.Content, Source(ans.Source), true
	c.res.Model, c.res.FinishReason = ans.Model, ""
	if ans.Source == string(SourceCache) {
		c.res.CacheAgeMS = ans.AgeMS
		reason = fmt.Sprintf("%s; answered from the cache: %s's answer of %s ago", reason, ans.Model, callstate.FormatDuration(time.Duration(ans.AgeMS)*time.Millisecond))
	}
	c.res.FAQID = ans.FAQID
	if ans.RuleID != "" {
		c.res.RuleID, c.res.Flag = ans.RuleID, ans.Flag
	}
	c.res.Reason = reason
	c.finish(ctx, OutcomeDegraded)
	return c.res, nil
}

// finish upserts the final search attributes and counts the call; a
// streamed call publishes what its subscribers have not seen of the
// answer (a fallback's, a rule's, or a model's whose stream failed) and
// its done event.
func (c *call) finish(ctx workflow.Context, outcome string) {
	if c.stream != nil {
		if rest, ok := strings.CutPrefix(c.res.Content, c.delivered); ok && rest != "" {
			if err := c.stream.Topic(TopicDelta).Publish(Delta{Model: c.res.Model, Text: rest}); err == nil {
				c.delivered = c.res.Content
			}
		}
		if len(c.res.ToolCalls) > 0 && !c.toolCallsPublished {
			if err := c.stream.Topic(TopicDelta).Publish(Delta{Model: c.res.Model, ToolCalls: c.res.ToolCalls}); err == nil {
				c.toolCallsPublished = true
			}
		}
		if outcome == OutcomeFailed || outcome == OutcomeCanceled {
			c.event(ctx, Event{Type: EventFailed, Reason: c.res.Reason})
		} else {
			usage, res := c.res.Usage, c.res
			res.Content = ""
			c.event(ctx, Event{Type: EventDone, Source: c.res.Source, Degraded: c.res.Degraded, Reason: c.res.Reason, Usage: &usage, Result: &res, Bytes: len(c.res.Content)})
		}
	}
	updates := []temporal.SearchAttributeUpdate{
		SAOutcome.ValueSet(outcome),
		SASource.ValueSet(string(c.res.Source)),
		SAModel.ValueSet(c.res.Model),
		SAAttempts.ValueSet(int64(len(c.res.Attempts))),
		SAClasses.ValueSet(c.classes()),
		SADegraded.ValueSet(c.res.Degraded),
	}
	if c.res.Flag != "" {
		// In the same upsert: histories written before the flag replay.
		updates = append(updates, SAFlag.ValueSet(keyword(c.res.Flag)))
	}
	c.upsert(ctx, updates...)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%s · source %s · %d attempt(s)", outcome, c.res.Source, len(c.res.Attempts)))
	c.finished = true
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"outcome": outcome, "source": string(c.res.Source),
	}).Counter("llm_calls").Inc(1)
}

// spent notes what an attempt's request cost: when the upstream generated
// for it (billed) and the same request was billed before (by this call, or
// within the hour on the worker that sent it), its prompt tokens are
// duplicate spend. A lost attempt counts as sent: its resend repeats it.
func (c *call) spent(ctx workflow.Context, prep activities.Prepared, class failure.Class, out activities.CallOutcome, promptTokens int) {
	fp := prep.Fingerprint
	if fp == "" {
		return // prepared by an earlier build
	}
	if out.Billed && (out.SentBefore || slices.Contains(c.sent, fp)) {
		c.res.Usage.DuplicatePromptTokens += promptTokens
		c.tokens(ctx, "duplicate", prep.Model, promptTokens)
	}
	if out.Billed || class == failure.WorkerLost {
		c.sent = append(c.sent, fp)
	}
}

// tokens counts n tokens of kind (prompt, completion, failed, duplicate)
// spent on model for the call's tenant: llm_tokens_total, which the SDK
// does not count again on replay.
func (c *call) tokens(ctx workflow.Context, kind, model string, n int) {
	if n <= 0 {
		return
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"kind": kind, "tenant": keyword(c.req.Tenant), "model": model,
	}).Counter("llm_tokens").Inc(int64(n))
}

func (c *call) upsert(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("search attributes not upserted", "error", err)
	}
}

// maxKeyword bounds a keyword search attribute value (Temporal refuses
// values over 2 KB, which would fail the workflow task).
const maxKeyword = 256

// keyword truncates s to a valid keyword search attribute value.
func keyword(s string) string {
	if len(s) <= maxKeyword {
		return s
	}
	cut := maxKeyword
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
