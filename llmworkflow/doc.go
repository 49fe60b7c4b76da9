// Package llmworkflow is what a Go agent workflow imports to make durable
// LLM calls from workflow code: Call runs one call as a child LLMCall
// workflow on the calls' task queue and returns its typed CallResult.
//
// Invariants:
//
//   - Everything Call does is deterministic workflow code: the child's ID
//     is a pure function of the parent's workflow ID and the request (or
//     the key the caller names), never of the run ID, the clock or a
//     counter, so a replayed, retried, reset or continued-as-new parent
//     reaches the same call for the same turn and a new call for a new one.
//   - A duplicate start (the same turn again: a parent's retry or reset
//     after the call completed, or two branches of one run) attaches to the
//     existing call through the Attach activity (Register it on the agent's
//     worker) and is never sent to a model twice; a call that a closed run
//     had cancelled is started again.
//   - An abandoned agent cancels its call (ParentClosePolicy
//     REQUEST_CANCEL); a cancelled Call waits until its call has stopped.
//   - Errors are *Error with a Kind (errors.As), or the sentinels through
//     errors.Is; temporal.IsCanceledError still holds for a cancelled Call.
//     Only FallbackUnavailable and TimedOut are worth retrying as they are.
//   - WithDeltasOn streams the call and republishes its items on the
//     agent's own workflow stream through the Forward activity (workflow
//     code cannot subscribe to another workflow's stream); Call returns
//     once the call's done event is there, so a turn's text comes whole,
//     in order, before anything the agent publishes after it.
package llmworkflow
