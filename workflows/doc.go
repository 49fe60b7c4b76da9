// Package workflows holds LLMCall, the durable LLM call: one workflow
// execution per call, on task queue llm-calls.
//
// The workflow is only the state machine of docs/how-it-works.md:
//
//	admit (validate, rules) → [prepare → call → decide → record → wait]… →
//	answer | fallback (cache → FAQ → rule card → placeholder) | hand-off | clear error
//
// It holds one callstate.State: PrepareAttempt returns it with the model
// chosen, DecideNext returns the next one inside its callstate.Step, and
// the workflow branches only on the step's typed Kind, never on text.
//
// Every decision that reads configuration, the clock, randomness or process
// state (retry budget, breakers) runs in a local activity of package
// activities, so a policy change or a restart never breaks replay and every
// decision is in history. Each upstream attempt is its own activity execution
// with Temporal retries off (MaximumAttempts 1): the workflow owns every
// retry.
//
// LLMGuard (guard.go) is the other workflow: one long-running run per task
// queue that keeps the retry budgets, breakers and rate-limit holds of all
// its workers (docs/how-it-works.md "Shared guards"), fed by signals and read by query.
//
// Changing this workflow: runs may be in flight. Any change to the sequence
// of commands (activities, timers, local activities, search-attribute
// upserts) must be guarded with workflow.GetVersion, and `starter replay`
// must pass against recorded histories before deploying (docs/deploying.md).
//
// # Context refiner
//
// The context refiner (refine.go; docs/how-it-works.md "Context refiner")
// rebuilds a retry's request instead of resending it:
//
//   - after context_length_exceeded with summarize on, the rounds the
//     retry drops are replaced by one marked message with their summary
//     (activities.Summarize), and every later attempt of the call sends
//     that refined conversation;
//   - after output_truncated with action continue, the next attempt asks
//     the model for the missing part only: the truncated text is kept
//     (refiner.partial) and sent as a final assistant message to continue;
//     the answer is that text and its continuation.
//
// Both act only when a recorded decision asks for them (Shape.Summarize,
// Shape.Continue), so histories of earlier builds replay unchanged; the
// summary's activity is also behind the "context-refiner" version, whose
// marker is written only when it acts.
package workflows
