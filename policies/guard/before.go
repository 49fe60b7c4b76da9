package guard

import (
	"fmt"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// Call is what a walk down the ladder read of the call before a send.
type Call struct {
	// Only: a hedge, which goes to its own rung or nowhere and never
	// waits.
	Only bool
	// First: the request would be the call's first upstream request, so
	// it keeps its last chance (rule last-chance).
	First bool
	// PastOpen: the walk sets the breakers aside (rule past-open).
	PastOpen bool
	// CanWait is how long the call may still wait, the time one attempt
	// needs and the fallback's reserve kept; Window is how long it has
	// before the fallback must begin.
	CanWait, Window time.Duration
	// WaitLeft is what call.max_wait leaves of the call's waits
	// (math.MaxInt64 without a cap).
	WaitLeft time.Duration
	// Tenant and TenantShare word a refusal of the tenant's share.
	Tenant      string
	TenantShare float64
	// Without are the rules a measurement removed (bench -without).
	Without map[RuleName]bool
}

// Charge is what a request costs its endpoint's retry budget.
type Charge int

const (
	// ChargeRequest: the call's first request to the endpoint, its
	// ordinary load; it earns the budget its share of a retry.
	ChargeRequest Charge = iota
	// ChargeNone: paid when first prepared (a request still unsent, the
	// resend of an attempt lost with its worker).
	ChargeNone
	// ChargeRetry: any other request is a retry the budget pays, in turn.
	ChargeRetry
)

// Rung is what the walk read of one rung: the facts the rules before a
// send weigh. Reading them claims nothing; the walk claims the probe, the
// pace's turn and the retry only for the rung it sends.
type Rung struct {
	Model string
	// Endpoint is the rung's endpoint as tenants read it.
	Endpoint string
	// Lacks words the capabilities the request needs that the model
	// lacks ("" when none).
	Lacks string
	// Breaker is the model's breaker state; Permit whether it lets the
	// attempt be planned.
	Breaker BreakerState
	Permit  bool
	// KeyParked: every key of the model's pool is parked.
	KeyParked bool
	// Sick is the endpoint's ejection; NextProbe when its next probe may
	// go.
	Sick      Sickness
	NextProbe time.Time
	// FirstTokenTime is how long a request to it may take to start
	// answering; AnswerTime how long to answer whole (known when
	// measured), which its last chance keeps.
	FirstTokenTime time.Duration
	AnswerTime     time.Duration
	AnswerKnown    bool
	// Answering is a model of another rung the call could take, on an
	// endpoint that is not ejected, with its breaker not open; Unheld
	// one that no rate limit holds either ("" when there is none).
	Answering, Unheld string
	// HoldLeft is how long its rate-limit scope is still held; Release
	// the jittered wait for it (Jittered); HeldScope the scope as
	// tenants read it.
	HoldLeft, Release time.Duration
	HeldScope         string
	// Paced words its pace (limits on a scope; "" when not paced);
	// PaceWait is how long its turn is away.
	Paced    string
	PaceWait time.Duration
	// Charge is what the request costs the budget; for a retry,
	// RetryOK whether the budget pays it now, Capped whether the
	// tenant's share refuses it, Ahead how many calls in line come first.
	Charge  Charge
	RetryOK bool
	Capped  bool
	Ahead   int
}

// Verdict is the rules' decision of one rung before a send: skip it
// (Skip, by Rule, with Reason), put the call off (PutOff, rule hold: it
// waits Left and weighs its rungs again), or send it, after Left (a hold
// or the pace's turn, Rule) or after Delay (rule last-chance).
type Verdict struct {
	Rule   RuleName
	Skip   bool
	Reason string
	// Class is what a skip counts against the model (breaker_open for an
	// open breaker).
	Class failure.Class
	// WaitProbe: skipped to wait for the endpoint's probe (no other rung
	// answers).
	WaitProbe bool
	// SpentWhy words a budget's refusal for the wait's reason.
	SpentWhy string

	PutOff bool
	Left   time.Duration
	Scope  string // the held scope, as tenants read it
	Why    string // why the request is put off

	// Probe: the request is the ejected endpoint's probe.
	Probe bool
	// Last: the call's last chance; Delay when it goes.
	Last  bool
	Delay time.Duration
}

// rungRules are the rules before a send that weigh one rung, in Rules'
// order; each returns true when it skipped the rung (a put-off ends the
// weighing too).
var rungRules = []struct {
	name  RuleName
	apply func(Call, Rung, time.Time, *Verdict) bool
}{
	{RuleCapability, lacksCapability},
	{RuleBreaker, breakerOpen},
	{RuleKey, keysParked},
	{RuleOutlier, ejected},
	{RuleHold, held},
	{RulePace, paced},
	{RuleBudget, budgetSpent},
}

// Weigh decides rung r for call c at now by the rules before a send
// (rungRules, then rule last-chance's delay). It is pure: the walk reads
// r and claims what the verdict sends.
func Weigh(c Call, r Rung, now time.Time) Verdict {
	var v Verdict
	for _, rule := range rungRules {
		if rule.apply(c, r, now, &v) || v.PutOff {
			return v
		}
	}
	if v.Left == 0 && v.Last && r.AnswerKnown {
		v.Delay, v.Rule = LastChanceDelay(c.Window, r.AnswerTime), RuleLastChance
	}
	return v
}

// LastChanceDelay is when a waiting call's last request goes, window
// before the fallback must begin: as late as it can still answer, need
// (at least MinAttemptTime) before then, inside the fallback's reserve,
// where rule grace keeps an open request for the same reason.
func LastChanceDelay(window, need time.Duration) time.Duration {
	return max(window-max(need, MinAttemptTime), 0)
}

// skip makes v a skip by rule.
func (v *Verdict) skip(rule RuleName, class failure.Class, reason string) bool {
	*v = Verdict{Rule: rule, Skip: true, Class: class, Reason: reason}
	return true
}

// unsent makes v a skip by rule whose reason says that no request went.
func (v *Verdict) unsent(rule RuleName, class failure.Class, reason string) bool {
	return v.skip(rule, class, reason+": no upstream call made")
}

func lacksCapability(_ Call, r Rung, _ time.Time, v *Verdict) bool {
	if r.Lacks == "" {
		return false
	}
	return v.unsent(RuleCapability, failure.None, fmt.Sprintf("%s lacks %s, which the request needs", r.Model, r.Lacks))
}

func breakerOpen(c Call, r Rung, _ time.Time, v *Verdict) bool {
	if c.PastOpen || c.Without[RuleBreaker] || r.Permit {
		return false
	}
	return v.unsent(RuleBreaker, failure.BreakerOpen, fmt.Sprintf("breaker %s", r.Breaker))
}

func keysParked(_ Call, r Rung, _ time.Time, v *Verdict) bool {
	if !r.KeyParked {
		return false
	}
	return v.unsent(RuleKey, failure.None, fmt.Sprintf("every key of %s is parked after a refusal", r.Model))
}

// ejected: a request goes while its endpoint answers, or as the
// endpoint's probe. Otherwise it is skipped for a rung whose endpoint
// answers or, without one, to wait for the probe; a silent endpoint gets
// the request once the call's wait leaves no more than its first-token
// time after LastChance (as a plain client would send it: it may answer
// late), a refusing one at the call's last chance. A hedge never goes to
// an ejected endpoint.
func ejected(c Call, r Rung, now time.Time, v *Verdict) bool {
	if c.Without[RuleOutlier] || r.Sick == Healthy {
		return false
	}
	why := fmt.Sprintf("%s is not answering (%s): ejected", r.Endpoint, r.Sick)
	switch {
	case c.Only:
		return v.unsent(RuleOutlier, failure.None, why)
	case r.Answering == "" && r.Sick == Silent && c.CanWait-r.FirstTokenTime < LastChance:
		return false
	case !now.Before(r.NextProbe):
		v.Probe = true
		return false
	case r.Answering == "" && c.CanWait < LastChance && !c.Without[RuleLastChance]:
		// Its wait ends: the request goes as late as it can still answer,
		// when the refusal is likeliest over. A first request goes as a
		// plain client's would; a resend only as the retry budget pays.
		v.Last = true
		return false
	}
	why += ", next probe in " + FormatDuration(max(r.NextProbe.Sub(now), 0))
	if r.Answering != "" {
		return v.unsent(RuleOutlier, failure.None, why+"; "+r.Answering+"'s endpoint answers")
	}
	v.unsent(RuleOutlier, failure.None, why)
	v.WaitProbe = true
	return true
}

// held: a held rung is skipped while a rung on another endpoint, answering
// and not held, takes the call now. Otherwise the hold puts the call off
// until its drawn release, when it weighs its rungs again; a release past
// what the call can wait skips the rung, unless the request is the call's
// first: that goes now, as its last chance. A hedge never waits.
func held(c Call, r Rung, _ time.Time, v *Verdict) bool {
	if c.Without[RuleHold] || r.HoldLeft <= 0 {
		return false
	}
	v.Scope = r.HeldScope
	left := FormatDuration(r.HoldLeft)
	switch {
	case c.Only:
		return v.skip(RuleHold, failure.None, fmt.Sprintf("rate-limit hold on %s for %s", r.HeldScope, left))
	case r.Unheld != "":
		return v.skip(RuleHold, failure.None, fmt.Sprintf("rate-limit hold on %s for %s; %s takes the call now", r.HeldScope, left, r.Unheld))
	}
	last := c.First && !c.Without[RuleLastChance]
	room := c.CanWait
	if last {
		room -= LastChance // a timer that fires late still finds the call in time for it
	}
	switch {
	case r.Release <= room:
		v.PutOff, v.Left, v.Why, v.Rule = true, r.Release, "rate-limit hold on "+r.HeldScope, RuleHold
		return false
	case last:
		v.Last = true
		return false
	}
	return v.skip(RuleHold, failure.None, fmt.Sprintf("rate-limit hold on %s for %s: longer than the call can wait", r.HeldScope, left))
}

// paced: a paced rung's request waits its turn, and is skipped when the
// turn comes later than the call can wait; a hedge never waits (a hedge
// sent later is no sooner), so it is skipped before it books a turn or
// pays a retry.
func paced(c Call, r Rung, _ time.Time, v *Verdict) bool {
	switch {
	case r.Paced == "":
		return false
	case c.Only && r.PaceWait > 0:
		return v.skip(RulePace, failure.None, fmt.Sprintf("paced to %s: its turn is %s away, and a hedge never waits", r.Paced, FormatDuration(r.PaceWait)))
	case r.PaceWait > c.CanWait:
		return v.skip(RulePace, failure.None, fmt.Sprintf("paced to %s: its turn comes later than the call can wait", r.Paced))
	case r.PaceWait > v.Left:
		v.Left, v.Why, v.Rule = r.PaceWait, "paced to "+r.Paced, RulePace
	}
	return false
}

func budgetSpent(c Call, r Rung, _ time.Time, v *Verdict) bool {
	if c.Without[RuleBudget] || r.Charge != ChargeRetry || r.RetryOK {
		return false
	}
	// Spent by other calls since this call's step was decided, or left to
	// calls that have waited longer, or this tenant took its share while
	// others are calling.
	why := fmt.Sprintf("retry budget of %s spent", r.Endpoint)
	switch {
	case r.Capped:
		why = fmt.Sprintf("tenant %q took its share (%.0f%%) of the retry budget of %s while other tenants call",
			c.Tenant, c.TenantShare*100, r.Endpoint)
	case r.Ahead > 0:
		why = fmt.Sprintf("retry budget of %s: its retries left go to calls that have waited longer", r.Endpoint)
	}
	v.unsent(RuleBudget, failure.None, why)
	v.SpentWhy = why
	return true
}

// Blocked is what kept every rung from a call: the models behind open
// breakers (Open, in ladder order; OpenFirstToken is the first one's
// first-token time), on spent budgets, and on ejected endpoints.
type Blocked struct {
	Open, Spent, Ejected []string
	OpenFirstToken       time.Duration
}

// Wait is rule wait: how long a call whose every rung is blocked waits
// before it weighs its rungs again (0: it does not wait). It waits a step
// of RecheckMin + u·RecheckSpread at a time, within call.max_wait and its
// deadline; a first request keeps its first-token time for the send past
// the open breakers, and a call waiting for a probe rechecks last just
// inside LastChance, where its last chance goes.
func Wait(c Call, b Blocked, u float64) time.Duration {
	if c.Only || len(b.Open)+len(b.Spent)+len(b.Ejected) == 0 || c.Without[RuleWait] {
		return 0
	}
	canWait := c.CanWait
	if len(b.Open) > 0 && c.First {
		canWait -= b.OpenFirstToken
	}
	step := min(RecheckMin+time.Duration(u*float64(RecheckSpread)), c.WaitLeft, canWait)
	if len(b.Ejected) > 0 && canWait-step < LastChance && !c.Without[RuleLastChance] {
		// As early in the window as it can, so a timer that fires late
		// still finds time.
		step = canWait - LastChance + LastChanceEarly
	}
	if step < MinWait {
		return 0
	}
	return step
}

// PastOpen is rule past-open: a call whose every rung is behind an open
// breaker, its wait spent, sends its first request as a plain client's
// would, with the breakers set aside.
func PastOpen(c Call, b Blocked) bool {
	return !c.PastOpen && len(b.Open) > 0 && c.First && !c.Without[RulePastOpen]
}

// FormatDuration words d for a reason: "750 ms", "1.50 s".
func FormatDuration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.2f s", float64(ms)/1000)
}
