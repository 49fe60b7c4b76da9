package workflows

import (
	"errors"
	"fmt"
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
)

// QueryState is the query that returns the CallResult so far.
const QueryState = "state"

// minAttemptTime is the least time worth giving an upstream attempt.
const minAttemptTime = time.Second

// LLMCall runs one LLM call to an answer: a model's, else the business
// fallback's. It fails only for a request that must change (invalid
// request, content the upstream refuses to process) or when cancelled.
func LLMCall(ctx workflow.Context, req CallRequest) (CallResult, error) {
	c := newCall(ctx, req)
	workflow.SetQueryHandler(ctx, QueryState, func() (CallResult, error) { return c.res, nil })
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
	return res, err
}

// call is the state of one LLMCall.
type call struct {
	req   CallRequest
	start time.Time
	res   CallResult
	ad    activities.Admission

	model       string
	tried       []string
	pruneStage  int
	keepRounds  int
	maxTokens   int
	temperature *float64
	upstream    int // upstream attempts made (lost-worker resends excluded)
	retries     int // backoff retries made: the exponent of the jitter
	resends     int
	classRetry  map[failure.Class]int
	onModel     map[string]int // failures by model+class
	retried     bool           // some attempt was a retry of the same model
	// pending is the class whose retry the next attempt is: its outcome
	// tells the class breaker whether retries of that class work.
	pending  failure.Class
	classes  []string
	finished bool
}

func newCall(ctx workflow.Context, req CallRequest) *call {
	return &call{
		req:        req,
		start:      workflow.GetInfo(ctx).WorkflowStartTime,
		res:        CallResult{RequestID: workflow.GetInfo(ctx).WorkflowExecution.ID, Attempts: []Attempt{}},
		maxTokens:  req.MaxTokens,
		classRetry: map[failure.Class]int{},
		onModel:    map[string]int{},
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
	c.temperature = c.req.Temperature
	c.upsert(ctx, SAOutcome.ValueSet(OutcomeRunning), SAScenario.ValueSet(keyword(c.req.Scenario)))
	workflow.SetCurrentDetails(ctx, "admitting: validate the request, check business rules")

	err := workflow.ExecuteLocalActivity(localOptions(ctx, "admit: validate, business rules, count in budget"),
		a.Admit, c.req).Get(ctx, &c.ad)
	if err != nil {
		if !temporal.IsCanceledError(err) {
			c.res.Reason = err.Error()
			c.finish(ctx, OutcomeFailed)
		}
		return c.res, err
	}
	if r := c.ad.Rule; r != nil {
		c.res.RuleID, c.res.Flag = r.ID, r.Flag
		switch r.Action {
		case config.RuleHandoff:
			c.res.Content, c.res.Source = r.Message, SourceHandoff
			c.res.Reason = "business rule " + r.ID + ": hand-off to a human, no model call"
			c.finish(ctx, OutcomeHandoff)
			return c.res, nil
		case config.RuleSafeMessage:
			c.res.Content, c.res.Source, c.res.Degraded = r.Message, SourceRule, true
			c.res.Reason = "business rule " + r.ID + ": safe message, no model call"
			c.finish(ctx, OutcomeDegraded)
			return c.res, nil
		}
	}
	c.model = c.ad.FirstModel
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
// the plan falls back (the reason is returned) or fails (an error).
func (c *call) attempts(ctx workflow.Context) (string, error) {
	var a *activities.Activities
	n := 1
	retriedFrom := ""
	for {
		remaining := c.ad.Deadline - workflow.Now(ctx).Sub(c.start) - c.ad.FallbackReserve
		if remaining < minAttemptTime {
			return fmt.Sprintf("deadline: %s left, %s kept for the fallback", callstate.FormatDuration(remaining+c.ad.FallbackReserve), callstate.FormatDuration(c.ad.FallbackReserve)), nil
		}
		var plan activities.AttemptPlan
		err := workflow.ExecuteLocalActivity(localOptions(ctx, fmt.Sprintf("prepare attempt %d: model, pruning", n)),
			a.PrepareAttempt, activities.PrepareInput{
				Request: c.req, Model: c.model, Tried: c.tried,
				PruneStage: c.pruneStage, KeepRounds: c.keepRounds, MaxTokens: c.maxTokens,
			}).Get(ctx, &plan)
		if err != nil {
			return "", err
		}
		for _, s := range plan.Skipped {
			c.tried = append(c.tried, s.Model)
			c.addClass(failure.ClassBreakerOpen)
			c.res.Attempts = append(c.res.Attempts, Attempt{
				N: n, Model: s.Model, Class: string(failure.ClassBreakerOpen),
				Decision: "switch_model", Reason: s.Reason, RetriedFrom: retriedFrom,
			})
		}
		if plan.Model == "" {
			return plan.Reason, nil
		}
		c.model = plan.Model
		timeout := min(plan.Timeout, remaining)

		summary := fmt.Sprintf("attempt %d/%d · %s · %d→%d msgs", c.upstream+1, c.ad.MaxAttempts, c.model, plan.MessagesBefore, plan.Messages)
		if strings.HasSuffix(retriedFrom, "("+string(failure.ClassWorkerLost)+")") {
			summary += " · resend"
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** (%s timeout)\n\nattempts so far: %d", summary, callstate.FormatDuration(timeout), len(c.res.Attempts)))
		// The attempt bounds itself by timeout; the slack lets a lost worker
		// be noticed by its heartbeat (worker_lost) rather than by this
		// timeout, and ScheduleToClose bounds the time in the queue too.
		startToClose := timeout + c.ad.HeartbeatTimeout + time.Second
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ScheduleToCloseTimeout: startToClose + 5*time.Second,
			StartToCloseTimeout:    startToClose,
			HeartbeatTimeout:       c.ad.HeartbeatTimeout,
			WaitForCancellation:    true,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
			Summary:                summary,
		})
		started := workflow.Now(ctx)
		var out activities.CallOutcome
		err = workflow.ExecuteActivity(actx, a.CallModel, activities.CallInput{
			Request: c.req, Model: c.model, Attempt: n,
			PruneStage: c.pruneStage, KeepRounds: c.keepRounds,
			MaxTokens: c.maxTokens, Temperature: c.temperature, Timeout: timeout,
		}).Get(ctx, &out)
		if err != nil && temporal.IsCanceledError(err) {
			return "", err
		}
		class := failure.ClassNone
		if err != nil {
			class = classOf(err, &out)
		}
		att := Attempt{
			N: n, Model: c.model, Class: string(class), Status: out.Status,
			Messages: plan.Messages, PromptTokens: plan.PromptTokens,
			DurationMS: workflow.Now(ctx).Sub(started).Milliseconds(), RetriedFrom: retriedFrom,
		}
		if out.Messages > 0 {
			att.Messages, att.PromptTokens = out.Messages, out.PromptTokens
		}
		if err == nil {
			c.upstream++
			c.answered(ctx, att, out)
			return "", nil
		}
		retriedClass := c.pending
		if class == failure.ClassWorkerLost {
			retriedClass = failure.ClassNone // the resend is still that retry
		} else {
			c.pending = failure.ClassNone
		}
		c.addClass(class)
		if !out.NotSent {
			c.res.Usage.FailedAttemptTokens += att.PromptTokens + out.CompletionTokens
		}
		if class != failure.ClassWorkerLost && !out.NotSent {
			c.upstream++
		}
		c.onModel[c.model+"/"+string(class)]++

		var step callstate.Step
		err = workflow.ExecuteLocalActivity(localOptions(ctx, fmt.Sprintf("plan after %s on %s", class, c.model)),
			a.PlanNext, activities.PlanNextInput{
				Preferred: c.req.Model, Tried: c.tried, RetriedClass: retriedClass,
				Plan: callstate.PlanInput{
					Class: class, RetryAfter: out.RetryAfter, HasRetryAfter: out.HasRetryAfter,
					Attempts: c.upstream, ClassRetries: c.classRetry[class],
					ClassFailuresOnModel: c.onModel[c.model+"/"+string(class)],
					Retries:              c.retries, Model: c.model,
					PruneStage: c.pruneStage, KeepRounds: c.keepRounds,
					MaxTokens: c.maxTokens, Temperature: c.temperature,
					Elapsed: workflow.Now(ctx).Sub(c.start), Deadline: c.ad.Deadline,
					MinAttemptTime: minAttemptTime,
					NoRetry:        c.ad.Rule != nil && c.ad.Rule.Action == config.RuleNoRetry,
				},
			}).Get(ctx, &step)
		if err != nil {
			return "", err
		}
		att.Decision, att.Reason, att.DelayMS = step.Decision, step.Reason, step.Delay.Milliseconds()
		c.res.Attempts = append(c.res.Attempts, att)
		c.upsert(ctx, SAAttempts.ValueSet(int64(len(c.res.Attempts))), SAClasses.ValueSet(c.classes))

		switch step.Kind {
		case callstate.StepFallback:
			return step.Reason, nil
		case callstate.StepFail:
			c.res.Reason = step.Reason
			c.finish(ctx, OutcomeFailed)
			return "", temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s: %s", out.Reason, step.Reason), string(class), nil, c.res)
		case callstate.StepResend:
			c.resends++
			c.classRetry[class]++
			retriedFrom = fmt.Sprintf("%d (%s)", n, class)
		case callstate.StepRetry:
			c.classRetry[class]++
			c.retried = true
			c.pending = class
			if step.Delay > 0 && step.Decision != "wait retry-after" {
				c.retries++
			}
			c.pruneStage, c.keepRounds = step.PruneStage, step.KeepRounds
			c.maxTokens, c.temperature = step.MaxTokens, step.Temperature
			retriedFrom = fmt.Sprintf("%d (%s)", n, class)
			n++
		case callstate.StepSwitch:
			c.tried = append(c.tried, c.model)
			c.model = step.Model
			retriedFrom = fmt.Sprintf("%d (%s)", n, class)
			n++
		}
		if step.Delay > 0 {
			wait := callstate.FormatDuration(step.Delay)
			summary := fmt.Sprintf("backoff %s after %s", wait, class)
			switch {
			case step.Decision == "wait retry-after":
				summary = fmt.Sprintf("Retry-After %s after %s", wait, class)
			case step.Kind == callstate.StepSwitch:
				summary = fmt.Sprintf("wait %s after %s, then %s", wait, class, step.Model)
			}
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("waiting %s: %s", wait, step.Reason))
			err := workflow.NewTimerWithOptions(ctx, step.Delay, workflow.TimerOptions{Summary: summary}).Get(ctx, nil)
			if err != nil {
				return "", err
			}
		}
	}
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
		return failure.ClassServerError
	}
	var toErr *temporal.TimeoutError
	if errors.As(err, &toErr) {
		if toErr.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
			return failure.ClassWorkerLost
		}
		return failure.ClassTimeout
	}
	return failure.ClassServerError
}

func (c *call) addClass(class failure.Class) {
	for _, k := range c.classes {
		if k == string(class) {
			return
		}
	}
	c.classes = append(c.classes, string(class))
}

// answered records a model's answer.
func (c *call) answered(ctx workflow.Context, att Attempt, out activities.CallOutcome) {
	var a *activities.Activities
	att.Decision, att.Reason = "answer", "the model answered"
	c.res.Attempts = append(c.res.Attempts, att)
	c.res.Content, c.res.Model, c.res.FinishReason = out.Content, c.model, out.FinishReason
	c.res.Usage.PromptTokens += out.PromptTokens
	c.res.Usage.CompletionTokens += out.CompletionTokens
	c.res.Source = SourceModel
	if c.model != c.ad.FirstModel {
		c.res.Source, c.res.Degraded = SourceFallbackModel, true
		c.res.Reason = "answered by " + c.model + " after " + c.ad.FirstModel + " failed"
	}
	if c.retried {
		// Tell the class breaker that the retry of the previous class worked
		// (nothing when the last step was a switch, not a retry).
		var worked []failure.Class
		if c.pending != failure.ClassNone {
			worked = []failure.Class{c.pending}
		}
		_ = workflow.ExecuteLocalActivity(localOptions(ctx, "retries succeeded"), a.RecordRetrySuccess, worked).Get(ctx, nil)
	}
	c.finish(ctx, OutcomeAnswered)
}

// fallback answers from the business fallback.
func (c *call) fallback(ctx workflow.Context, reason string) (CallResult, error) {
	var a *activities.Activities
	workflow.SetCurrentDetails(ctx, "business fallback: "+reason)
	var ans activities.FallbackAnswer
	err := workflow.ExecuteLocalActivity(localOptions(ctx, "fallback: FAQ → rule card → placeholder"),
		a.Fallback, activities.FallbackInput{Request: c.req, Reason: reason}).Get(ctx, &ans)
	if err != nil {
		return c.res, err
	}
	c.res.Content, c.res.Source, c.res.Degraded = ans.Content, Source(ans.Source), true
	c.res.Model, c.res.FinishReason = "", ""
	c.res.FAQID = ans.FAQID
	if ans.RuleID != "" {
		c.res.RuleID, c.res.Flag = ans.RuleID, ans.Flag
	}
	c.res.Reason = reason
	c.finish(ctx, OutcomeDegraded)
	return c.res, nil
}

// finish upserts the final search attributes and counts the call.
func (c *call) finish(ctx workflow.Context, outcome string) {
	c.upsert(ctx,
		SAOutcome.ValueSet(outcome),
		SASource.ValueSet(string(c.res.Source)),
		SAModel.ValueSet(c.res.Model),
		SAAttempts.ValueSet(int64(len(c.res.Attempts))),
		SAClasses.ValueSet(c.classes),
		SADegraded.ValueSet(c.res.Degraded),
	)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%s · source %s · %d attempt(s)", outcome, c.res.Source, len(c.res.Attempts)))
	c.finished = true
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"outcome": outcome, "source": string(c.res.Source),
	}).Counter("llm_calls").Inc(1)
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
