// Package histories records the golden LLMCall histories that the replay
// tests of package workflows replay: one history per path through the
// workflow (success, every failure class, model switch, breaker open,
// budget exhausted, the FAQ, rule-card and placeholder fallbacks, hand-off,
// safe message, invalid request, cancellation).
//
// Every history comes from a real run: a Temporal dev server (from the
// pinned CLI), a real worker (package llmworker) and llmsim over HTTP,
// steered by in-prompt directives and, where a path needs it, a policy
// change (a short header timeout, a tiny retry budget, a no_retry rule),
// preparatory calls (to open a breaker or spend the budget), a
// cancellation during a backoff timer, or a worker process killed in the
// middle of an attempt.
//
// Before a history is saved the recorder checks that the run really took
// its path — the attempts' models, classes and decisions, the answer's
// source, the error of a failed call, the closing event, no failed or
// timed-out workflow task — and that the saved file replays against this
// build. A path that went another way fails the recording and leaves the
// old file in place, so a golden file never silently records the wrong
// path.
//
// Files are named <path>.json and hold the History as indented protobuf
// JSON with plain payloads (what worker.WorkflowReplayer's
// ReplayWorkflowHistoryFromJSONFile reads). Workflow IDs are
// "history-<path>", identities are fixed, and prompts are short, so a
// re-recording differs only in timestamps, jitter and ports. The command
// is testkit/histories/cmd/record-histories (`make histories`).
package histories
