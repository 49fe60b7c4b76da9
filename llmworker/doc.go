// Package llmworker builds and runs the durable-llm worker: it registers the
// LLMCall workflow and its activities on the llm-calls task queue, makes sure
// the search attributes exist, and adapts zap to Temporal's logger. The
// worker's main and the integration tests both use it.
package llmworker
