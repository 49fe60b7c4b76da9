// Package guard holds the per-process protections that outlive a single
// call (docs/how-it-works.md "Failure classes"): a retry budget per upstream endpoint
// (RetryBudget, Budgets), one circuit breaker per model (Breaker,
// BreakerRegistry), the per-class breaker (ClassBreaker) that stops
// retrying a class whose retries keep failing, and the rate-limit holds
// (Holds) that make a 429 backpressure rather than sickness.
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
//   - Settings are taken as given: guard holds no defaults of its own and
//     never replaces a value (default_policy.yaml in policies/config holds
//     every default; config.DefaultConfig is the base for a config built in
//     code). A zero that means something is honoured (budget Ratio 0: only
//     the floor; Floor 0: no retries beyond the ratio); a setting that
//     config.Validate refuses makes the constructor panic, naming the field.
//   - It does not log: breaker state changes are reported through a
//     StateChangeHook.
package guard
