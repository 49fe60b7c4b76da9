package guard

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestRungRulesAreThePagesOrder: the table Weigh applies is the page's
// rules before a send, in the page's order; the others of that moment are
// decided by Weigh's last step (last-chance), PastOpen and Wait.
func TestRungRulesAreThePagesOrder(t *testing.T) {
	var table, page []RuleName
	for _, r := range rungRules {
		table = append(table, r.name)
	}
	for _, r := range Rules {
		if r.Moment == BeforeSend && !slices.Contains([]RuleName{RuleLastChance, RulePastOpen, RuleWait}, r.Name) {
			page = append(page, r.Name)
		}
	}
	if !slices.Equal(table, page) {
		t.Fatalf("Weigh applies %v, the page says %v", table, page)
	}
}

// healthyRung is a rung every rule lets through at once.
func healthyRung() Rung {
	return Rung{Model: "m", Endpoint: "e", Permit: true, FirstTokenTime: 2 * time.Second, Charge: ChargeRequest}
}

// TestWeighEachRuleDecides: each rule before a send decides as the page
// says, and names itself.
func TestWeighEachRuleDecides(t *testing.T) {
	now := time.Unix(1000, 0)
	call := Call{First: true, CanWait: 10 * time.Second, Window: 12 * time.Second, WaitLeft: math.MaxInt64}
	cases := []struct {
		name string
		call func(*Call)
		rung func(*Rung)
		want Verdict
	}{
		{"healthy: sent at once", nil, nil, Verdict{}},
		{"a missing capability skips", nil, func(r *Rung) { r.Lacks = "tools" },
			Verdict{Rule: RuleCapability, Skip: true, Reason: "m lacks tools, which the request needs: no upstream call made"}},
		{"an open breaker skips, as breaker_open", nil, func(r *Rung) { r.Permit, r.Breaker = false, BreakerOpen },
			Verdict{Rule: RuleBreaker, Skip: true, Class: failure.BreakerOpen, Reason: "breaker open: no upstream call made"}},
		{"past open, the breaker is set aside", func(c *Call) { c.PastOpen = true }, func(r *Rung) { r.Permit = false }, Verdict{}},
		{"every key parked skips", nil, func(r *Rung) { r.KeyParked = true },
			Verdict{Rule: RuleKey, Skip: true, Reason: "every key of m is parked after a refusal: no upstream call made"}},
		{"ejected, another rung answers: skipped for it", nil, func(r *Rung) {
			r.Sick, r.NextProbe, r.Answering = Refusing, now.Add(time.Second), "b"
		}, Verdict{Rule: RuleOutlier, Skip: true, Reason: "e is not answering (refusing): ejected, next probe in 1.00 s; b's endpoint answers: no upstream call made"}},
		{"ejected, no other rung: waits for the probe", nil, func(r *Rung) { r.Sick, r.NextProbe = Refusing, now.Add(time.Second) },
			Verdict{Rule: RuleOutlier, Skip: true, WaitProbe: true, Reason: "e is not answering (refusing): ejected, next probe in 1.00 s: no upstream call made"}},
		{"ejection passed: this request is the probe", nil, func(r *Rung) { r.Sick, r.NextProbe, r.Answering = Refusing, now, "b" },
			Verdict{Probe: true}},
		{"a hedge never goes to an ejected endpoint", func(c *Call) { c.Only = true }, func(r *Rung) { r.Sick, r.NextProbe = Refusing, now },
			Verdict{Rule: RuleOutlier, Skip: true, Reason: "e is not answering (refusing): ejected: no upstream call made"}},
		{"silent, no other rung, its first-token time left: sent", func(c *Call) { c.CanWait = LastChance + time.Second },
			func(r *Rung) { r.Sick, r.NextProbe = Silent, now.Add(time.Minute) }, Verdict{}},
		{"refusing, no other rung, the wait ends: its last chance, as late as it answers",
			func(c *Call) { c.CanWait = LastChance - time.Second },
			func(r *Rung) {
				r.Sick, r.NextProbe, r.AnswerTime, r.AnswerKnown = Refusing, now.Add(time.Minute), 3*time.Second, true
			},
			Verdict{Last: true, Delay: 9 * time.Second, Rule: RuleLastChance}},
		{"held, another rung unheld: skipped for it", nil, func(r *Rung) {
			r.HoldLeft, r.Release, r.HeldScope, r.Unheld = 2*time.Second, 3*time.Second, "e", "b"
		}, Verdict{Rule: RuleHold, Skip: true, Reason: "rate-limit hold on e for 2.00 s; b takes the call now"}},
		{"held, no other rung: put off to the drawn release", nil, func(r *Rung) {
			r.HoldLeft, r.Release, r.HeldScope = 2*time.Second, 3*time.Second, "e"
		}, Verdict{Rule: RuleHold, PutOff: true, Left: 3 * time.Second, Scope: "e", Why: "rate-limit hold on e"}},
		{"held past the wait, a first request: its last chance", nil, func(r *Rung) {
			r.HoldLeft, r.Release, r.HeldScope = 9*time.Second, 9*time.Second, "e"
		}, Verdict{Last: true, Scope: "e"}},
		{"held past the wait, a retry: skipped", func(c *Call) { c.First = false }, func(r *Rung) {
			r.HoldLeft, r.Release, r.HeldScope = 11*time.Second, 11*time.Second, "e"
		}, Verdict{Rule: RuleHold, Skip: true, Reason: "rate-limit hold on e for 11.00 s: longer than the call can wait"}},
		{"paced: sent after its turn", nil, func(r *Rung) { r.Paced, r.PaceWait = "60 rpm on e", time.Second },
			Verdict{Rule: RulePace, Left: time.Second, Why: "paced to 60 rpm on e"}},
		{"paced past the wait: skipped", nil, func(r *Rung) { r.Paced, r.PaceWait = "60 rpm on e", 11*time.Second },
			Verdict{Rule: RulePace, Skip: true, Reason: "paced to 60 rpm on e: its turn comes later than the call can wait"}},
		{"a hedge whose turn is away: skipped, nothing booked", func(c *Call) { c.Only = true },
			func(r *Rung) { r.Paced, r.PaceWait = "60 rpm on e", time.Second },
			Verdict{Rule: RulePace, Skip: true, Reason: "paced to 60 rpm on e: its turn is 1.00 s away, and a hedge never waits"}},
		{"a retry the budget refuses: skipped", nil, func(r *Rung) { r.Charge = ChargeRetry },
			Verdict{Rule: RuleBudget, Skip: true, SpentWhy: "retry budget of e spent", Reason: "retry budget of e spent: no upstream call made"}},
		{"a retry the budget pays: sent", nil, func(r *Rung) { r.Charge, r.RetryOK = ChargeRetry, true }, Verdict{}},
		{"without the budget, a refused retry is sent", func(c *Call) { c.Without = RuleSet([]RuleName{RuleBudget}) },
			func(r *Rung) { r.Charge = ChargeRetry }, Verdict{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call, r := call, healthyRung()
			if c.call != nil {
				c.call(&call)
			}
			if c.rung != nil {
				c.rung(&r)
			}
			if got := Weigh(call, r, now); got != c.want {
				t.Errorf("Weigh = %+v\nwant     %+v", got, c.want)
			}
		})
	}
}

// TestWaitAndPastOpen: with no rung left, a call waits a drawn step while
// its deadline and call.max_wait allow; a first request behind open
// breakers keeps its first-token time and then goes past them; a call
// waiting for a probe rechecks last just inside its last chance.
func TestWaitAndPastOpen(t *testing.T) {
	c := Call{First: true, CanWait: 10 * time.Second, WaitLeft: math.MaxInt64}
	open := Blocked{Open: []string{"a"}, OpenFirstToken: 2 * time.Second}
	if got := Wait(c, open, 0.5); got != RecheckMin+RecheckSpread/2 {
		t.Errorf("a call behind an open breaker waits %v, want %v", got, RecheckMin+RecheckSpread/2)
	}
	if got := Wait(c, Blocked{}, 0.5); got != 0 {
		t.Errorf("nothing blocked, yet a wait of %v", got)
	}
	capped := c
	capped.WaitLeft = 50 * time.Millisecond
	if got := Wait(capped, open, 0.5); got != 0 {
		t.Errorf("call.max_wait spent, yet a wait of %v", got)
	}
	late := c
	late.CanWait = 2*time.Second + 50*time.Millisecond
	if got := Wait(late, open, 0.5); got != 0 || !PastOpen(late, open) {
		t.Errorf("a first request whose wait leaves only its first-token time: wait %v, past open %v; want 0, true", got, PastOpen(late, open))
	}
	retry := late
	retry.First = false
	if PastOpen(retry, open) {
		t.Error("a retry went past open breakers")
	}
	probe := Blocked{Ejected: []string{"a"}}
	near := c
	near.CanWait = LastChance + 200*time.Millisecond
	if got, want := Wait(near, probe, 0.5), 200*time.Millisecond+LastChanceEarly; got != want {
		t.Errorf("waiting for a probe near the end: step %v, want %v (just inside the last chance)", got, want)
	}
	if got := Wait(Call{Only: true, CanWait: time.Minute, WaitLeft: time.Minute}, open, 0.5); got != 0 {
		t.Errorf("a hedge waited %v", got)
	}
}

// TestFormatDurationWords: reasons read whole milliseconds.
func TestFormatDurationWords(t *testing.T) {
	for d, want := range map[time.Duration]string{750 * time.Millisecond: "750 ms", 1500 * time.Millisecond: "1.50 s"} {
		if got := FormatDuration(d); !strings.EqualFold(got, want) {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
