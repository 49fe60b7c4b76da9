// Package agent is an example agent workflow on durable-llm: it loops
// model call → tool activities → model call until the model stops asking
// for tools, and every model call is a durable LLMCall made through
// llmworkflow.Call (docs/calling.md, "From a Temporal workflow").
//
// Invariants: the workflow code is deterministic (tools run as
// activities, model calls as child workflows), so its recorded history
// replays (testdata/agent-tools.json, replayed by TestReplayGolden); a
// turn's call ID comes from the conversation so far, so a retried or reset
// agent makes no model call twice for one turn.
package agent
