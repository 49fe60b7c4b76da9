package rules

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
)

func TestJudge(t *testing.T) {
	h, m := config.RuleHandoff, config.RuleSafeMessage
	for _, tc := range []struct {
		action config.RuleAction
		o      Outcome
		fired  bool
		want   Judgment
	}{
		{h, Resolved, true, Good}, {m, Resolved, true, Good},
		{h, HandoffRequested, true, Good}, {m, HandoffRequested, true, Bad},
		{h, Abandoned, true, Bad}, {m, Abandoned, true, Bad},
		{h, Complaint, true, Bad}, {m, Complaint, true, Bad},
		{h, Resolved, false, Bad}, {m, Resolved, false, Bad},
		{h, HandoffRequested, false, Good}, {m, HandoffRequested, false, Neutral},
		{h, Abandoned, false, Good}, {m, Abandoned, false, Good},
		{h, Complaint, false, Good}, {config.RuleNoRetry, Complaint, false, Good},
	} {
		require.Equal(t, tc.want, Judge(tc.action, tc.o, tc.fired), "%s %s fired=%v", tc.action, tc.o, tc.fired)
	}
}

func TestParseOutcome(t *testing.T) {
	for _, o := range Outcomes {
		got, err := ParseOutcome(string(o))
		require.NoError(t, err)
		require.Equal(t, o, got)
	}
	_, err := ParseOutcome("happy")
	require.EqualError(t, err, `unknown outcome "happy": want one of resolved, abandoned, handoff_requested, complaint`)
}

func TestTallyPrecisionIsBetaMean(t *testing.T) {
	for _, tc := range []struct {
		t    Tally
		want float64
	}{
		{Tally{}, 0.5}, {Tally{Good: 1}, 2.0 / 3}, {Tally{Bad: 30}, 1.0 / 32}, {Tally{Good: 14, Bad: 16}, 15.0 / 32}, {Tally{Good: 15, Bad: 15}, 0.5},
	} {
		require.InDelta(t, tc.want, tc.t.Precision(), 1e-12, "%+v", tc.t)
	}
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func learning(min int) Learning {
	return Learning{MinFeedback: min, Rules: []Spec{
		{ID: "refund", Action: config.RuleSafeMessage, Threshold: 0.5},
		{ID: "er", Action: config.RuleHandoff, Pinned: true, Threshold: 0.5},
	}}
}

// step is one feedback of a script and the state of rule "refund" (and
// "er") after it.
type step struct {
	fb        Feedback
	times     int
	refund    State
	er        State
	changesTo []State
}

func fired(o Outcome) Feedback  { return Feedback{Outcome: o, Fired: "refund"} }
func shadow(o Outcome) Feedback { return Feedback{Outcome: o, Shadow: []string{"refund"}} }

// TestLedgerStateMachine steps a ledger through scripts of feedback: a
// rule goes off after MinFeedback bad feedbacks on calls it fired on,
// stays off until its shadow feedback says users needed it, and comes back
// on; a pinned rule never goes off.
func TestLedgerStateMachine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"29 bad feedbacks are not enough", []step{
			{fb: fired(Complaint), times: 29, refund: On, er: Pinned},
		}},
		{"the 30th bad feedback turns it off", []step{
			{fb: fired(Complaint), times: 29, refund: On, er: Pinned},
			{fb: fired(Abandoned), times: 1, refund: Off, er: Pinned, changesTo: []State{Off}},
		}},
		{"half good keeps it on (0.5 is not below 0.5)", []step{
			{fb: fired(Resolved), times: 15, refund: On, er: Pinned},
			{fb: fired(Complaint), times: 15, refund: On, er: Pinned},
		}},
		{"a sliding window: old good feedback ages out", []step{
			{fb: fired(Resolved), times: 100, refund: On, er: Pinned},
			{fb: fired(Complaint), times: 15, refund: On, er: Pinned},
			{fb: fired(Complaint), times: 1, refund: Off, er: Pinned, changesTo: []State{Off}},
		}},
		{"handoff_requested is bad for a safe message", []step{
			{fb: fired(HandoffRequested), times: 30, refund: Off, er: Pinned, changesTo: []State{Off}},
		}},
		{"off, users are served without it: stays off", []step{
			{fb: fired(Complaint), times: 30, refund: Off, er: Pinned, changesTo: []State{Off}},
			{fb: shadow(Resolved), times: 200, refund: Off, er: Pinned},
		}},
		{"off, users needed it: back on after a full shadow window", []step{
			{fb: fired(Complaint), times: 30, refund: Off, er: Pinned, changesTo: []State{Off}},
			{fb: shadow(Resolved), times: 100, refund: Off, er: Pinned},
			// the last 30 in shadow: 16 bad, 14 good → 15/32 < 0.5
			{fb: shadow(Abandoned), times: 14, refund: Off, er: Pinned},
			// 15 bad, 15 good → 16/32 = 0.5: back on
			{fb: shadow(Complaint), times: 1, refund: On, er: Pinned, changesTo: []State{On}},
			// the window restarted: 29 more bad ones do not turn it off
			{fb: fired(Complaint), times: 29, refund: On, er: Pinned},
			{fb: fired(Complaint), times: 1, refund: Off, er: Pinned, changesTo: []State{Off}},
		}},
		{"late feedback of the other kind only adds to the totals", []step{
			{fb: fired(Complaint), times: 30, refund: Off, er: Pinned, changesTo: []State{Off}},
			{fb: fired(Complaint), times: 100, refund: Off, er: Pinned},
			{fb: shadow(Abandoned), times: 30, refund: On, er: Pinned, changesTo: []State{On}},
			{fb: shadow(Abandoned), times: 100, refund: On, er: Pinned},
		}},
		{"shadow handoff_requested is neutral for a safe message", []step{
			{fb: fired(Complaint), times: 30, refund: Off, er: Pinned, changesTo: []State{Off}},
			{fb: shadow(HandoffRequested), times: 100, refund: Off, er: Pinned},
		}},
		{"a pinned rule is never turned off", []step{
			{fb: Feedback{Outcome: Complaint, Fired: "er"}, times: 500, refund: On, er: Pinned},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := learning(30)
			l, changes := Ledger{}.Sync(p, t0)
			require.Empty(t, changes)
			n := 0
			for i, s := range tc.steps {
				var got []State
				for range s.times {
					fb := s.fb
					fb.CallID = fmt.Sprintf("call-%d", n)
					n++
					var res Result
					l, res = l.Apply(p, fb, t0.Add(time.Duration(n)*time.Second))
					require.False(t, res.Duplicate)
					for _, c := range res.Changes {
						got = append(got, c.To)
					}
				}
				require.Equal(t, s.refund, l.Rules[0].State, "step %d: refund", i)
				require.Equal(t, s.er, l.Rules[1].State, "step %d: er", i)
				require.Equal(t, s.changesTo, got, "step %d: changes", i)
			}
		})
	}
}

func TestLedgerChangeSaysWhy(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	var res Result
	for i := range 30 {
		l, res = l.Apply(p, Feedback{CallID: fmt.Sprint(i), Outcome: Complaint, Fired: "refund"}, t0)
	}
	require.Len(t, res.Changes, 1)
	c := res.Changes[0]
	require.Equal(t, Change{Rule: "refund", From: On, To: Off, Precision: 1.0 / 32, N: 30, Threshold: 0.5,
		Reason: "precision 0.03 < 0.50 over its last 30 feedbacks on calls it fired on (0 good, 30 bad): evaluated in shadow until users need it"}, c)
	r := l.Rules[0]
	require.Equal(t, c.Reason, r.Reason)
	require.Equal(t, 1, r.Changes)
	require.Equal(t, "", r.Recent, "a change empties the window")
	require.Equal(t, Counts{Complaint: 30}, r.Fired)
	require.InDelta(t, 1.0/32, r.FiredPrecision(), 1e-12)
	require.Equal(t, []string{"refund"}, l.Off())
}

func TestLedgerPinnedReportsBelow(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	for i := range 30 {
		l, _ = l.Apply(p, Feedback{CallID: fmt.Sprint(i), Outcome: Abandoned, Fired: "er"}, t0)
	}
	require.Equal(t, Pinned, l.Rules[1].State)
	require.True(t, l.Rules[1].Below(30), "a pinned rule below its threshold is reported")
	require.False(t, l.Rules[0].Below(30))
}

func TestLedgerDuplicateCallIsIgnored(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	l, res := l.Apply(p, Feedback{CallID: "c1", Outcome: Complaint, Fired: "refund"}, t0)
	require.False(t, res.Duplicate)
	l2, res := l.Apply(p, Feedback{CallID: "c1", Outcome: Resolved, Fired: "refund"}, t0)
	require.True(t, res.Duplicate)
	require.Equal(t, Complaint, res.Previous)
	require.Equal(t, l, l2)
	require.Equal(t, Counts{Complaint: 1}, l2.Rules[0].Fired)
}

func TestLedgerRemembersAtMostMaxSeenCalls(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	for i := range MaxSeen + 10 {
		l, _ = l.Apply(p, Feedback{CallID: fmt.Sprint(i), Outcome: Resolved}, t0)
	}
	require.Len(t, l.Calls, MaxSeen)
	require.Equal(t, "10", l.Calls[0].CallID)
}

func TestLedgerUnknownRulesAreNotCounted(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	fb := Feedback{CallID: "c", Outcome: Resolved, Fired: "gone", Shadow: []string{"refund", "other"}}
	require.Equal(t, []string{"gone", "other"}, l.Unknown(fb))
	_, res := l.Apply(p, fb, t0)
	require.Equal(t, []string{"gone", "other"}, res.Unknown)
	require.Equal(t, []Counted{{Rule: "refund", Judgment: "bad", InWindow: false, State: On}}, res.Counted)
}

func TestLedgerSyncFollowsThePolicy(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	for i := range 30 {
		l, _ = l.Apply(p, Feedback{CallID: fmt.Sprint(i), Outcome: Complaint, Fired: "refund"}, t0)
	}
	require.Equal(t, Off, l.Rules[0].State)

	// refund becomes pinned, er is removed, a new rule comes
	p2 := Learning{MinFeedback: 30, Rules: []Spec{
		{ID: "new", Action: config.RuleNoRetry, Threshold: 0.6},
		{ID: "refund", Action: config.RuleSafeMessage, Pinned: true, Threshold: 0.5},
	}}
	l, changes := l.Sync(p2, t0.Add(time.Hour))
	require.Len(t, changes, 1)
	require.Equal(t, "refund", changes[0].Rule)
	require.Equal(t, Off, changes[0].From)
	require.Equal(t, Pinned, changes[0].To)
	require.Equal(t, []string{"new", "refund"}, []string{l.Rules[0].ID, l.Rules[1].ID})
	require.Equal(t, On, l.Rules[0].State)
	require.Equal(t, Pinned, l.Rules[1].State)
	require.Equal(t, Counts{Complaint: 30}, l.Rules[1].Fired, "the record is kept")

	// unpinned again: on
	l, changes = l.Sync(Learning{MinFeedback: 30, Rules: []Spec{{ID: "refund", Action: config.RuleSafeMessage, Threshold: 0.5}}}, t0)
	require.Len(t, changes, 1)
	require.Equal(t, On, l.Rules[0].State)
}

func TestLedgerRoundTripsAsJSON(t *testing.T) {
	p := learning(30)
	l, _ := Ledger{}.Sync(p, t0)
	for i := range 40 {
		l, _ = l.Apply(p, Feedback{CallID: fmt.Sprint(i), Outcome: Complaint, Fired: "refund"}, t0)
	}
	b, err := json.Marshal(l)
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), `"state":"off"`), string(b))
	var back Ledger
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, l, back)
}

func TestLearningFor(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Rules = []config.Rule{
		{ID: "a", Scenario: "Shop", Keywords: []string{"x"}, Action: config.RuleSafeMessage, MinPrecision: 0.7},
		{ID: "b", Keywords: []string{"x"}, Action: config.RuleHandoff, Pinned: true},
		{ID: "c", Scenario: "medical", Keywords: []string{"x"}, Action: config.RuleHandoff},
	}
	require.Equal(t, Learning{MinFeedback: 30, Rules: []Spec{
		{ID: "a", Action: config.RuleSafeMessage, Threshold: 0.7},
		{ID: "b", Action: config.RuleHandoff, Pinned: true, Threshold: 0.5},
	}}, LearningFor(cfg, " shop "))
	require.Equal(t, []Spec{{ID: "b", Action: config.RuleHandoff, Pinned: true, Threshold: 0.5}}, LearningFor(cfg, "").Rules)
}
