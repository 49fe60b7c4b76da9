package guard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOpenNamesTheRuleThatKeepsOrCutsARequest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(9 * time.Second) // past an 8 s first-token timeout
	due := t0.Add(15 * time.Second)
	for _, c := range []struct {
		name    string
		o       Overdue
		cut     bool
		rule    RuleName
		race    bool
		recheck time.Duration
	}{
		{"kept, nothing to ask: looked at again only at its end", Overdue{Since: t0}, false, RuleOverdue, false, 0},
		{"kept and raced while notes are left", Overdue{Since: t0, MayRace: true}, false, RuleOverdue, true, OverdueRecheck},
		{"within the grace, looked at again at its deadline", Overdue{Since: t0, Deadline: now.Add(100 * time.Millisecond), Grace: true},
			false, RuleOverdue, false, 100 * time.Millisecond},
		{"a race's recheck never passes the deadline", Overdue{Since: t0, Deadline: now.Add(100 * time.Millisecond), Grace: true, MayRace: true},
			false, RuleOverdue, true, 100 * time.Millisecond},
		{"cut where the fallback's time begins", Overdue{Since: t0, Deadline: now, Grace: true, MayRace: true}, true, RuleGrace, false, 0},
		{"a deadline without grace is the timeout's: not cut here", Overdue{Since: t0, Deadline: now}, false, RuleOverdue, false, 0},
		{"stops on disconnect, p90 past the deadline: cut to free the slot",
			Overdue{Since: t0, Deadline: due, StopsOnDisconnect: true, Model: "m", P90: 16 * time.Second, Samples: MinSamples, Where: "on this worker"},
			true, RuleGrace, false, 0},
		{"too few samples to trust the p90: kept, rechecked",
			Overdue{Since: t0, Deadline: due, StopsOnDisconnect: true, P90: 16 * time.Second, Samples: MinSamples - 1},
			false, RuleOverdue, false, OverdueRecheck},
		{"stops on disconnect, p90 within the deadline: kept, rechecked",
			Overdue{Since: t0, Deadline: due, StopsOnDisconnect: true, P90: 10 * time.Second, Samples: MinSamples},
			false, RuleOverdue, false, OverdueRecheck},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Open(c.o, now)
			if v.Cut != c.cut || v.Rule != c.rule || v.Race != c.race || v.Recheck != c.recheck {
				t.Fatalf("Open = %+v, want cut %v rule %s race %v recheck %v", v, c.cut, c.rule, c.race, c.recheck)
			}
			if v.Cut != strings.HasPrefix(v.Why, "cut: ") {
				t.Errorf("a cut says why, and only a cut: %q", v.Why)
			}
		})
	}
}

// TestRaceToOtherEndpointsFirst: rule overdue races on another endpoint
// that answers in time or has nothing overdue, before its own endpoint;
// there only with a retry left and while it accepts at least 1/AcceptsK of
// its recent requests; never on an ejected, incapable or open rung.
func TestRaceToOtherEndpointsFirst(t *testing.T) {
	own := RaceRung{Model: "own", Own: true, Usable: true, AnsweredSince: true, BudgetLeft: true, Sent: 4, Answered: 2}
	other := RaceRung{Model: "other", Usable: true}
	for _, c := range []struct {
		name  string
		rungs []RaceRung
		want  []string
		why   string
	}{
		{"another endpoint first, then its own", []RaceRung{own, other}, []string{"other", "own"},
			"another endpoint, none of whose requests is overdue"},
		{"another endpoint with a request overdue is passed",
			[]RaceRung{own, {Model: "other", Usable: true, Overdue: true}}, []string{"own"},
			"its endpoint answers requests sent after it in time"},
		{"another endpoint that answered since goes though one is overdue",
			[]RaceRung{{Model: "other", Usable: true, Overdue: true, AnsweredSince: true}}, []string{"other"}, "that endpoint answers in time"},
		{"its own endpoint, silent since: no race", []RaceRung{{Model: "own", Own: true, Usable: true, BudgetLeft: true}}, nil, ""},
		{"its own endpoint, budget spent", []RaceRung{{Model: "own", Own: true, Usable: true, AnsweredSince: true}}, nil, ""},
		{"its own endpoint, losing most requests",
			[]RaceRung{{Model: "own", Own: true, Usable: true, AnsweredSince: true, BudgetLeft: true, Sent: 5, Answered: 2}}, nil, ""},
		{"not usable: ejected, incapable or open", []RaceRung{{Model: "other"}}, nil, ""},
	} {
		got, why := RaceTo(c.rungs)
		if !slices.Equal(got, c.want) || why != c.why {
			t.Errorf("%s: RaceTo = %v, %q; want %v, %q", c.name, got, why, c.want, c.why)
		}
	}
}

// TestHedgeOnlyTheFirstRequestAfterItsDelay: rule hedge races only a
// call's first request, on another model that can serve it, after the
// fixed delay, or AdaptiveMargin × the p90 once MinSamples are known.
func TestHedgeOnlyTheFirstRequestAfterItsDelay(t *testing.T) {
	base := HedgeFacts{FirstRequest: true, On: true, Fixed: 2 * time.Second, Initial: 3 * time.Second,
		Model: "big", HedgeModel: "small", HedgeAble: true, P90: 800 * time.Millisecond, Where: "on this worker"}
	with := func(f func(*HedgeFacts)) HedgeFacts { h := base; f(&h); return h }
	cases := []struct {
		name  string
		f     HedgeFacts
		after time.Duration
		basis string
		ok    bool
	}{
		{"a fixed delay", base, 2 * time.Second, "fixed", true},
		{"not a retry", with(func(h *HedgeFacts) { h.FirstRequest = false }), 0, "", false},
		{"not when the scenario has none", with(func(h *HedgeFacts) { h.On = false }), 0, "", false},
		{"not onto the attempt's own model", with(func(h *HedgeFacts) { h.HedgeModel = "big" }), 0, "", false},
		{"not onto a model that lacks what the request needs", with(func(h *HedgeFacts) { h.HedgeAble = false }), 0, "", false},
		{"adaptive, too few samples: the initial delay", with(func(h *HedgeFacts) { h.Adaptive, h.Samples = true, MinSamples-1 }),
			3 * time.Second, fmt.Sprintf("initial: %d first tokens of big on record", MinSamples-1), true},
		{"adaptive: the margin over the p90", with(func(h *HedgeFacts) { h.Adaptive, h.Samples = true, MinSamples }),
			time.Duration(float64(800*time.Millisecond) * AdaptiveMargin),
			fmt.Sprintf("1.5 × p90 800 ms of %d first tokens of big on this worker", MinSamples), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			after, basis, ok := Hedge(c.f)
			if after != c.after || basis != c.basis || ok != c.ok {
				t.Fatalf("Hedge = %v, %q, %v; want %v, %q, %v", after, basis, ok, c.after, c.basis, c.ok)
			}
		})
	}
}
