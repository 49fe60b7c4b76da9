package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// Outcome is what the user did after a call.
type Outcome string

// The outcomes a caller reports.
const (
	// Resolved: the answer served the user.
	Resolved Outcome = "resolved"
	// Abandoned: the user gave up.
	Abandoned Outcome = "abandoned"
	// HandoffRequested: the user asked for a person.
	HandoffRequested Outcome = "handoff_requested"
	// Complaint: the user complained about the answer.
	Complaint Outcome = "complaint"
)

// Outcomes lists every outcome, in the order they are reported.
var Outcomes = []Outcome{Resolved, Abandoned, HandoffRequested, Complaint}

// ParseOutcome reads an outcome as a caller spells it ("resolved", …);
// anything else is an error that lists the valid ones.
func ParseOutcome(s string) (Outcome, error) {
	o := Outcome(strings.TrimSpace(s))
	if slices.Contains(Outcomes, o) {
		return o, nil
	}
	return "", fmt.Errorf("unknown outcome %q: want one of %s", s, outcomeList())
}

func outcomeList() string {
	names := make([]string, len(Outcomes))
	for i, o := range Outcomes {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// Judgment is what an outcome says of a rule.
type Judgment int

// Judgments.
const (
	// Neutral: the outcome says nothing about the rule.
	Neutral Judgment = iota
	// Good: the rule was right (it fired and served the user, or it did
	// not fire and the user would have needed it).
	Good
	// Bad: the rule was wrong (it fired and did not serve the user, or it
	// did not fire and the user was served without it).
	Bad
)

func (j Judgment) String() string {
	switch j {
	case Good:
		return "good"
	case Bad:
		return "bad"
	}
	return "neutral"
}

// Judge judges outcome o for a rule with action: fired on the call, or
// matched but off (shadow). handoff_requested is good for a handoff rule
// (the user wanted the person it gives) and bad for any other that fired
// (its answer did not serve); in shadow it is good for a handoff rule and
// neutral for the others (the user wanted a person, which the rule would
// not have given either).
//
//	outcome            fired: handoff  fired: other  shadow: handoff  shadow: other
//	resolved           good            good          bad              bad
//	handoff_requested  good            bad           good             neutral
//	abandoned          bad             bad           good             good
//	complaint          bad             bad           good             good
func Judge(action config.RuleAction, o Outcome, fired bool) Judgment {
	handoff := action == config.RuleHandoff
	switch o {
	case Resolved:
		if fired {
			return Good
		}
		return Bad
	case HandoffRequested:
		switch {
		case handoff:
			return Good
		case fired:
			return Bad
		}
		return Neutral
	case Abandoned, Complaint:
		if fired {
			return Bad
		}
		return Good
	}
	return Neutral
}

// State is a rule's learned state.
type State int

// States.
const (
	On State = iota
	Off
	Pinned
)

func (s State) String() string {
	switch s {
	case On:
		return "on"
	case Off:
		return "off"
	case Pinned:
		return "pinned"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// MarshalText writes the state as its name, so records read well as JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	for _, v := range []State{On, Off, Pinned} {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown rule state %q: want on, off or pinned", b)
}

// Spec is what the learner needs of a rule of the policy.
type Spec struct {
	ID        string            `json:"id"`
	Action    config.RuleAction `json:"action"`
	Pinned    bool              `json:"pinned,omitempty"`
	Threshold float64           `json:"threshold"`
}

// SpecOf is rule r's Spec under the policy's learn section.
func SpecOf(r config.Rule, l config.LearnConfig) Spec {
	return Spec{ID: r.ID, Action: r.Action, Pinned: r.Pinned, Threshold: r.Precision(l)}
}

// Learning is the policy a learner applies: the scenario's rules and the
// number of feedbacks a state change needs (learn.min_feedback).
type Learning struct {
	MinFeedback int    `json:"min_feedback"`
	Rules       []Spec `json:"rules"`
}

// LearningFor is the Learning of the rules that apply to calls of
// scenario (their scenario matches it, as at admission).
func LearningFor(cfg *config.Config, scenario string) Learning {
	l := Learning{MinFeedback: cfg.Learn.MinFeedback}
	for _, r := range cfg.Rules {
		if ruleScenarioMatches(r.Scenario, scenario) {
			l.Rules = append(l.Rules, SpecOf(r, cfg.Learn))
		}
	}
	return l
}

// Counts are feedbacks by outcome.
type Counts struct {
	Resolved         int `json:"resolved,omitempty"`
	Abandoned        int `json:"abandoned,omitempty"`
	HandoffRequested int `json:"handoff_requested,omitempty"`
	Complaint        int `json:"complaint,omitempty"`
}

func (c *Counts) add(o Outcome) {
	switch o {
	case Resolved:
		c.Resolved++
	case Abandoned:
		c.Abandoned++
	case HandoffRequested:
		c.HandoffRequested++
	case Complaint:
		c.Complaint++
	}
}

// Total is the number of feedbacks.
func (c Counts) Total() int { return c.Resolved + c.Abandoned + c.HandoffRequested + c.Complaint }

// Tally counts good and bad judgments.
type Tally struct {
	Good int `json:"good"`
	Bad  int `json:"bad"`
}

// N is the number of judged feedbacks.
func (t Tally) N() int { return t.Good + t.Bad }

// Precision is the Beta(1,1) posterior mean of the share of good
// judgments: (good+1)/(good+bad+2), 0.5 with no evidence.
func (t Tally) Precision() float64 { return float64(t.Good+1) / float64(t.N()+2) }

// tally judges counts for a rule with action.
func tally(action config.RuleAction, c Counts, fired bool) Tally {
	var t Tally
	for i, n := range []int{c.Resolved, c.Abandoned, c.HandoffRequested, c.Complaint} {
		switch Judge(action, Outcomes[i], fired) {
		case Good:
			t.Good += n
		case Bad:
			t.Bad += n
		}
	}
	return t
}

// Record is what a learner knows of one rule.
type Record struct {
	Spec
	State State `json:"state"`
	// Fired counts the feedbacks on calls the rule fired on, Shadow those
	// on calls it matched but did not fire on (it was off), since the
	// learner first heard of the rule.
	Fired  Counts `json:"fired"`
	Shadow Counts `json:"shadow"`
	// Recent are the judgments that can move the rule out of its state,
	// oldest first, at most MinFeedback: 'g' good, 'b' bad. While on or
	// pinned, of feedback on calls it fired on; while off, of feedback in
	// shadow. A change of state empties it.
	Recent string `json:"recent"`
	// Changes counts the changes of state; ChangedAt is the last one's
	// instant (the learner's start for a rule that never changed), Reason
	// says why the rule is in its state.
	Changes   int       `json:"changes"`
	ChangedAt time.Time `json:"changed_at"`
	Reason    string    `json:"reason"`
}

// Window is the tally of Recent.
func (r Record) Window() Tally {
	g := strings.Count(r.Recent, "g")
	return Tally{Good: g, Bad: len(r.Recent) - g}
}

// Precision is the estimate the state machine looks at: over Recent (the
// firing precision while on or pinned, the shadow precision while off).
func (r Record) Precision() float64 { return r.Window().Precision() }

// FiredPrecision is the precision over every feedback on calls the rule
// fired on.
func (r Record) FiredPrecision() float64 { return tally(r.Action, r.Fired, true).Precision() }

// Below reports whether a pinned rule's precision is below its threshold
// over a full window: it would be off if it were not pinned.
func (r Record) Below(minFeedback int) bool {
	return r.State == Pinned && len(r.Recent) >= minFeedback && r.Precision() < r.Threshold
}

// Seen is a call whose feedback a learner counted.
type Seen struct {
	CallID  string  `json:"call_id"`
	Outcome Outcome `json:"outcome"`
}

// MaxSeen is how many calls a Ledger remembers to ignore a second feedback
// for the same call.
const MaxSeen = 4096

// Ledger is a learner's state: a record per rule, in the policy's order,
// and the last calls it counted.
type Ledger struct {
	Rules []Record `json:"rules"`
	Calls []Seen   `json:"calls,omitempty"`
}

// Change is a change of a rule's state.
type Change struct {
	Rule      string  `json:"rule"`
	From      State   `json:"from"`
	To        State   `json:"to"`
	Precision float64 `json:"precision"`
	N         int     `json:"n"`
	Threshold float64 `json:"threshold"`
	Reason    string  `json:"reason"`
}

func (c Change) String() string {
	return fmt.Sprintf("%s: %s → %s: %s", c.Rule, c.From, c.To, c.Reason)
}

// Sync brings the ledger to the policy's rules at now: a new rule starts
// on (pinned when it is pinned), a rule no longer in the policy is
// dropped with its record, a rule that became pinned is pinned (and one
// that is no longer pinned is on, its window kept). The records follow the
// policy's order.
func (l Ledger) Sync(p Learning, now time.Time) (Ledger, []Change) {
	old := map[string]Record{}
	for _, r := range l.Rules {
		old[r.ID] = r
	}
	out := Ledger{Calls: l.Calls}
	var changes []Change
	for _, s := range p.Rules {
		r, ok := old[s.ID]
		if !ok {
			r = Record{State: On, ChangedAt: now, Reason: "new: fires until its feedback says otherwise"}
			if s.Pinned {
				r.State, r.Reason = Pinned, "pinned by the policy: never turned off"
			}
			r.Spec = s
			out.Rules = append(out.Rules, r)
			continue
		}
		r.Spec = s
		to := r.State
		switch {
		case s.Pinned && r.State != Pinned:
			to = Pinned
		case !s.Pinned && r.State == Pinned:
			to = On
		}
		if to != r.State {
			reason := "pinned by the policy: never turned off"
			if to == On {
				reason = "no longer pinned by the policy"
			}
			changes = append(changes, r.change(to, reason))
			if r.State == Off {
				r.Recent = "" // the shadow window says nothing of firing
			}
			r.State, r.Reason, r.ChangedAt = to, reason, now
			r.Changes++
		}
		out.Rules = append(out.Rules, r)
	}
	return out, changes
}

func (l Ledger) index(id string) int {
	return slices.IndexFunc(l.Rules, func(r Record) bool { return r.ID == id })
}

// change describes moving r to state to.
func (r Record) change(to State, reason string) Change {
	w := r.Window()
	return Change{Rule: r.ID, From: r.State, To: to, Precision: w.Precision(), N: w.N(), Threshold: r.Threshold, Reason: reason}
}

// Feedback is what the caller of a call reports, with what the call's
// result says of the rules: the rule that fired and those that matched but
// were off.
type Feedback struct {
	CallID  string   `json:"call_id"`
	Outcome Outcome  `json:"outcome"`
	Fired   string   `json:"fired,omitempty"`
	Shadow  []string `json:"shadow,omitempty"`
}

// Counted is one rule's part in a feedback.
type Counted struct {
	Rule string `json:"rule"`
	// Fired: the rule fired on the call; else it was in shadow.
	Fired    bool   `json:"fired"`
	Judgment string `json:"judgment"`
	// InWindow: the judgment is in the rule's window (it can move the rule);
	// feedback of the other kind (fired while the rule is off, in shadow
	// while it is on: a call made before its last change) only adds to its
	// totals.
	InWindow bool  `json:"in_window"`
	State    State `json:"state"`
}

// Result is what one feedback did.
type Result struct {
	CallID  string  `json:"call_id"`
	Outcome Outcome `json:"outcome"`
	// Duplicate: the call's feedback was already counted (as Previous);
	// this one changed nothing.
	Duplicate bool      `json:"duplicate,omitempty"`
	Previous  Outcome   `json:"previous,omitempty"`
	Counted   []Counted `json:"counted"`
	// Unknown are rules the feedback named that the policy does not have
	// for this scenario: not counted.
	Unknown []string `json:"unknown,omitempty"`
	Changes []Change `json:"changes,omitempty"`
}

// Unknown lists the rules of fb that the ledger has no record of.
func (l Ledger) Unknown(fb Feedback) []string {
	var out []string
	for _, id := range fb.rules() {
		if l.index(id) < 0 {
			out = append(out, id)
		}
	}
	return out
}

func (fb Feedback) rules() []string {
	var ids []string
	if fb.Fired != "" {
		ids = append(ids, fb.Fired)
	}
	for _, id := range fb.Shadow {
		if id != "" && id != fb.Fired && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Apply counts feedback fb at now under p and returns the new ledger and
// what it did: each rule fb names is judged (fired or in shadow) and, when
// the judgment can move it, its state is checked. A second feedback for a
// call of the last MaxSeen is a duplicate and changes nothing (the first
// counts). Apply does not change l.
func (l Ledger) Apply(p Learning, fb Feedback, now time.Time) (Ledger, Result) {
	res := Result{CallID: fb.CallID, Outcome: fb.Outcome, Counted: []Counted{}}
	for _, s := range l.Calls {
		if s.CallID == fb.CallID {
			res.Duplicate, res.Previous = true, s.Outcome
			return l, res
		}
	}
	out := Ledger{Rules: slices.Clone(l.Rules), Calls: append(slices.Clone(l.Calls), Seen{CallID: fb.CallID, Outcome: fb.Outcome})}
	if n := len(out.Calls) - MaxSeen; n > 0 {
		out.Calls = out.Calls[n:]
	}
	min := max(p.MinFeedback, 1)
	for _, id := range fb.rules() {
		i := out.index(id)
		if i < 0 {
			res.Unknown = append(res.Unknown, id)
			continue
		}
		r := &out.Rules[i]
		fired := id == fb.Fired
		if fired {
			r.Fired.add(fb.Outcome)
		} else {
			r.Shadow.add(fb.Outcome)
		}
		j := Judge(r.Action, fb.Outcome, fired)
		// While on or pinned the window holds feedback on calls the rule
		// fired on; while off, feedback in shadow.
		inWindow := j != Neutral && fired == (r.State != Off)
		if inWindow {
			mark := "b"
			if j == Good {
				mark = "g"
			}
			r.Recent += mark
			if n := len(r.Recent) - min; n > 0 {
				r.Recent = r.Recent[n:]
			}
			if c, ok := r.evaluate(min, now); ok {
				res.Changes = append(res.Changes, c)
			}
		}
		res.Counted = append(res.Counted, Counted{Rule: id, Fired: fired, Judgment: j.String(), InWindow: inWindow, State: r.State})
	}
	return out, res
}

// evaluate moves r when its full window says so.
func (r *Record) evaluate(min int, now time.Time) (Change, bool) {
	w := r.Window()
	if w.N() < min {
		return Change{}, false
	}
	p := w.Precision()
	var to State
	var reason string
	switch {
	case r.State == On && p < r.Threshold:
		to = Off
		reason = fmt.Sprintf("precision %.2f < %.2f over its last %d feedbacks on calls it fired on (%d good, %d bad): evaluated in shadow until users need it",
			p, r.Threshold, w.N(), w.Good, w.Bad)
	case r.State == Off && p >= r.Threshold:
		to = On
		reason = fmt.Sprintf("shadow precision %.2f ≥ %.2f over its last %d feedbacks on calls it did not fire on (%d needed it, %d did not): fires again",
			p, r.Threshold, w.N(), w.Good, w.Bad)
	default:
		return Change{}, false
	}
	c := r.change(to, reason)
	r.State, r.Reason, r.ChangedAt, r.Recent = to, reason, now, ""
	r.Changes++
	return c, true
}

// Off lists the IDs of the rules that are off.
func (l Ledger) Off() []string {
	var ids []string
	for _, r := range l.Rules {
		if r.State == Off {
			ids = append(ids, r.ID)
		}
	}
	return ids
}
