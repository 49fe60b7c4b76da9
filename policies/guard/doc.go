// Package guard holds the rules that decide whether, where and when a call's
// next request goes (Rules; docs/how-it-works.md "The guard on one page"),
// and the per-process state they read, which outlives a single call.
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
//     code). One reads the default policy: a Sync made before a breaker
//     registry joins it keeps outcomes as the default breaker reads them
//     (NewSync), until the registry's own settings replace them. A zero that means something is honoured (budget Ratio 0: only
//     the floor; Floor 0: no retries beyond the ratio); a setting that
//     config.Validate refuses makes the constructor panic, naming the field.
//   - It does not log: breaker state changes are reported through a
//     StateChangeHook.
//
// # The rules
//
// What the guard decides, and why, is one ordered table: Rules, each rule
// named as calls show it, with its principle, its constants and the policy
// settings it reads. docs/how-it-works.md "The guard on one page" is that
// table as Page writes it, and a test keeps the two the same; read it
// there rather than here. The rules decide in pure calls, which take what
// the activities read and return the decision with the rule that made it:
// Weigh, Wait and PastOpen before a send; EndpointTold, ModelLearns and
// WaitAfter after an outcome; Hedge (whether a request gets a hedge, and
// when), Open and RaceTo while a request is open. The types
// below are the state the rules read:
// RetryBudget and Budgets (rule budget; counts in a ring of windowBuckets,
// so memory is constant whatever the load, and an instant earlier than
// one already seen is taken as the latest, so a clock step backwards never
// corrupts a window), Breaker and BreakerRegistry (rule breaker, as
// gobreaker's states), ClassBreaker (rule class-breaker), Holds (rules
// hold and backpressure), Pacer (rule pace), Outliers (rule outlier) and
// FirstTokens (the p90s that rules last-chance, hedge and grace read).
//
// # Shared guards
//
// Sync joins one worker's guards to its fleet:
//
//   - Budgets stay local. A ratio budget adds up across workers without
//     coordination (each worker's retries ≤ ratio × its requests, so the
//     fleet's ≤ ratio × the fleet's); the floor is split: each worker
//     keeps 1/Workers of it, Workers learned from the guard (Finagle's
//     and gRPC's budgets are per client for the same reason).
//   - Breakers judge this worker's outcomes at once; the outcomes are
//     also reported, and the fleet's breaker, judging every worker's,
//     opens a model for all of them (a worker that sees one call in ten
//     would wait long for its own evidence).
//   - Holds: a scope held here is held here at once and reported.
//
// A report goes out at the next sync when it carries news — a breaker of
// this worker changed state on its own outcomes, or a hold the fleet does
// not have — and otherwise at most every ReportEvery(Workers), so the
// fleet's routine reports stay under fleetReportsPerSecond whatever its
// size; a worker with nothing to say reports every KeepAlive so the
// fleet keeps counting it. What the guard knows comes back as its View
// (SetView), which overlays the local decisions while fresh: a breaker the
// fleet opened refuses here, a scope it holds is held here.
//
// The report being gathered keeps only what the fleet can still use, so
// it stays small however long the guard cannot be reached (a report past
// Temporal's 2 MB payload limit is refused, sent again for ever, and the
// worker never syncs again): per model, the newest outcomes as many as
// the breaker's longest rule reads, those the fleet does not judge
// (Ignored) dropped first; per scope, the hold that ends last.
package guard
