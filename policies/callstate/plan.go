package callstate

import (
	"fmt"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"time"
)

// StepKind is what a call does after a failed attempt.
type StepKind string

// The steps a plan can take.
const (
	// StepRetry sends another attempt to the same model after Delay.
	StepRetry StepKind = "retry"
	// StepResend sends the same attempt again at once (worker lost); it is
	// not charged to the retry budget nor to the attempts cap.
	StepResend StepKind = "resend"
	// StepSwitch sends the next attempt to Step.Model after Delay.
	StepSwitch StepKind = "switch_model"
	// StepFallback stops calling models and answers from the business
	// fallback (FAQ → rule card → placeholder).
	StepFallback StepKind = "fallback"
	// StepFail ends the call with a clear, non-retryable error.
	StepFail StepKind = "fail"
)

// PlanInput is everything the planner needs to decide the next step after
// a failed attempt. It is plain data: the caller (an activity) gathers the
// verdicts of the stateful pieces (breakers, class breaker) and passes a
// budget callback that is only asked when the step would retry.
type PlanInput struct {
	// Class of the failed attempt and the upstream's Retry-After, if any.
	Class         failure.Class
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Attempts is how many upstream attempts the call has made, this one
	// included; resends of a lost worker do not count.
	Attempts int
	// ClassRetries is how many times this class was already retried in
	// this call (before this failure).
	ClassRetries int
	// ClassFailuresOnModel is how many attempts on the current model failed
	// with this class, this one included.
	ClassFailuresOnModel int
	// Retries is how many backoff retries the call has made so far (it is
	// the exponent n of the full-jitter backoff).
	Retries int
	// Model is the model of the failed attempt; NextModel the next one the
	// ladder offers (breakers considered), empty when none is left.
	Model     string
	NextModel string
	// PruneStage and KeepRounds of the failed attempt: pruning never grows
	// back between attempts.
	PruneStage int
	KeepRounds int
	// MaxTokens and Temperature of the failed attempt (0/nil: upstream default).
	MaxTokens   int
	Temperature *float64
	// Elapsed since the call started and its Deadline; the plan keeps
	// Config.Call.FallbackReserve free at the end for the fallback.
	Elapsed  time.Duration
	Deadline time.Duration
	// MinAttemptTime is the least time an attempt needs to be worth sending
	// (default 1 s).
	MinAttemptTime time.Duration
	// ClassAllowed is the class breaker's verdict: false when retries of
	// this class fail too often across the process.
	ClassAllowed bool
	// NoRetry is set when a business rule forbids retries for this call.
	NoRetry bool
	// U is a uniform random number in [0,1) for the jitter.
	U float64
}

// Step is the planner's decision.
type Step struct {
	Kind StepKind
	// Delay before the next attempt (a workflow timer).
	Delay time.Duration
	// Model of the next attempt (the same model for retries).
	Model string
	// PruneStage of the next attempt; KeepRounds > 0 prunes to that many
	// rounds instead (context_length_exceeded).
	PruneStage int
	KeepRounds int
	// MaxTokens and Temperature of the next attempt.
	MaxTokens   int
	Temperature *float64
	// Decision is a short label for history and tables ("prune+retry",
	// "wait retry-after", "switch_model", "fallback", "fail").
	Decision string
	// Reason is one line saying why.
	Reason string
	// ChargeBudget is true when the step consumed a retry from the budget;
	// BudgetRefused when the budget refused the retry the class wanted.
	ChargeBudget  bool
	BudgetRefused bool
}

// Budget is the part of the retry budget the planner needs: TryRetry is
// asked only when the plan would retry the same model, and records the
// retry when it allows it.
type Budget interface {
	TryRetry(now time.Time) bool
}

// Plan decides the next step after a failed attempt (README "How it works" step 5): the
// class's action, vetoed in this order by a business rule, the attempts
// cap, the class's own limit, the class breaker, the retry budget and the
// remaining deadline. budget may be nil (no budget). now is passed to the
// budget.
func Plan(cfg *config.Config, in PlanInput, budget Budget, now time.Time) Step {
	cp := cfg.ClassPolicy(in.Class)
	p := planner{cfg: cfg, in: in, cp: cp}
	if in.MinAttemptTime <= 0 {
		p.in.MinAttemptTime = time.Second
	}

	switch cp.Action {
	case config.ActionFail:
		return p.fail(fmt.Sprintf("%s is not retryable: the request must change", in.Class))
	case config.ActionFallback:
		return p.fallback(fmt.Sprintf("%s: no retry, business fallback", in.Class))
	}
	if in.NoRetry {
		return p.fallback("a business rule forbids retries for this call")
	}
	if cp.Action == config.ActionResend {
		if cp.Max >= 0 && in.ClassRetries >= cp.Max {
			return p.switchOrFallback(fmt.Sprintf("%s resent %d time(s) already", in.Class, in.ClassRetries))
		}
		s := p.step(StepResend, 0, in.Model, "resend")
		s.Reason = fmt.Sprintf("%s: resend the same attempt (%d/%d), not charged to the budget", in.Class, in.ClassRetries+1, cp.Max)
		return s
	}
	maxAttempts := cfg.Call.MaxAttempts
	if in.Attempts >= maxAttempts {
		return p.fallback(fmt.Sprintf("attempts cap reached (%d/%d)", in.Attempts, maxAttempts))
	}
	if cp.Action == config.ActionSwitchModel {
		return p.switchTo(Fixed(cp.Waits, in.ClassFailuresOnModel-1), fmt.Sprintf("%s on %s", in.Class, in.Model))
	}
	if cp.Max >= 0 && in.ClassRetries >= cp.Max {
		return p.switchOrFallback(fmt.Sprintf("%s retried %d time(s) already (max %d)", in.Class, in.ClassRetries, cp.Max))
	}
	if cp.SwitchAfter > 0 && in.ClassFailuresOnModel >= cp.SwitchAfter && in.NextModel != "" {
		return p.switchTo(0, fmt.Sprintf("%s %d time(s) on %s", in.Class, in.ClassFailuresOnModel, in.Model))
	}
	if !in.ClassAllowed {
		return p.fallback(fmt.Sprintf("class breaker: retries of %s fail too often across the process", in.Class))
	}

	var s Step
	switch cp.Action {
	case config.ActionRetry:
		d := p.jitter()
		s = p.step(StepRetry, d, in.Model, "retry")
		s.Reason = fmt.Sprintf("%s: retry %s after full-jitter backoff %s", in.Class, in.Model, fmtDur(d))
	case config.ActionPruneRetry:
		d := p.jitter()
		s = p.step(StepRetry, d, in.Model, "prune+retry")
		s.PruneStage = in.PruneStage + 1
		s.Reason = fmt.Sprintf("%s: prune to stage %d, retry after %s", in.Class, s.PruneStage, fmtDur(d))
	case config.ActionPruneResend:
		keep := cp.KeepRounds
		if in.KeepRounds > 0 && in.KeepRounds < keep {
			keep = in.KeepRounds
		}
		s = p.step(StepRetry, 0, in.Model, "prune+resend")
		s.KeepRounds = keep
		s.Reason = fmt.Sprintf("%s: keep the last %d rounds + the question, resend at once", in.Class, keep)
	case config.ActionRetryAfter:
		if !in.HasRetryAfter {
			d := p.jitter()
			s = p.step(StepRetry, d, in.Model, "retry")
			s.Reason = fmt.Sprintf("%s without Retry-After: full-jitter backoff %s", in.Class, fmtDur(d))
			break
		}
		d, ok := HonourRetryAfter(in.RetryAfter, cfg.Backoff.RetryAfterCap.D())
		if !ok {
			return p.switchOrFallback(fmt.Sprintf("Retry-After %s is beyond the %s cap", fmtDur(in.RetryAfter), fmtDur(cfg.Backoff.RetryAfterCap.D())))
		}
		if !p.fits(d) {
			return p.switchOrFallback(fmt.Sprintf("Retry-After %s does not fit the deadline", fmtDur(d)))
		}
		s = p.step(StepRetry, d, in.Model, "wait retry-after")
		s.Reason = fmt.Sprintf("%s: wait Retry-After %s exactly", in.Class, fmtDur(d))
	case config.ActionBumpTokens:
		d := Fixed(cp.Waits, in.ClassRetries)
		s = p.step(StepRetry, d, in.Model, "more tokens+retry")
		base := in.MaxTokens
		if base <= 0 {
			base = cfg.Pruning.ReserveOutputTokens
		}
		s.MaxTokens = base + cp.MaxTokensIncrease
		if limit := cfg.Limits.MaxTokens; limit > 0 && s.MaxTokens > limit {
			s.MaxTokens = limit
		}
		if s.MaxTokens <= in.MaxTokens {
			return p.switchOrFallback(fmt.Sprintf("%s: max_tokens is already at the %d limit", in.Class, in.MaxTokens))
		}
		s.Temperature = cp.Temperature
		s.Reason = fmt.Sprintf("%s: max_tokens %d→%d, temperature %.1f, retry after %s", in.Class, in.MaxTokens, s.MaxTokens, derefTemp(cp.Temperature), fmtDur(d))
	default:
		return p.fallback(fmt.Sprintf("%s: action %q has no plan", in.Class, cp.Action))
	}

	if !p.fits(s.Delay) {
		return p.switchOrFallback(fmt.Sprintf("%s: waiting %s would not leave time for an attempt before the deadline", in.Class, fmtDur(s.Delay)))
	}
	if budget != nil && !budget.TryRetry(now) {
		r := p.switchOrFallback("retry budget exhausted")
		r.BudgetRefused = true
		return r
	}
	s.ChargeBudget = budget != nil
	return s
}

type planner struct {
	cfg *config.Config
	in  PlanInput
	cp  config.ClassPolicy
}

func (p planner) step(kind StepKind, d time.Duration, model, decision string) Step {
	return Step{
		Kind: kind, Delay: d, Model: model, Decision: decision,
		PruneStage: p.in.PruneStage, KeepRounds: p.in.KeepRounds,
		MaxTokens: p.in.MaxTokens, Temperature: p.in.Temperature,
	}
}

func (p planner) jitter() time.Duration {
	return FullJitter(p.in.Retries, p.cfg.Backoff.Base.D(), p.cfg.Backoff.Cap.D(), p.in.U)
}

// remaining is the time left for attempts, the fallback reserve excluded.
func (p planner) remaining() time.Duration {
	return p.in.Deadline - p.in.Elapsed - p.cfg.Call.FallbackReserve.D()
}

// fits reports whether waiting d still leaves time for one attempt.
func (p planner) fits(d time.Duration) bool {
	return d+p.in.MinAttemptTime <= p.remaining()
}

func (p planner) fallback(reason string) Step {
	s := p.step(StepFallback, 0, "", "fallback")
	s.Reason = reason
	return s
}

func (p planner) fail(reason string) Step {
	s := p.step(StepFail, 0, "", "fail")
	s.Reason = reason
	return s
}

// switchTo moves to the next model after d, or falls back when the ladder
// is exhausted or the deadline is too close.
func (p planner) switchTo(d time.Duration, why string) Step {
	if p.in.NextModel == "" {
		return p.fallback(why + "; no other model available")
	}
	if !p.fits(d) {
		return p.fallback(why + "; no time left before the deadline")
	}
	s := p.step(StepSwitch, d, p.in.NextModel, "switch_model")
	s.Reason = fmt.Sprintf("%s: switch to %s", why, p.in.NextModel)
	if d > 0 {
		s.Reason += " after " + fmtDur(d)
	}
	return s
}

// switchOrFallback switches at once (no wait: the reason is that waiting
// is not allowed) or falls back.
func (p planner) switchOrFallback(why string) Step {
	return p.switchTo(0, why)
}

func derefTemp(t *float64) float64 {
	if t == nil {
		return 0
	}
	return *t
}

// fmtDur prints a duration for people: "1.27 s", "200 ms".
func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// FormatDuration prints a duration the way summaries and reasons do
// ("1.27 s", "200 ms").
func FormatDuration(d time.Duration) string { return fmtDur(d) }
