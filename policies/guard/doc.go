// Package guard holds the per-process protections that outlive a single
// call (README "Failure classes"): the retry budget (RetryBudget), one
// circuit breaker per model (Breaker, BreakerRegistry) and the per-class
// breaker (ClassBreaker) that stops retrying a class whose retries keep
// failing.
//
// Invariants:
//   - No Temporal import. The activities hold one of each per process and
//     consult them from local activities, so their decisions are recorded in
//     history and never replayed.
//   - Time and randomness are arguments (now time.Time, u float64 in
//     [0,1)): a clock step backwards never corrupts a window, and every
//     decision is reproducible in a table test.
//   - Every stateful type is safe for concurrent use and built once per
//     process; there is no package-level mutable state.
//   - It does not log: breaker state changes are reported through a
//     StateChangeHook.
package guard
