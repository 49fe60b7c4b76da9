// Package llmworker is the library behind the worker: it builds and runs
// the durable-llm worker (New: the LLMCall workflow and its activities on
// the llm-calls task queue), makes sure the search attributes exist
// (EnsureSearchAttributes) and serves the worker's Prometheus metrics
// (StartMetrics).
//
// The command is package worker (./worker): it reads flags and the
// environment, builds the logger (internal/logging) and the Temporal
// client, and calls this package. Everything else that runs a worker in
// process uses this package too: the integration tests, the benchmarks and
// the history recorder.
package llmworker
