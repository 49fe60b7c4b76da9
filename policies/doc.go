// Package policies holds the pure decision logic of a durable LLM call:
// configuration, failure classification, backoff, the retry budget, circuit
// breakers, context pruning, the model ladder, FAQ matching, business rules,
// token counting, the idempotency key and the planner that turns all of them
// into the next step of a call.
//
// Invariants:
//   - No Temporal import. The activities package wraps these functions; the
//     workflow never calls them directly.
//   - Time and randomness are arguments (now time.Time, u float64 in [0,1)),
//     so every decision is reproducible in a table test.
//   - Stateful pieces (RetryBudget, BreakerRegistry) are safe for concurrent
//     use and are built once per process; nothing else is package-level
//     mutable state.
//   - The package does not log; state changes are reported through hooks.
package policies
