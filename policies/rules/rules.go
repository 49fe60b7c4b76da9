package rules

import (
	"strings"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/keyword"
)

// Business rules are a semantic breaker (docs/how-it-works.md, step 2):
// some questions must not be retried, or not be answered by a model at
// all, whatever the upstream does. They are matched on the scenario of the
// request and on keywords in the current question.
//
// Matching, shared by CheckRules, RuleCard and the FAQ keyword bonus:
//   - Text and keywords are folded: lower case, full-width ASCII (ＡＢＣ，１２３)
//     to ASCII, curly apostrophes to "'", runs of white space to one space.
//   - A keyword that starts with an ASCII letter or digit must start at a
//     word boundary but may run into a longer word: "pain" matches "pains"
//     and "pain," but not "Spain"; "bleed" matches "bleeding".
//   - Any other keyword (Chinese, for instance) matches as a plain
//     substring: "出血" matches "伤口一直出血".
//   - Empty keywords never match.

// CheckRules returns the first rule, in order, whose scenario matches the
// request's scenario and that has a keyword in the question. This is the
// check made before any model call (docs/how-it-works.md step 2); its action (handoff,
// safe_message, no_retry) decides what the call does next.
//
// A rule's scenario matches when it is empty (any scenario) or equal to
// scenario ignoring case and surrounding spaces. Keywords are matched as
// described at the top of this file; a rule without keywords never matches
// (the policy loader refuses such rules). question is the current user
// question, usually the content of the last message.
//
// Rules with a technical condition (After) are not admission rules and are
// never returned here: see Admit.
func CheckRules(rules []config.Rule, scenario string, question string) (config.Rule, bool) {
	v := Admit(rules, nil, scenario, question)
	if v.Fired == nil {
		return config.Rule{}, false
	}
	return *v.Fired, true
}

// Gate tells whether the rule id of scenario fires: the learner turns a
// rule off when its precision falls below its threshold. nil: every rule
// fires.
type Gate func(scenario, id string) bool

// Verdict is what the rules say about a request at admission.
type Verdict struct {
	// Fired is the first admission rule (no After) that matches and is on.
	Fired *config.Rule
	// Shadow are the admission rules, before Fired, that matched but are
	// off: they would have fired.
	Shadow []string
	// After are the rules with a technical condition whose scenario and
	// keywords match, in order: the call checks their After after every
	// failed attempt. Off marks those the learner turned off (shadow).
	After []Pending
}

// Pending is a rule whose business condition holds, waiting for its
// technical one.
type Pending struct {
	Rule config.Rule
	Off  bool
}

// Admit checks the rules against a request at admission: scenario and
// keywords for every rule, in order; the first admission rule that matches
// and that gate lets fire is the verdict's Fired (later rules are not
// looked at: the call ends there), and rules with After that match before
// it wait for their failures.
func Admit(rules []config.Rule, gate Gate, scenario, question string) Verdict {
	var v Verdict
	q := keyword.Fold(question)
	for _, r := range rules {
		if !ruleScenarioMatches(r.Scenario, scenario) || !anyKeywordIn(q, r.Keywords) {
			continue
		}
		on := r.Pinned || gate == nil || gate(scenario, r.ID)
		switch {
		case r.After != nil:
			v.After = append(v.After, Pending{Rule: r, Off: !on})
		case on:
			v.Fired = &r
			return v // the call ends here: no later rule matters
		default:
			v.Shadow = append(v.Shadow, r.ID)
		}
	}
	return v
}

// RuleCard returns the rule whose message serves as the answer card of the
// business fallback (docs/how-it-works.md step 7: FAQ, then rule card, then placeholder),
// when no model could answer. It matches scenario and keywords exactly as
// CheckRules does, but:
//   - only rules with a non-blank Message are candidates: a matching rule
//     without a message (typically no_retry) is skipped and later rules are
//     still considered, where CheckRules would stop at it;
//   - a handoff rule is never a card (its message promises a person), nor
//     a rule with a technical condition (After: its message is its answer
//     only when its failures happened, and may start a review), nor a rule
//     gate says is off;
//   - among the others the action does not matter: in practice the card is
//     the message of a no_retry rule whose single attempt has failed.
func RuleCard(rules []config.Rule, gate Gate, scenario, question string) (config.Rule, bool) {
	q := keyword.Fold(question)
	for _, r := range rules {
		if strings.TrimSpace(r.Message) == "" || r.Action == config.RuleHandoff || r.After != nil ||
			!ruleScenarioMatches(r.Scenario, scenario) {
			continue
		}
		if !anyKeywordIn(q, r.Keywords) {
			continue
		}
		if !r.Pinned && gate != nil && !gate(scenario, r.ID) {
			continue
		}
		return r, true
	}
	return config.Rule{}, false
}

// ruleScenarioMatches reports whether a rule's scenario (empty: any) matches
// the request's scenario, ignoring case and surrounding spaces.
func ruleScenarioMatches(ruleScenario, scenario string) bool {
	rs := strings.TrimSpace(ruleScenario)
	return rs == "" || strings.EqualFold(rs, strings.TrimSpace(scenario))
}

// anyKeywordIn reports whether any of keywords occurs in the folded text q.
func anyKeywordIn(q string, keywords []string) bool {
	for _, k := range keywords {
		if keyword.In(q, keyword.Fold(k)) {
			return true
		}
	}
	return false
}
