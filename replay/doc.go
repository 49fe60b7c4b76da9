// Package replay is the pre-deploy check of durable-llm: it replays recorded
// LLMCall histories against the workflow code of this build and stops at the
// first history the code no longer reproduces.
//
// Histories come from JSON files (as `temporal workflow show --output json`
// writes them, with or without shorthand payloads, or as the recorder of the
// golden histories writes them) or from a live Temporal server: a visibility
// query lists the workflows, each history is fetched and replayed.
//
// Replay runs the workflow code over the recorded events without executing
// any activity; local-activity results come from their markers. A history
// fails when the code issues a different sequence of commands than the one
// recorded (Temporal's non-determinism error, TMPRL1100) or when the code
// fails to replay at all (a panic, an unregistered workflow type).
//
// Invariants:
//   - Histories are replayed one at a time, in the order given (files) or
//     listed (query); the first failure stops the run, so the error names
//     exactly one workflow.
//   - Nothing is written to the server: the query mode only lists workflows
//     and reads their histories.
//   - One line per history is written to Options.Out as it is replayed.
package replay
