// Package policies is the parent of the pure decision logic of a durable
// LLM call. It holds no code; each concern is a subpackage:
//
//   - failure: the failure classes of an attempt and their fixed facts.
//   - config: the policy file (models, class actions, limits, budget,
//     breakers, rules, FAQ), its defaults and its validation.
//   - request: the Request a caller sends, its validation, the prompt size
//     and the idempotency key.
//   - classify: an upstream attempt's outcome (go-openai's error or
//     response, status, headers, body) to a failure class and a reason.
//   - guard: the per-process retry budget, per-model breakers and
//     per-class breaker.
//   - prompt: token counting, history pruning and system-prompt adaptation
//     for the attempt's model.
//   - rules: the business rules checked before any model call.
//   - keyword: the text folding and keyword matching rules and FAQ share.
//   - faq: the FAQ fallback and its index.
//   - callstate: one call's serialisable state, the model ladder, backoff
//     and Next, the step after a failed attempt.
//
// Dependencies point one way, from the leaves up:
//
//	failure ← config ← request, rules, guard, prompt ← callstate
//
// Within a level, prompt also imports request. classify imports go-openai
// and failure only; keyword imports nothing of the module, faq only
// keyword, and rules keyword besides config. No subpackage imports a
// package of this module outside policies/, and none imports one that
// depends on it, tests included.
//
// Invariants of every subpackage:
//   - No Temporal import. The activities package wraps these functions in
//     (local) activities; the workflow never calls them directly, so a
//     policy change never breaks replay.
//   - Time and randomness are arguments (now time.Time, u float64 in [0,1)),
//     so every decision is reproducible in a table test.
//   - Stateful types (guard's RetryBudget, BreakerRegistry, ClassBreaker)
//     are safe for concurrent use and built once per process; nothing else
//     is package-level mutable state.
//   - They do not log; state changes are reported through hooks.
package policies
