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
package rules
