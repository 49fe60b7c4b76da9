// Package rules applies the business rules of the policy file (docs/how-it-works.md,
// step 2): CheckRules finds the rule, matched on the request's
// scenario and keywords in the question, that decides before any model
// call whether a call is handed off, answered with a safe message or
// allowed one attempt only; RuleCard finds the rule whose message is the
// fallback answer. Ledger (learn.go) is how rules learn from users'
// feedback: each rule's record, its Beta(1,1) precision and its state (on,
// off, pinned), which a Gate gives Admit.
//
// Invariants:
//   - No Temporal import; it imports only the config package (the Rule
//     type) and the keyword package (matching).
//   - Pure functions of their arguments: no clock, no randomness, no state,
//     no logging.
//
// # Learning from users
//
// After a call, its caller tells what the user did (an Outcome;
// docs/rules.md "Rules that learn from users"). Each scenario's learner
// judges that outcome for the rule that fired on the call, and for the
// rules that matched but were off (shadow), and keeps every rule's Record.
// A rule's state follows its precision over its last MinFeedback judged
// feedbacks, a Beta(1,1) posterior mean (good+1)/(good+bad+2):
//
//	on     fires; turned off when its last MinFeedback feedbacks on calls
//	       it fired on give a precision below its threshold
//	off    does not fire, evaluated in shadow; turned on again when its
//	       last MinFeedback feedbacks on calls it matched but did not fire
//	       on give a shadow precision at or above its threshold: the users
//	       needed it
//	pinned a safety rule: reported on, never off
//
// Each change empties the window, so a rule stays in a state for at least
// MinFeedback feedbacks of the kind that can move it out.
package rules
