package activities

import (
	"fmt"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	promptpkg "github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
)

// walk is one PrepareAttempt's way down the ladder: each rung meets the
// guard's rules before a send in guard.Rules' order (capability, breaker,
// key, outlier, hold, pace, budget), and the first rung none of them skips
// is sent; with none left, the call waits (rule wait), sends past open
// breakers (rule past-open) or falls back.
type walk struct {
	a    *Activities
	in   PrepareInput
	call string // the call's run, for its place in the budget's line
	now  time.Time
	p    Prepared
	// The models each rule kept from the call, for the wait's reason.
	breakerSkipped, budgetSkipped, ejectedSkipped []string
	budgetWhy                                     string // the last refusal of the retry budget
	refused                                       int    // retries the budget refused
	pastOpen                                      bool
	probing                                       string // the endpoint whose probe this request claimed
	sent                                          bool   // a rung was chosen (send)
}

// rung is one model the walk weighs, and what the rules found.
type rung struct {
	m       config.ModelConfig
	key     string
	last    bool          // the call's last chance (rule last-chance)
	canWait time.Duration // how long the call may still wait
	left    time.Duration // how long the request is put off
	scope   string        // the held scope, as tenants read it
	why     string        // why it is put off
	rule    guard.RuleName
	prompt  Prompt
}

// prepareAttempt is PrepareAttempt for call (its run; "" outside an
// activity): a retry the budget refuses keeps the call's place in the
// budget's line, so the calls that wait for it are served in turn.
func (a *Activities) prepareAttempt(in PrepareInput, call string) (Prepared, error) {
	w := &walk{a: a, in: in, call: call, now: a.now(), p: Prepared{State: in.State}}
	defer w.settle()
	want := in.State.Model
	rules := []func(*rung) bool{w.capability, w.breaker, w.key, w.outlier, w.hold, w.pace, w.budget}
next:
	for first := true; ; first = false {
		if in.Only && !first {
			if n := len(w.p.Skipped); n > 0 {
				w.p.Reason = w.p.Skipped[n-1].Reason
			}
			return w.p, nil
		}
		m, ok := w.nextRung(&want)
		if !ok {
			if w.exhausted(&want) {
				return w.p, nil
			}
			continue
		}
		r := &rung{m: m}
		for _, skips := range rules {
			if skips(r) {
				continue next
			}
			if r.rule == guard.RuleHold {
				w.putOff(r)
				return w.p, nil
			}
		}
		w.send(r)
		return w.p, nil
	}
}

// settle undoes what a walk claimed and did not use, and counts what it
// refused: each model an open breaker refused is an attempt refused, in
// llm_attempts_total, and each retry the budget refused is one, unless the
// call waits and prepares again (its rechecks are one wait, not attempts).
func (w *walk) settle() {
	if w.probing != "" && !w.sent {
		w.a.outliers.Unclaim(w.probing, w.now) // claimed, then not sent
	}
	for _, name := range w.breakerSkipped {
		w.a.metrics.Attempt(name, string(failure.BreakerOpen), 0)
	}
	for range w.refused {
		w.a.metrics.BudgetRefused()
	}
}

// nextRung is the model to weigh next: the one the call asked for first
// (want, once), then the ladder's next untried one (none for a hedge,
// which goes to its own model or nowhere).
func (w *walk) nextRung(want *string) (config.ModelConfig, bool) {
	var m config.ModelConfig
	var ok bool
	if *want != "" {
		m, ok = w.a.cfg.Model(*want)
		*want = ""
	}
	if !ok && !w.in.Only {
		m, ok = callstate.NextModel(w.a.cfg.Models, w.in.State.Preferred, w.p.State.Tried, nil)
	}
	return m, ok
}

// exhausted ends a walk with no rung left: a wait (rule wait), else a
// fresh walk with the breakers set aside for a call's first request (rule
// past-open; it returns false and the walk goes on), else the fallback's
// reason.
func (w *walk) exhausted(want *string) bool {
	in := w.in
	if wt := w.a.trialWait(in, w.breakerSkipped, w.budgetSkipped, w.ejectedSkipped, w.budgetWhy); wt.Hold > 0 {
		w.breakerSkipped, w.refused = nil, 0 // a wait, not attempts refused: nothing counted
		w.p = wt
		return true
	}
	if !w.pastOpen && len(w.breakerSkipped) > 0 && firstRequest(in, in.State) && !w.a.without[guard.RulePastOpen] {
		// Every rung that could take the call is behind an open breaker
		// and its wait is spent: its first request goes as a plain
		// client's would, to the first rung that takes it with the
		// breakers set aside (guard.RulePastOpen).
		*want = in.State.Model
		w.p, w.breakerSkipped, w.budgetSkipped, w.ejectedSkipped, w.budgetWhy, w.refused = Prepared{State: in.State}, nil, nil, nil, "", 0
		w.pastOpen = true
		return false
	}
	w.p.Reason = "no model left to try"
	if len(w.p.Skipped) > 0 {
		w.p.Reason = fmt.Sprintf("no model left to try: %d skipped (open breakers, spent retry budgets, rate limits or missing capabilities)", len(w.p.Skipped))
	}
	return true
}

// skip records that rule kept the call off r's model without a request;
// class is what the call's state counts against the model (breaker_open
// for an open breaker, else nothing).
func (w *walk) skip(r *rung, rule guard.RuleName, class failure.Class, reason string) bool {
	w.p.State = w.p.State.Skip(r.m.Name, class)
	w.p.Skipped = append(w.p.Skipped, SkippedModel{Model: r.m.Name, Guard: rule, Reason: reason})
	return true
}

// capability: guard.RuleCapability.
func (w *walk) capability(r *rung) bool {
	if lack := request.Lacks(r.m, w.in.Request.Needs()); len(lack) > 0 {
		return w.skip(r, guard.RuleCapability, failure.None,
			fmt.Sprintf("%s lacks %s, which the request needs: no upstream call made", r.m.Name, request.JoinCaps(lack)))
	}
	return false
}

// breaker: guard.RuleBreaker (set aside once the walk is past-open).
func (w *walk) breaker(r *rung) bool {
	if w.pastOpen || w.a.without[guard.RuleBreaker] || w.a.breakers.Permit(r.m.Name, w.now) {
		return false
	}
	w.breakerSkipped = append(w.breakerSkipped, r.m.Name)
	return w.skip(r, guard.RuleBreaker, failure.BreakerOpen,
		fmt.Sprintf("breaker %s: no upstream call made", w.a.breakers.State(r.m.Name, w.now)))
}

// key: guard.RuleKey. The rung takes its key from here on.
func (w *walk) key(r *rung) bool {
	key, ok := w.a.pickKey(r.m, w.now)
	if !ok {
		return w.skip(r, guard.RuleKey, failure.None,
			fmt.Sprintf("every key of %s is parked after a refusal: no upstream call made", r.m.Name))
	}
	r.m, r.key = r.m.WithKey(key), key
	return false
}

// outlier: guard.RuleOutlier (and whether this is the call's last
// chance, guard.RuleLastChance).
func (w *walk) outlier(r *rung) bool {
	if w.probing != "" {
		w.a.outliers.Unclaim(w.probing, w.now) // the last rung's probe was not sent
		w.probing = ""
	}
	if w.a.without[guard.RuleOutlier] {
		return false
	}
	skip, wait, probe, last, why := w.a.outlier(w.in, w.p.State, r.m, w.now)
	if probe {
		w.probing = r.m.Capacity()
	}
	r.last = last && !w.a.without[guard.RuleLastChance]
	if !skip {
		return false
	}
	if wait {
		w.ejectedSkipped = append(w.ejectedSkipped, r.m.Name)
	}
	return w.skip(r, guard.RuleOutlier, failure.None, why+": no upstream call made")
}

// hold: guard.RuleHold. A held rung is skipped while a rung on another
// endpoint, answering and not held, takes the call now. Otherwise the hold
// puts the request off until a moment drawn after its end
// (guard.ReleaseJitter), when the call weighs its rungs again
// (walk.putOff); when that moment is past what the call can wait, the rung
// is skipped, unless the request is the call's first: that goes now, as
// its last chance (rule last-chance). A hedge never waits.
func (w *walk) hold(r *rung) bool {
	r.canWait = callstate.CanWait(w.in.State.Deadline, w.in.Elapsed, w.a.cfg.Call.FallbackReserve.D())
	sc, left := w.a.held(r.m, w.now)
	if w.a.without[guard.RuleHold] || left <= 0 {
		return false
	}
	r.scope = r.m.ScopeLabel(sc) // tenants read it: no address
	if w.in.Only {
		return w.skip(r, guard.RuleHold, failure.None,
			fmt.Sprintf("rate-limit hold on %s for %s", r.scope, callstate.FormatDuration(left)))
	}
	if alt := w.a.answeringRung(w.in, w.p.State, r.m, w.now, true); alt != "" {
		// A hold is the wait for a call no rung takes now; it never keeps
		// a call off a rung that answers.
		return w.skip(r, guard.RuleHold, failure.None,
			fmt.Sprintf("rate-limit hold on %s for %s; %s takes the call now", r.scope, callstate.FormatDuration(left), alt))
	}
	release := w.a.holds.Release(r.m.Scope(sc), w.now, w.a.rand())
	// A first request keeps its last chance: a guard never leaves a
	// caller worse off than a plain client's one request, and it is put
	// off only while a timer that fires late still finds the call in time
	// for it.
	last := firstRequest(w.in, w.p.State) && !w.a.without[guard.RuleLastChance]
	room := r.canWait
	if last {
		room -= guard.LastChance
	}
	switch {
	case release <= room:
		r.left, r.why, r.rule = release, fmt.Sprintf("rate-limit hold on %s", r.scope), guard.RuleHold
		return false
	case last:
		r.last = true
		return false
	}
	return w.skip(r, guard.RuleHold, failure.None,
		fmt.Sprintf("rate-limit hold on %s for %s: longer than the call can wait", r.scope, callstate.FormatDuration(left)))
}

// putOff ends the walk with r's request put off by its hold: the call
// waits for the drawn release and prepares again, so that a hold renewed
// meanwhile (by the refusal of a call released before it) puts it off
// again, and one that has ended lets it go. Like the outlier's probe, the
// first calls released find out for the rest; released calls that sent
// at once would all meet the refusal the first one met. Nothing is
// claimed or paid (pace, budget, probe) for a request not sent.
func (w *walk) putOff(r *rung) {
	w.breakerSkipped, w.refused = nil, 0 // a wait, not attempts refused
	w.p = Prepared{State: w.in.State, Model: r.m.Name, Hold: r.left, HoldScope: r.scope, HoldReason: r.why,
		Rule: guard.RuleHold, Recheck: true}
}

// pace: guard.RulePace. The prompt is fitted here, since its tokens are
// what the scope's tpm pays.
func (w *walk) pace(r *rung) bool {
	m := r.m
	r.prompt = w.a.fitPrompt(w.in.Request, m, w.in.State.Shape)
	lim := w.a.paces[m.Scope(m.RateLimitScope)]
	if m.Pooled() {
		lim = limits{rpm: m.RPM, tpm: m.TPM} // each key of a pool has its own limits
	}
	paced, ok := w.a.pacer.Reserve(m.Scope(m.RateLimitScope), w.now, lim.rpm, lim.tpm, r.prompt.Tokens+w.a.outputTokens(w.in.State.Shape), r.canWait)
	if !ok {
		return w.skip(r, guard.RulePace, failure.None,
			fmt.Sprintf("paced to %s on %s: its turn comes later than the call can wait", lim, m.ScopeLabel(m.RateLimitScope)))
	}
	if paced > r.left {
		r.left, r.why, r.rule = paced, fmt.Sprintf("paced to %s on %s", lim, m.ScopeLabel(m.RateLimitScope)), guard.RulePace
	}
	return false
}

// budget: guard.RuleBudget. The call's first request to an endpoint is
// its ordinary load; a request still unsent, and the resend of an attempt
// lost with its worker, were paid when first prepared; anything else is a
// retry the endpoint's budget pays, in turn.
func (w *walk) budget(r *rung) bool {
	m, in := r.m, w.in
	if w.a.without[guard.RuleBudget] {
		return false
	}
	b := w.a.budgets.For(m.Capacity())
	switch {
	case !w.p.State.HasSent(m.Capacity()) && in.Request.Step == 0:
		// (A step of a step-by-step answer is an extra request of its
		// parent call: even its first is a retry.)
		b.RecordRequestFor(w.now, in.Request.Tenant)
	case unsent(in, w.p.State), m.Name == in.State.LostWithWorker:
	default:
		ok, capped, ahead := b.TryRetryInTurn(w.now, in.Request.Tenant, w.call)
		if ok {
			break
		}
		// Spent by other calls since this call's step was decided, or
		// left to calls that have waited longer, or this tenant took its
		// share while others are calling.
		w.refused++
		w.budgetSkipped = append(w.budgetSkipped, m.Name)
		reason := fmt.Sprintf("retry budget of %s spent: no upstream call made", m.EndpointLabel())
		switch {
		case capped:
			reason = fmt.Sprintf("tenant %q took its share (%.0f%%) of the retry budget of %s while other tenants call: no upstream call made",
				in.Request.Tenant, w.a.cfg.Budget.TenantShare*100, m.EndpointLabel())
		case ahead > 0:
			reason = fmt.Sprintf("retry budget of %s: its retries left go to calls that have waited longer: no upstream call made", m.EndpointLabel())
		}
		w.budgetWhy = strings.TrimSuffix(reason, ": no upstream call made")
		return w.skip(r, guard.RuleBudget, failure.None, reason)
	}
	w.a.budgets.Leave(w.call) // out of every line it waited in: it has its attempt
	w.a.metrics.Budget(b.Remaining(w.now))
	return false
}

// send makes r the call's attempt: its model, key, prompt, fingerprint
// and hedge, and the hold or last-chance delay before it goes.
func (w *walk) send(r *rung) {
	a, in, m, p := w.a, w.in, r.m, &w.p
	w.sent = true
	p.Model, p.Timeout, p.PastOpen = m.Name, m.Timeout.D(), w.pastOpen
	if r.left > 0 {
		p.Hold, p.HoldScope, p.HoldReason, p.Rule = r.left, r.scope, r.why, r.rule
	} else if need, known := a.answerTime(m.Name); r.last && known {
		p.Delay = callstate.LastChance(in.State.Deadline, in.Elapsed, a.cfg.Call.FallbackReserve.D(), need)
		p.Rule = guard.RuleLastChance
	}
	if m.Pooled() {
		p.Key = r.key
	}
	p.State = p.State.StartWith(m.Name, p.Key).SentTo(m.Capacity())
	sent := promptpkg.Build(in.Request.Messages, r.prompt.Keep, m.SystemPrompt)
	if rep := in.State.Shape.Repair; rep != "" {
		sent = append(sent, request.Message{Role: request.RoleUser, Content: rep})
	}
	p.Fingerprint = fingerprint(in.Request, m.Name, sent, in.State.Shape)
	p.Resends = max(callstate.MaxRequests(a.cfg)-p.State.Attempts(), 0)
	p.Prompt = r.prompt
	p.Hedge = a.hedgePlan(in, m, p.State)
	if p.Hedge == nil && !in.Only && !a.without[guard.RuleOverdue] {
		p.Hedge = overduePlan(m, p.State, callstate.MaxRequests(a.cfg))
	}
	if p.Delay > 0 {
		p.Hedge = nil // a last chance: no rung to race it on, no time to race it
	}
}
