// Package callstate decides one call's next step after a failed attempt
// (docs/how-it-works.md, step 5). State is the call's decision state: the
// workflow holds exactly one and replaces it with Step.Next after every
// failed attempt. Next is the decision; the ladder (NextModel) and the
// waits (FullJitter, Fixed, HonourRetryAfter) are its parts.
//
// Invariants:
//   - No Temporal import. Next is a pure function: the clock, randomness
//     and the process-wide guards reach it as arguments (Outcome.Elapsed,
//     Verdicts), so every decision is reproducible in a table test.
//   - State and Step are plain JSON: they travel through history as the
//     input and result of the activities that prepare and decide.
//   - Next spends nothing: the caller charges each request after the
//     call's first to its endpoint's budget when it starts it
//     (PrepareAttempt), and skips a model whose budget was spent in the
//     meantime.
//
// # Streamed calls
//
// Once text was streamed to the caller (State.Delivered), every further
// attempt continues it: a retry or resend stays on the model only if it
// can continue (config.ModelConfig.Continuation), else the call switches
// to the next rung that can; with none left, or where the decision was the
// business fallback, the call ends with the delivered text (Finish) rather
// than glue a different answer on.
package callstate
