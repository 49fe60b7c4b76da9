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
//     code). One reads the default policy: a Sync made before a breaker
//     registry joins it keeps outcomes as the default breaker reads them
//     (NewSync), until the registry's own settings replace them. A zero that means something is honoured (budget Ratio 0: only
//     the floor; Floor 0: no retries beyond the ratio); a setting that
//     config.Validate refuses makes the constructor panic, naming the field.
//   - It does not log: breaker state changes are reported through a
//     StateChangeHook.
//
// # Retry budget
//
// The budget works in the manner of Envoy's retry budgets, Finagle's
// RetryBudget and gRPC's retry throttling. Over any stretch of time
// retries are at most Floor + Ratio × the requests in it (once traffic is
// above Floor/(Ratio × Window) requests a second; a quiet system gets its
// Floor per Window), so the amplification of a short incident stays below
// 1 + Ratio + Floor/its calls however long the healthy traffic before it
// ran. A sliding window of Ratio × requests alone (the budget's first
// form) let the healthy minute before an incident pay for a tenth of a
// minute's traffic in retries during it.
//
// Counts are kept in a ring of 60 buckets, so memory is constant whatever
// the load; the reserve is worked out from the buckets of the last Window,
// oldest first, starting full (a reserve is full again after a Window). A
// bucket's requests refill the reserve before its retries spend it. An
// instant earlier than one already seen is treated as the latest one
// seen, so a clock step backwards can never corrupt the window.
//
// # Breaker
//
// Open, a Breaker refuses every call for its open period: OpenFor at
// first. Then it is half-open, as gobreaker's: a call is let through as a
// trial while fewer than Probes trials are out (one, until a trial has
// succeeded), and refused beyond that. It closes once Probes trial results
// are in and at least CloseThreshold of them succeeded; it reopens as soon
// as the trials can no longer reach CloseThreshold (over at least Probes
// results), for twice the period before (but at most half the time since
// it opened from closed), up to OpenForMax. What it limits is the trials
// in flight, not a share of the calls: at low traffic every call is a
// trial and none is refused that the upstream might answer (a share let
// through refused nine calls in ten of a flapping upstream's up windows,
// which a plain client would have had answered); at high traffic the
// trials are a few requests however many calls wait. So a recovered
// upstream gets its traffic back within Probes trials, and one that stays
// down is tried less and less often. Trials that close it halve the
// period, and every HealAfter spent closed halves it again, down to
// OpenFor (HealAfter 0: back to OpenFor when it closes). Half-open, only
// as many results count as trials were let through; others (late results
// of calls from before the breaker opened) are ignored, as are all results
// while open. Every state change is reported to the hook given to the
// registry, with the instant of the call that observed it.
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
