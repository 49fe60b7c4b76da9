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
