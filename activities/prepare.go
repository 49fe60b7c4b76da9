package activities

import (
	"fmt"
	"slices"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	promptpkg "github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
)

// walk is one PrepareAttempt's way down the ladder. It does the I/O and
// the guard decides: for each rung in turn it reads what the rules weigh
// (guard.Rung), guard.Weigh decides, and the walk claims what the verdict
// sends (the endpoint's probe, the pace's turn, the budget's retry, a
// pooled key's turn) for that rung alone; with no rung left, guard.Wait and guard.PastOpen decide
// whether the call waits, sends past open breakers or falls back.
type walk struct {
	a    *Activities
	in   PrepareInput
	call string // the call's run, for its place in the budget's line
	now  time.Time
	c    guard.Call
	p    Prepared
	// What kept the rungs from the call, for the wait.
	blocked  guard.Blocked
	spentWhy string // the last refusal of the retry budget
	refused  int    // retries the budget refused
}

// rung is one model the walk weighs: what it read and the prompt fitted
// for it.
type rung struct {
	m       config.ModelConfig
	key     string
	keyFree bool // the key is not held (chooseKey)
	prompt  *Prompt
	limits  limits
	facts   guard.Rung
}

// prepareAttempt is PrepareAttempt for call (its run; "" outside an
// activity): a retry the budget refuses keeps the call's place in the
// budget's line, so the calls that wait for it are served in turn.
func (a *Activities) prepareAttempt(in PrepareInput, call string) (Prepared, error) {
	w := &walk{a: a, in: in, call: call, now: a.now(), p: Prepared{State: in.State}}
	w.c = guard.Call{
		Only: in.Only, First: firstRequest(in, in.State),
		CanWait:  callstate.CanWait(in.State.Deadline, in.Elapsed, a.cfg.Call.FallbackReserve.D()),
		Window:   callstate.FallbackWindow(in.State.Deadline, in.Elapsed, a.cfg.Call.FallbackReserve.D()),
		WaitLeft: waitLeft(a.cfg.Call.MaxWaitFor(in.Request.Scenario, in.Request.Stream), in.State.Waited),
		Tenant:   in.Request.Tenant, TenantShare: a.cfg.Budget.TenantShare, Without: a.without,
	}
	defer w.settle()
	want := in.State.Model
	for first := true; ; first = false {
		if in.Only && !first {
			if n := len(w.p.Skipped); n > 0 {
				w.p.Reason = w.p.Skipped[n-1].Reason
			}
			return w.p, nil
		}
		m, ok := w.nextRung(&want)
		switch {
		case !ok && w.exhausted(&want):
			return w.p, nil
		case ok && w.weigh(m):
			return w.p, nil
		}
	}
}

// settle counts what a walk refused: each model an open breaker refused is
// an attempt refused, in llm_attempts_total, and each retry the budget
// refused is one, unless the call waits and prepares again (its rechecks
// are one wait, not attempts).
func (w *walk) settle() {
	for _, name := range w.blocked.Open {
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
	in, b := w.in, w.blocked
	if len(b.Open) > 0 {
		m, _ := w.a.cfg.Model(b.Open[0])
		b.OpenFirstToken = firstTokenTime(m)
	}
	if step := guard.Wait(w.c, b, w.a.rand()); step > 0 {
		st := in.State
		st.Waited += step
		maxWait := w.a.cfg.Call.MaxWaitFor(in.Request.Scenario, in.Request.Stream)
		w.p = Prepared{State: st, Model: slices.Concat(b.Open, b.Spent, b.Ejected)[0], Hold: step, Recheck: true, Rule: guard.RuleWait,
			HoldReason: fmt.Sprintf("%s: waiting for %s (%s waited%s)", blocked(b.Open, b.Spent, b.Ejected, w.spentWhy),
				waitedFor(b.Open, b.Spent, b.Ejected), callstate.FormatDuration(st.Waited), waitCap(maxWait))}
		w.blocked, w.refused = guard.Blocked{}, 0 // a wait, not attempts refused: nothing counted
		return true
	}
	if guard.PastOpen(w.c, b) {
		// Its first request goes as a plain client's would, to the first
		// rung that takes it with the breakers set aside.
		*want = in.State.Model
		w.p, w.blocked, w.spentWhy, w.refused = Prepared{State: in.State}, guard.Blocked{}, "", 0
		w.c.PastOpen = true
		return false
	}
	w.p.Reason = "no model left to try"
	if len(w.p.Skipped) > 0 {
		w.p.Reason = fmt.Sprintf("no model left to try: %d skipped (open breakers, spent retry budgets, rate limits or missing capabilities)", len(w.p.Skipped))
	}
	return true
}

// weigh reads m's rung, lets the guard decide, and claims what a send
// needs; it reports whether the walk ends there (a send, or a put-off).
// A claim refused (another call took the probe, the turn or the retry
// since the read) reads the rung again, and the rules then skip it as
// they would have; a rung whose claims other calls keep taking is skipped
// after maxClaims.
func (w *walk) weigh(m config.ModelConfig) bool {
	for tries := 1; ; tries++ {
		r := w.read(m)
		v := guard.Weigh(w.c, r.facts, w.now)
		switch {
		case v.Skip:
			w.skip(r, v)
			return false
		case v.PutOff:
			w.blocked, w.refused = guard.Blocked{}, 0 // a wait, not attempts refused
			w.p = Prepared{State: w.in.State, Model: m.Name, Hold: v.Left, HoldScope: v.Scope, HoldReason: v.Why,
				Rule: guard.RuleHold, Recheck: true}
			return true
		}
		refused := w.claim(r, &v)
		switch {
		case refused == "":
			w.send(r, v)
			return true
		case tries == maxClaims:
			w.skipped(m.Name, guard.Verdict{Rule: refused,
				Reason: "its probe, pace turn or retry was taken by other calls each time this one weighed it: no upstream call made"})
			return false
		}
	}
}

// maxClaims is how many times a walk weighs a rung whose claims other
// calls take in between.
const maxClaims = 3

// read is what the rules weigh of m's rung now. It takes nothing: not the
// key, not the probe, not the pace's turn, not the retry.
func (w *walk) read(m config.ModelConfig) rung {
	a, in, now := w.a, w.in, w.now
	r := rung{m: m}
	f := &r.facts
	if lack := request.Lacks(m, in.Request.Needs()); len(lack) > 0 {
		f.Lacks = request.JoinCaps(lack)
	}
	f.Permit = a.breakers.Permit(m.Name, now)
	if !f.Permit {
		f.Breaker = a.breakers.State(m.Name, now)
	}
	key, ok, free := a.chooseKey(m, now)
	f.KeyParked = !ok
	if ok {
		r.m, r.key, r.keyFree = m.WithKey(key), key, free
		m = r.m
	}
	f.Model, f.Endpoint, f.FirstTokenTime = m.Name, m.EndpointLabel(), firstTokenTime(m) // a deployment's, once keyed
	f.Sick, f.NextProbe = a.outliers.State(m.Capacity(), now)
	f.AnswerTime, f.AnswerKnown = a.answerTime(m.Name)
	f.Answering, f.Unheld = a.answeringRungs(in, w.p.State, m, now)
	sc, left := a.held(m, now)
	if left > 0 {
		f.HoldLeft, f.HeldScope = left, m.ScopeLabel(sc) // tenants read it: no address
		f.Release = a.holds.Release(m.Scope(sc), now, a.rand())
	}
	r.limits = a.paces[m.Scope(m.RateLimitScope)]
	if m.Pooled() {
		r.limits = limits{rpm: m.RPM, tpm: m.TPM} // each key of a pool has its own limits
	}
	if r.limits != (limits{}) {
		// The prompt's tokens are what the scope's tpm pays.
		p := a.fitPrompt(in.Request, m, in.State.Shape)
		r.prompt = &p
		f.Paced = fmt.Sprintf("%s on %s", r.limits, m.ScopeLabel(m.RateLimitScope))
		f.PaceWait = a.pacer.Turn(m.Scope(m.RateLimitScope), now, r.limits.rpm, r.limits.tpm, w.paceTokens(r))
	}
	switch {
	case !w.p.State.HasSent(m.Capacity()) && in.Request.Step == 0:
		// (A step of a step-by-step answer is an extra request of its
		// parent call: even its first is a retry.)
		f.Charge = guard.ChargeRequest
	case unsent(in, w.p.State), m.Name == in.State.LostWithWorker:
		f.Charge = guard.ChargeNone
	default:
		f.Charge = guard.ChargeRetry
		f.RetryOK, f.Capped, f.Ahead = a.budgets.For(m.Capacity()).Turn(now, in.Request.Tenant, w.call)
	}
	return r
}

// paceTokens is what r's request pays its scope's tpm.
func (w *walk) paceTokens(r rung) int {
	return r.prompt.Tokens + w.a.outputTokens(w.in.State.Shape)
}

// skip records that rule v.Rule kept the call off r's model without a
// request, and what kept it, for the wait.
func (w *walk) skip(r rung, v guard.Verdict) {
	name := r.m.Name
	w.skipped(name, v)
	switch {
	case v.Rule == guard.RuleBreaker:
		w.blocked.Open = append(w.blocked.Open, name)
	case v.Rule == guard.RuleOutlier && v.WaitProbe:
		w.blocked.Ejected = append(w.blocked.Ejected, name)
	case v.Rule == guard.RuleBudget:
		w.refused++
		w.blocked.Spent = append(w.blocked.Spent, name)
		if v.SpentWhy != "" {
			w.spentWhy = v.SpentWhy
		}
		w.a.budgets.For(r.m.Capacity()).Refused(w.now, w.call, r.facts.Capped)
	}
}

// skipped records in the call's state and path that rule v.Rule kept the
// call off model, with v's reason.
func (w *walk) skipped(model string, v guard.Verdict) {
	w.p.State = w.p.State.Skip(model, v.Class)
	w.p.Skipped = append(w.p.Skipped, SkippedModel{Model: model, Guard: v.Rule, Reason: v.Reason})
}

// claim takes what the send of r needs: the endpoint's probe, the pace's
// turn (the turn booked sets the wait), the retry from the budget (the
// call's first request counts as the endpoint's request instead). It
// returns the rule whose claim was refused, having given back what it
// took; "" when all was taken.
func (w *walk) claim(r rung, v *guard.Verdict) guard.RuleName {
	a, m := w.a, r.m
	if v.Probe && a.outliers.Admit(m.Capacity(), w.now, firstTokenTime(m)) != guard.SendProbe {
		return guard.RuleOutlier
	}
	undo := func() {
		if v.Probe {
			a.outliers.Unclaim(m.Capacity(), w.now)
		}
	}
	if r.prompt != nil {
		maxWait := w.c.CanWait
		if w.c.Only {
			maxWait = 0 // a hedge never waits (rule pace)
		}
		wait, ok, unbook := a.pacer.Reserve(m.Scope(m.RateLimitScope), w.now, r.limits.rpm, r.limits.tpm, w.paceTokens(r), maxWait)
		if !ok {
			undo()
			return guard.RulePace
		}
		if v.Rule == guard.RulePace || wait > v.Left {
			// The turn booked is the wait (another call may have taken or
			// given back a turn since the read).
			v.Left, v.Why, v.Rule, v.Delay = wait, "paced to "+r.facts.Paced, guard.RulePace, 0
			if wait == 0 {
				v.Why, v.Rule = "", ""
			}
		}
		probe := undo
		undo = func() { unbook(); probe() }
	}
	if !a.without[guard.RuleBudget] && !w.pay(r) {
		undo()
		return guard.RuleBudget
	}
	a.takeKey(m, r.key, r.keyFree, w.now)
	return ""
}

// pay charges r's request to its endpoint's budget: the call's first
// request there is the endpoint's request, a retry is paid in turn, and
// a request paid when first prepared costs nothing. False when the retry
// is refused.
func (w *walk) pay(r rung) bool {
	b := w.a.budgets.For(r.m.Capacity())
	switch r.facts.Charge {
	case guard.ChargeRequest:
		b.RecordRequestFor(w.now, w.in.Request.Tenant)
	case guard.ChargeRetry:
		if ok, _, _ := b.TryRetryInTurn(w.now, w.in.Request.Tenant, w.call); !ok {
			return false
		}
	}
	w.a.budgets.Leave(w.call) // out of every line it waited in: it has its attempt
	w.a.metrics.Budget(b.Remaining(w.now))
	return true
}

// send makes r the call's attempt: its model, key, prompt, fingerprint
// and hedge, and the hold, pace or last-chance delay v set before it goes.
func (w *walk) send(r rung, v guard.Verdict) {
	a, in, m, p := w.a, w.in, r.m, &w.p
	p.Model, p.Timeout, p.PastOpen = m.Name, m.Timeout.D(), w.c.PastOpen
	p.Hold, p.HoldScope, p.HoldReason, p.Delay, p.Rule = v.Left, v.Scope, v.Why, v.Delay, v.Rule
	if v.Left == 0 {
		p.HoldScope = ""
	}
	if m.Pooled() {
		p.Key = r.key
	}
	if r.prompt == nil {
		fitted := a.fitPrompt(in.Request, m, in.State.Shape)
		r.prompt = &fitted
	}
	p.State = p.State.StartWith(m.Name, p.Key).SentTo(m.Capacity())
	sent := promptpkg.Build(in.Request.Messages, r.prompt.Keep, m.SystemPrompt)
	if rep := in.State.Shape.Repair; rep != "" {
		sent = append(sent, request.Message{Role: request.RoleUser, Content: rep})
	}
	p.Fingerprint = fingerprint(in.Request, m.Name, sent, in.State.Shape)
	p.Resends = max(callstate.MaxRequests(a.cfg)-p.State.Attempts(), 0)
	p.Prompt = *r.prompt
	p.Hedge = a.hedgePlan(in, m, p.State)
	if p.Hedge == nil && !in.Only && !a.without[guard.RuleOverdue] {
		p.Hedge = overduePlan(m, p.State, callstate.MaxRequests(a.cfg))
	}
	if p.Delay > 0 {
		p.Hedge = nil // a last chance: no rung to race it on, no time to race it
	}
}
