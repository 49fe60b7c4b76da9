package callstate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// Grace is how long an attempt bounded by the call's deadline (timeout
// below the model's own, modelTimeout) keeps its request open past it: the
// part of the fallback's reserve the fallback does not need
// (guard.FallbackTime). Zero for an attempt its model's timeout bounds.
func Grace(timeout, modelTimeout, reserve time.Duration) time.Duration {
	if timeout >= modelTimeout {
		return 0
	}
	return max(min(modelTimeout-timeout, reserve-guard.FallbackTime), 0)
}

// Next decides the step after a failed attempt of the call in state s
// (docs/how-it-works.md, step 5): the class's action, vetoed in this order
// by the class's own verdict (fail, fallback), a business rule, the
// attempts cap (every request of the call counts but the refusals of
// backpressure), the class's resend, hold, switch and retry limits and
// switch rule, the class breaker and the remaining deadline. A step that
// would send another request where it may not (an endpoint whose retry
// budget is spent; after auth, the same key on the same endpoint) goes to
// a model where it may, else to the business fallback. It spends nothing,
// and once text was streamed to the caller every further attempt continues
// it (see the package documentation).
func Next(cfg *config.Config, s State, out Outcome, v Verdicts) Step {
	d := decider{cfg: cfg, cp: cfg.ClassPolicy(out.Class), out: out, v: v, model: s.Model, next: s.clone()}
	d.record()
	st := d.allowed(d.keepDelivered(d.decide()))
	if st.Rule == "" {
		st.Rule = d.rule(st)
	}
	d.apply(&st)
	return st
}

// rule names the guard's rule that made st, when decide did not: a
// spent budget that changed it, backpressure for a refusal, else the
// class's own action.
func (d *decider) rule(st Step) guard.RuleName {
	switch {
	case st.BudgetRefused:
		return guard.RuleBudget
	case Backpressure(d.out.Class):
		return guard.RuleBackpressure
	}
	return guard.RuleClass
}

// decider holds one decision in the making.
type decider struct {
	cfg   *config.Config
	cp    config.ClassPolicy
	out   Outcome
	v     Verdicts
	model string // the model of the failed attempt
	// next starts as the state after the failed attempt is recorded; the
	// decision then moves it to the next attempt (see apply).
	next State
}

// record counts the failed attempt in the state.
func (d *decider) record() {
	n := &d.next
	class := d.out.Class
	n.addClass(class)
	n.LostWithWorker = ""
	if class == failure.WorkerLost {
		n.LostWithWorker = d.model
	}
	if class != failure.WorkerLost {
		// A resend is still the retry it resends; anything else ends it.
		n.Pending = failure.None
		if !d.out.NotSent {
			n.Upstream++
		}
	}
	if Backpressure(class) && !d.out.NotSent {
		n.Refused++ // no attempt against the cap: the server did no work
	}
	n.Delivered += d.out.Delivered
	n.Requests += d.out.ConnectResends
	// Only a repair, summarizing or continuing step asks for one.
	n.Shape.Repair, n.Shape.Summarize, n.Shape.Continue = "", false, false
	if n.Failures[d.model] == nil {
		n.Failures[d.model] = map[failure.Class]int{}
	}
	n.Failures[d.model][class]++
}

func (d *decider) decide() Step {
	class, cp, s := d.out.Class, d.cp, d.next
	switch cp.Action {
	case config.ActionFail:
		return d.fail(fmt.Sprintf("%s is not retryable: the request must change", class))
	case config.ActionFallback:
		return d.fallback(fmt.Sprintf("%s: no retry, business fallback", class))
	}
	if s.NoRetry {
		return d.fallback("a business rule forbids retries for this call")
	}
	if limit := MaxRequests(d.cfg); s.Attempts() >= limit {
		why := fmt.Sprintf("attempts cap reached (%d/%d upstream requests", s.Attempts(), limit)
		if s.Attempts() != s.Requests {
			why += fmt.Sprintf("; %d more refused as backpressure", s.Requests-s.Attempts())
		}
		return d.fallback(why + ")")
	}
	if cp.Action == config.ActionHold {
		return d.hold()
	}
	retries := s.ClassRetries[class]
	if cp.Action == config.ActionResend {
		if cp.Max >= 0 && retries >= cp.Max {
			return d.switchOrFallback(fmt.Sprintf("%s resent %d time(s) already", class, retries))
		}
		st := d.step(Resend, Wait{}, "resend")
		st.Reason = fmt.Sprintf("%s: resend the same attempt (%d/%d)", class, retries+1, cp.Max)
		return st
	}
	onModel := s.FailuresOn(d.model, class)
	if cp.Action == config.ActionSwitchModel {
		if n := s.ClassSwitches[class]; cp.Max >= 0 && n >= cp.Max {
			return d.fallback(fmt.Sprintf("%s on %s: switched %d time(s) for it already (max %d)", class, d.model, n, cp.Max))
		}
		return d.switchTo(fixed(cp.Waits, onModel-1), fmt.Sprintf("%s on %s", class, d.model))
	}
	if cp.Max >= 0 && retries >= cp.Max {
		return d.switchOrFallback(fmt.Sprintf("%s retried %d time(s) already (max %d)", class, retries, cp.Max))
	}
	if cp.SwitchAfter > 0 && onModel >= cp.SwitchAfter && d.nextModel() != "" {
		return d.switchTo(Wait{}, fmt.Sprintf("%s %d time(s) on %s", class, onModel, d.model))
	}
	if !d.v.ClassAllowed {
		// The class breaker caps the class's retries across the process as
		// cp.Max caps them in a call: reached, the call goes where the cap
		// of a call sends it, the next rung (whose endpoint the retry
		// budget guards), never to the fallback past a rung that answers.
		st := d.switchOrFallback(fmt.Sprintf("class breaker: retries of %s fail too often across the process", class))
		st.Rule = guard.RuleClassBreaker
		return st
	}

	st, refused := d.retry()
	if refused != nil {
		return *refused
	}
	if !d.fits(st.Wait.Delay) {
		return d.switchOrFallback(fmt.Sprintf("%s: waiting %s would not leave time for an attempt before the deadline", class, FormatDuration(st.Wait.Delay)))
	}
	return st
}

// hold answers backpressure (config.ActionHold): the same request again
// once the hold the refusal set (the upstream's Retry-After, else
// rate_limit.hold) is released, with jitter (guard.Jittered: the calls a
// hold stopped must not all send at once). The resend is paid from the
// retry budget (PrepareAttempt) but is no attempt against the cap (the
// refusal was none); at most the class's max per call (State.Held), while
// the deadline leaves time for an attempt after the wait and the call's
// waits stay within call.max_wait where one is set (Verdicts.MaxWait). Beyond, the call
// leaves the endpoint (elsewhere). While the ladder has another model, the
// call switches to it at once instead: a hold is for when every queue the
// call could use is full.
func (d *decider) hold() Step {
	class, cp, s := d.out.Class, d.cp, d.next
	on := fmt.Sprintf("%s on %s", class, d.model)
	if d.nextModel() != "" && d.fits(0) {
		// The queue that refused is its model's: route around it, as a
		// balancer sends to a queue that has room, while the ladder has a
		// model not held. Holding here would spend the caller's time and a
		// retry per resend on a queue known full (docs/benchmarks.md, the
		// queue_full case, measures both).
		return d.switchTo(Wait{}, on+": its queue is full")
	}
	if cp.Max >= 0 && s.Held >= cp.Max {
		return d.elsewhere(fmt.Sprintf("%s: resent %d time(s) after a hold already (max %d)", on, s.Held, cp.Max))
	}
	length, what := d.cfg.RateLimit.Hold.D(), "rate_limit.hold"
	if d.out.HasRetryAfter && d.out.RetryAfter > 0 {
		limit := d.cfg.Backoff.RetryAfterCap.D()
		ra, ok := HonourRetryAfter(d.out.RetryAfter, limit)
		if !ok {
			return d.elsewhere(fmt.Sprintf("%s: Retry-After %s is beyond the %s cap", on, FormatDuration(d.out.RetryAfter), FormatDuration(limit)))
		}
		length, what = ra, "Retry-After"
	}
	w := guard.Jittered(length, length, d.v.U)
	switch {
	case !d.fits(w):
		return d.elsewhere(fmt.Sprintf("%s: waiting %s for the hold would not leave time for an attempt before the deadline", on, FormatDuration(w)))
	case d.v.MaxWait > 0 && s.Waited+w > d.v.MaxWait:
		return d.elsewhere(fmt.Sprintf("%s: waiting %s for the hold would pass call.max_wait (%s, %s waited)", on, FormatDuration(w), FormatDuration(d.v.MaxWait), FormatDuration(s.Waited)))
	}
	st := d.step(Resend, Wait{Delay: w, Reason: HoldWait}, "hold+resend")
	st.Next.Held++
	st.Next.Waited += w
	st.Reason = fmt.Sprintf("%s: backpressure, held for %s (%s); resend %d/%d after %s, released with jitter, no attempt against the cap",
		on, FormatDuration(length), what, st.Next.Held, cp.Max, FormatDuration(w))
	return st
}

// elsewhere leaves a model whose queue refused as backpressure once its
// holds are spent: the ladder's next model, at once (the hold is its
// model's queue: PrepareAttempt skips a model still held), else the
// fallback.
func (d *decider) elsewhere(why string) Step {
	model := d.nextModel()
	if model == "" {
		st := d.fallback(why + "; no other model")
		// Models behind open breakers may still recover in time.
		st.NoModel = len(d.v.Open) > 0
		return st
	}
	if !d.fits(0) {
		return d.fallback(why + "; no time left before the deadline")
	}
	st := d.step(Switch, Wait{}, "switch_model")
	st.Next.Model = model
	st.Reason = fmt.Sprintf("%s: switch to %s", why, model)
	return st
}

// allowed keeps a step that sends another request only where the call may
// send it: not to an endpoint whose retry budget is spent, and after an
// auth failure not with the same key to the same endpoint. Otherwise the
// call switches to the next model where it may (one that can continue the
// delivered text, once text was streamed), else falls back (or finishes
// with the delivered text).
func (d *decider) allowed(st Step) Step {
	target := d.model
	switch st.Kind {
	case Retry, Resend:
	case Switch:
		target = st.Next.Model
	default:
		return st
	}
	why, budget := d.refuses(target)
	if why == "" {
		return st
	}
	next := d.nextModelWhere(func(m string) bool {
		r, _ := d.refuses(m)
		return r == "" && (d.next.Delivered == 0 || d.canContinue(m))
	})
	if next == "" {
		r := d.keepDelivered(d.fallback(fmt.Sprintf("%s; %s and no other model may take the call", st.Reason, why)))
		r.BudgetRefused = budget
		r.NoModel = budget && r.Kind == Fallback // a spent budget, not a rule such as auth's
		return r
	}
	sw := d.step(Switch, Wait{}, "switch_model")
	if d.next.Delivered > 0 {
		sw.Decision += " (continue)"
	}
	sw.Next.Model = next
	sw.BudgetRefused = budget
	sw.Reason = fmt.Sprintf("%s; %s: switch to %s", st.Reason, why, next)
	return sw
}

// refuses says why the call may not send its next request to model (""
// when it may) and whether that is the retry budget.
func (d *decider) refuses(model string) (string, bool) {
	m, _ := d.cfg.Model(model)
	if d.out.Class == failure.Auth {
		f, _ := d.cfg.Model(d.model)
		failed := f.APIKeyEnv
		if d.next.Key != "" {
			failed = d.next.Key // the pooled key the attempt used
		}
		// Refused where every key (or deployment) of model serves the one
		// that was refused: it would be refused too.
		where := f.WithKey(failed).Scope(config.ScopeKey)
		if !slices.ContainsFunc(m.Keys(), func(k string) bool { return m.WithKey(k).Scope(config.ScopeKey) != where }) {
			return fmt.Sprintf("%s refused the key of %s", m.EndpointLabel(), d.model), false
		}
	}
	if slices.Contains(d.v.Spent, m.Capacity()) && d.next.HasSent(m.Capacity()) && model != d.next.LostWithWorker {
		// The budget protects the endpoint that receives resends; the
		// call's first request to another is its ordinary load.
		return fmt.Sprintf("the retry budget of %s is spent", m.EndpointLabel()), true
	}
	return "", false
}

// retry builds the retry the class's action asks for, or the step that
// replaces it when the action itself cannot retry.
func (d *decider) retry() (Step, *Step) {
	class, cp, sh := d.out.Class, d.cp, d.next.Shape
	var st Step
	switch cp.Action {
	case config.ActionResume:
		st = d.step(Retry, Wait{}, "resume")
		st.Reason = fmt.Sprintf("%s: send again to %s at once", class, d.model)
	case config.ActionRetry:
		w := d.backoff()
		st = d.step(Retry, w, "retry")
		st.Reason = fmt.Sprintf("%s: retry %s after full-jitter backoff %s", class, d.model, FormatDuration(w.Delay))
	case config.ActionPruneRetry:
		w := d.backoff()
		st = d.step(Retry, w, "prune+retry")
		st.Next.Shape.PruneStage = sh.PruneStage + 1
		st.Reason = fmt.Sprintf("%s: prune to stage %d, retry after %s", class, sh.PruneStage+1, FormatDuration(w.Delay))
	case config.ActionPruneResend:
		keep := cp.KeepRounds
		if sh.KeepRounds > 0 && sh.KeepRounds < keep {
			keep = sh.KeepRounds
		}
		st = d.step(Retry, Wait{}, "prune+resend")
		st.Next.Shape.KeepRounds = keep
		st.Reason = fmt.Sprintf("%s: keep the last %d rounds + the question, resend at once", class, keep)
		if cp.Summarize {
			st.Decision = "prune+summary+resend"
			st.Next.Shape.Summarize = true
			st.Reason = fmt.Sprintf("%s: keep the last %d rounds + the question, the older rounds replaced by their summary, resend at once", class, keep)
		}
	case config.ActionRetryAfter:
		if k := d.v.OtherKey; k != "" && d.out.Class == failure.RateLimited {
			// A pool spreads rate limits: the limit held this key, not the
			// model.
			st = d.step(Retry, Wait{}, "retry (another key)")
			st.Reason = fmt.Sprintf("%s on key %s of %s: key %s at once, no wait", class, d.next.Key, d.model, k)
			break
		}
		if !d.out.HasRetryAfter {
			w := d.backoff()
			st = d.step(Retry, w, "retry")
			st.Reason = fmt.Sprintf("%s without Retry-After: full-jitter backoff %s", class, FormatDuration(w.Delay))
			break
		}
		limit := d.cfg.Backoff.RetryAfterCap.D()
		wait, ok := HonourRetryAfter(d.out.RetryAfter, limit)
		if !ok {
			r := d.switchOrFallback(fmt.Sprintf("Retry-After %s is beyond the %s cap", FormatDuration(d.out.RetryAfter), FormatDuration(limit)))
			return Step{}, &r
		}
		if !d.fits(wait) {
			r := d.switchOrFallback(fmt.Sprintf("Retry-After %s does not fit the deadline", FormatDuration(wait)))
			return Step{}, &r
		}
		st = d.step(Retry, Wait{Delay: wait, Reason: RetryAfter}, "wait retry-after")
		st.Reason = fmt.Sprintf("%s: wait Retry-After %s exactly", class, FormatDuration(wait))
	case config.ActionContinue:
		if d.out.Partial > 0 && d.canContinue(d.model) {
			st = d.continueStep()
			break
		}
		fallthrough
	case config.ActionBumpTokens:
		w := fixed(cp.Waits, d.next.ClassRetries[class])
		st = d.step(Retry, w, "more tokens+retry")
		bumped := d.bumpedMaxTokens()
		if bumped <= sh.MaxTokens {
			r := d.switchOrFallback(fmt.Sprintf("%s: max_tokens is already at the %d limit", class, sh.MaxTokens))
			return Step{}, &r
		}
		st.Next.Shape.MaxTokens, st.Next.Shape.Temperature = bumped, cp.Temperature
		st.Reason = fmt.Sprintf("%s: max_tokens %d→%d, temperature %.1f, retry after %s",
			class, sh.MaxTokens, bumped, deref(cp.Temperature), FormatDuration(w.Delay))
		if cp.Action == config.ActionContinue && d.out.Partial > 0 {
			st.Reason += fmt.Sprintf("; %s cannot continue the %d token(s) it wrote: the whole answer again", d.model, d.out.Partial)
		}
	case config.ActionRepair:
		st = d.step(Retry, Wait{}, "repair")
		st.Next.Shape.Temperature = cooler(sh.Temperature, cp.Temperature)
		st.Next.Shape.Repair = RepairInstruction(class, d.out.Detail)
		st.Reason = fmt.Sprintf("%s: ask %s again at once, temperature %.1f, told what was wrong", class, d.model, deref(st.Next.Shape.Temperature))
	default:
		r := d.fallback(fmt.Sprintf("%s: action %q has no decision", class, cp.Action))
		return Step{}, &r
	}
	return st, nil
}

// bumpedMaxTokens is the attempt's max_tokens (else the default sent,
// else the output reserve) grown by the class's max_tokens_increase,
// within limits.max_tokens. A caller's own max_tokens never grows.
func (d *decider) bumpedMaxTokens() int {
	base := d.next.Shape.MaxTokens
	if d.out.CallerLimit && base > 0 {
		return base
	}
	if base <= 0 {
		base = cmp.Or(d.cfg.Limits.DefaultMaxTokens, d.cfg.Pruning.ReserveOutputTokens)
	}
	bumped := base + d.cp.MaxTokensIncrease
	if limit := d.cfg.Limits.MaxTokens; limit > 0 && bumped > limit {
		bumped = limit
	}
	return bumped
}

// continueStep asks the failed attempt's model for the missing part of
// its truncated answer (action continue): max_tokens grows as bump_tokens
// would, but all of it is for new text, so it is sent even at the
// max_tokens limit.
func (d *decider) continueStep() Step {
	class, cp := d.out.Class, d.cp
	w := fixed(cp.Waits, d.next.ClassRetries[class])
	st := d.step(Retry, w, "continue")
	more := d.bumpedMaxTokens()
	st.Next.Shape.MaxTokens, st.Next.Shape.Temperature = more, cp.Temperature
	st.Next.Shape.Continue = true
	st.Reason = fmt.Sprintf("%s: %s continues the %d token(s) it wrote, up to %d new token(s), temperature %.1f, after %s",
		class, d.model, d.out.Partial, more, deref(cp.Temperature), FormatDuration(w.Delay))
	return st
}

// keepDelivered makes a step keep the text already streamed to the
// caller: see Next.
func (d *decider) keepDelivered(st Step) Step {
	n := d.next.Delivered
	if n == 0 {
		return st
	}
	switch st.Kind {
	case Fallback:
		return d.finish(fmt.Sprintf("%s; the stream had delivered %d token(s): the call ends with them", st.Reason, n))
	case Retry, Resend, Switch:
		model := d.model
		if st.Kind == Switch {
			model = st.Next.Model
		}
		if d.canContinue(model) {
			st.Decision += " (continue)"
			st.Reason += fmt.Sprintf("; it continues the %d token(s) delivered", n)
			return st
		}
		next := d.nextModelWhere(d.canContinue)
		if next == "" {
			return d.finish(fmt.Sprintf("the stream broke after %d token(s) and no model left can continue them: the call ends with the text delivered", n))
		}
		sw := d.step(Switch, Wait{}, "switch_model (continue)")
		sw.Next.Model = next
		sw.BudgetRefused = st.BudgetRefused
		sw.Reason = fmt.Sprintf("%s; %s cannot continue the %d token(s) delivered: switch to %s, which can", st.Reason, model, n, next)
		return sw
	}
	return st
}

func (d *decider) canContinue(model string) bool {
	m, ok := d.cfg.Model(model)
	return ok && m.Continues()
}

func (d *decider) finish(reason string) Step {
	st := d.step(Finish, Wait{}, "finish")
	st.Reason = reason
	return st
}

// apply moves the state to the next attempt the step asks for.
func (d *decider) apply(st *Step) {
	n := &st.Next
	class := d.out.Class
	from := From{N: n.N, Class: class}
	switch st.Kind {
	case Resend:
		n.ClassRetries[class]++
		from.Resend = true
		n.From = from
	case Retry:
		n.ClassRetries[class]++
		n.Pending = class
		if st.Wait.Reason == Backoff {
			n.Backoffs++
		}
		n.From = from
		n.N++
	case Switch:
		n.ClassSwitches[class]++
		n.Pending = failure.None // the next model's attempt is not a retry
		n.Tried = append(n.Tried, d.model)
		n.From = from
		n.N++
	}
}

func (d *decider) step(kind Kind, w Wait, decision string) Step {
	next := d.next
	return Step{Kind: kind, Wait: w, Decision: decision, Next: next}
}

func (d *decider) backoff() Wait {
	w := FullJitter(d.next.Backoffs, d.cfg.Backoff.Base.D(), d.cfg.Backoff.Cap.D(), d.v.U)
	return Wait{Delay: w, Reason: Backoff}
}

// nextModel is the model the ladder offers after the failed one, skipping
// models already tried, models whose breaker is open and models that
// cannot serve the request; "" when none.
func (d *decider) nextModel() string {
	return d.nextModelWhere(func(string) bool { return true })
}

// nextModelWhere is nextModel among the models ok accepts.
func (d *decider) nextModelWhere(ok func(model string) bool) string {
	tried := append(slices.Clone(d.next.Tried), d.model)
	m, found := NextModel(d.cfg.Models, d.next.Preferred, tried, func(model string) bool {
		return !slices.Contains(d.v.Open, model) && !slices.Contains(d.v.Unable, model) && ok(model)
	})
	if !found {
		return ""
	}
	return m.Name
}

// unableLeft are the models not tried yet that cannot serve the request.
func (d *decider) unableLeft() []string {
	var out []string
	for _, m := range d.v.Unable {
		if m != d.model && !slices.Contains(d.next.Tried, m) {
			out = append(out, m)
		}
	}
	return out
}

// remaining is the time left for attempts, the fallback reserve excluded.
func (d *decider) remaining() time.Duration {
	return TimeLeft(d.next.Deadline, d.out.Elapsed, d.cfg.Call.FallbackReserve.D())
}

// TimeLeft is what a call with deadline has left for its attempts after
// elapsed, the fallback's reserve kept: the one sum every wait and every
// attempt of the call is bounded by.
func TimeLeft(deadline, elapsed, reserve time.Duration) time.Duration {
	return deadline - elapsed - reserve
}

// CanWait is how long a call may still wait before its next attempt:
// TimeLeft less the least time an attempt needs (guard.MinAttemptTime).
func CanWait(deadline, elapsed, reserve time.Duration) time.Duration {
	return TimeLeft(deadline, elapsed, reserve) - guard.MinAttemptTime
}

// FallbackWindow is the time left at elapsed before the fallback must
// begin: the deadline less the fallback's own guard.FallbackTime (the whole
// reserve when it is shorter).
func FallbackWindow(deadline, elapsed, reserve time.Duration) time.Duration {
	return deadline - elapsed - min(reserve, guard.FallbackTime)
}

// fits reports whether waiting w still leaves time for one attempt.
func (d *decider) fits(w time.Duration) bool {
	return w+guard.MinAttemptTime <= d.remaining()
}

func (d *decider) fallback(reason string) Step {
	st := d.step(Fallback, Wait{}, "fallback")
	st.Reason = reason
	return st
}

func (d *decider) fail(reason string) Step {
	st := d.step(Fail, Wait{}, "fail")
	st.Reason = reason
	return st
}

// switchTo moves to the next model after w, or falls back when the ladder
// is exhausted or the deadline is too close.
func (d *decider) switchTo(w Wait, why string) Step {
	model := d.nextModel()
	if model == "" {
		why += "; no other model available"
		if u := d.unableLeft(); len(u) > 0 {
			why += fmt.Sprintf(" (%s cannot serve the request: it lacks a capability the request needs)", strings.Join(u, ", "))
		}
		st := d.fallback(why)
		st.NoModel = true
		return st
	}
	if !d.fits(w.Delay) {
		return d.fallback(why + "; no time left before the deadline")
	}
	st := d.step(Switch, w, "switch_model")
	st.Next.Model = model
	st.Reason = fmt.Sprintf("%s: switch to %s", why, model)
	if w.Delay > 0 {
		st.Reason += " after " + FormatDuration(w.Delay)
	}
	return st
}

// switchOrFallback switches at once (no wait: the reason is that waiting
// is not allowed) or falls back.
func (d *decider) switchOrFallback(why string) Step {
	return d.switchTo(Wait{}, why)
}

// fixed is the class's n-th fixed wait (the last repeats), none when the
// class has no fixed waits.
func fixed(waits []config.Duration, n int) Wait {
	w := Fixed(waits, n)
	if w <= 0 {
		return Wait{}
	}
	return Wait{Delay: w, Reason: FixedWait}
}

// cooler is the temperature of a repair: the request's, at most limit
// (unset: limit).
func cooler(t, limit *float64) *float64 {
	if limit == nil || (t != nil && *t <= *limit) {
		return t
	}
	v := *limit
	return &v
}

// oneLine is s on one line, cut to at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// maxRepairDetail bounds the detail a repair instruction quotes.
const maxRepairDetail = 600

// RepairInstruction is the short message a repair attempt adds after the
// request's messages, telling the model what was wrong with its answer.
func RepairInstruction(class failure.Class, detail string) string {
	detail = oneLine(detail, maxRepairDetail)
	switch class {
	case failure.BadToolCall:
		return "Your previous reply could not be used: " + detail +
			". Call only the tools offered, with arguments that are one JSON object matching the tool's parameters."
	case failure.SchemaMismatch:
		return "Your previous reply could not be used: " + detail +
			". Reply with only JSON that matches the required schema, no other text."
	}
	return "Your previous reply could not be used: " + detail + "."
}

func deref(t *float64) float64 {
	if t == nil {
		return 0
	}
	return *t
}

// FormatDuration prints a duration the way summaries and reasons do
// ("1.27 s", "200 ms"). It reads the whole milliseconds the history
// records (an attempt's and an event's delay_ms), so a timer's summary
// and the figure beside it never disagree in the last digit.
func FormatDuration(d time.Duration) string { return guard.FormatDuration(d) }
