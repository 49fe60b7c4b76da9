package guard

import (
	"fmt"
	"time"
)

// Overdue is a streamed request past its first-token timeout, as the
// rules of a request while it is open read it (Open).
type Overdue struct {
	// Since is when it was sent; Deadline when it is cut (zero: its
	// timeout alone bounds it), FallbackTime before the call's deadline
	// when Grace (rule grace) is part of it.
	Since, Deadline time.Time
	Grace           bool
	// StopsOnDisconnect: its server stops generating when the client
	// leaves (`stops_on_disconnect`).
	StopsOnDisconnect bool
	// P90 of the model's time to first token, of Samples (Where says
	// whose: this worker's, or the fleet's).
	Model   string
	P90     time.Duration
	Samples int
	Where   string
	// MayRace: the call may race it and has overdue notes left (rule
	// overdue: at most MaxOverdueNotes).
	MayRace bool
}

// OpenVerdict is what the rules decide of an open request: cut it (Cut,
// with Why), or keep it, asking where a race could answer sooner (Race),
// and look again after Recheck (0: only at the request's own end).
type OpenVerdict struct {
	Cut     bool
	Why     string
	Race    bool
	Recheck time.Duration
	Rule    RuleName
}

// Open decides of request o at now, by rule grace (cut where the
// fallback's time begins, or where a server that stops on disconnect
// cannot start the answer in time) then rule overdue (keep, and race
// where the call may).
func Open(o Overdue, now time.Time) OpenVerdict {
	bounded := !o.Deadline.IsZero()
	if o.Grace && bounded && !now.Before(o.Deadline) {
		return OpenVerdict{Cut: true, Rule: RuleGrace, Why: "cut: no first token by the attempt's deadline"}
	}
	if o.StopsOnDisconnect && bounded && o.Samples >= MinSamples && o.Since.Add(o.P90).After(o.Deadline) {
		return OpenVerdict{Cut: true, Rule: RuleGrace, Why: fmt.Sprintf(
			"cut: %s's p90 time to first token %.2f s (%d %s) would pass the attempt's deadline, and its server stops on disconnect",
			o.Model, o.P90.Seconds(), o.Samples, o.Where)}
	}
	v := OpenVerdict{Rule: RuleOverdue, Race: o.MayRace}
	if o.MayRace || o.StopsOnDisconnect {
		// A race to ask for, or a p90 that may come to pass the deadline.
		v.Recheck = OverdueRecheck
	}
	if o.Grace && bounded && (v.Recheck == 0 || v.Recheck > o.Deadline.Sub(now)) {
		v.Recheck = o.Deadline.Sub(now) // back at the deadline, to cut there
	}
	return v
}

// RaceRung is what rule overdue reads of one rung when it looks where to
// race an open request.
type RaceRung struct {
	Model string
	// Own: on the open request's endpoint.
	Own bool
	// Usable: its endpoint is not ejected, its model has the request's
	// capabilities and its breaker is not open.
	Usable bool
	// AnsweredSince: its endpoint gave a first token in time to a
	// request sent after the open one.
	AnsweredSince bool
	// Overdue: a request open on its endpoint is past its first-token
	// time.
	Overdue bool
	// BudgetLeft: a retry is left in its endpoint's budget (a race on the
	// own endpoint is a retry there).
	BudgetLeft bool
	// Sent and Answered are the own endpoint's requests of the last
	// first_token_timeout ÷ AcceptsPart and those given a first token in
	// time.
	Sent, Answered int
}

// RaceTo is where rule overdue may race an open request, in order, and
// why the first could answer sooner: rungs on other endpoints first (the
// race goes where the call has nothing outstanding, Envoy's
// previous_hosts), each group in the ladder's order. Another endpoint
// qualifies when it answered in time a request sent after the open one,
// or has no request overdue; the own endpoint only when it answered such
// a request, with a retry left in its budget, and while it gives a first
// token to at least 1/AcceptsK of its recent requests (adaptive
// throttling: one that loses most would lose the race too, spending the
// retry).
func RaceTo(rungs []RaceRung) (models []string, why string) {
	var own []string
	ownWhy := ""
	for _, r := range rungs {
		w, ok := raceWhy(r)
		if !ok || !r.Usable || r.Own && (!r.BudgetLeft || AcceptsK*r.Answered < r.Sent) {
			continue
		}
		if r.Own {
			if len(own) == 0 {
				ownWhy = w
			}
			own = append(own, r.Model)
			continue
		}
		if len(models) == 0 {
			why = w
		}
		models = append(models, r.Model)
	}
	if len(models) == 0 {
		why = ownWhy
	}
	return append(models, own...), why
}

// raceWhy is why a race on r could answer sooner, if it could.
func raceWhy(r RaceRung) (string, bool) {
	switch {
	case r.AnsweredSince && r.Own:
		return "its endpoint answers requests sent after it in time", true
	case r.AnsweredSince:
		return "that endpoint answers in time", true
	case r.Own || r.Overdue:
		return "", false
	}
	return "another endpoint, none of whose requests is overdue", true
}

// HedgeFacts is what rule hedge reads of a call's attempt before it is
// sent.
type HedgeFacts struct {
	// FirstRequest: the attempt is the call's first request (only it is
	// hedged).
	FirstRequest bool
	// On: the call's scenario has a hedge (hedge.after not off); Fixed is
	// its delay unless Adaptive, Initial its delay (hedge.initial) while
	// Adaptive has too few samples.
	On, Adaptive   bool
	Fixed, Initial time.Duration
	// Model is the attempt's model; HedgeModel the hedge's, HedgeAble when
	// it has what the request needs.
	Model, HedgeModel string
	HedgeAble         bool
	// P90 of Model's time to first token, of Samples (Where says whose).
	P90     time.Duration
	Samples int
	Where   string
}

// Hedge is rule hedge: whether the attempt gets a hedge, after how long,
// and where that delay comes from ("fixed", the adaptive p90's basis, or
// "initial" before MinSamples). Not when the scenario has none, the
// attempt is not the call's first request, it already goes to the hedge
// model, or that model lacks what the request needs.
func Hedge(f HedgeFacts) (after time.Duration, basis string, ok bool) {
	if !f.FirstRequest || !f.On || f.HedgeModel == f.Model || !f.HedgeAble {
		return 0, "", false
	}
	switch {
	case !f.Adaptive:
		return f.Fixed, "fixed", true
	case f.Samples >= MinSamples:
		return time.Duration(float64(f.P90) * AdaptiveMargin), fmt.Sprintf("%g × p90 %s of %d first tokens of %s %s",
			AdaptiveMargin, FormatDuration(f.P90), f.Samples, f.Model, f.Where), true
	}
	return f.Initial, fmt.Sprintf("initial: %d first tokens of %s on record", f.Samples, f.Model), true
}
