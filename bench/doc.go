// Package bench holds durable-llm's benchmarks and their baselines; the
// command bench/cmd/bench runs them (make bench) and writes the tables and
// charts to bench/results.
//
// # Storm
//
// RunStorm replays an incident of README "Benchmarks" as an llmsim scenario
// (bench/scenarios/storm-*.yaml, loaded by LoadStormCase) and drives it at
// a constant arrival rate (OpenLoop: call i starts at i/rate whether or not
// earlier calls have finished, as users arrive). Five contenders run one
// after another, each against its own fresh simulator with the same
// scenario and seed:
//
//   - NewNaive: go-openai, fixed timeout, immediate retries ×3;
//   - NewBackoff: the same with waits of 1, 2 and 4 s (no jitter);
//   - NewOpenAIGo: the official openai-go/v3 client with its default retries;
//   - NewTemporalDefault: a bare workflow (BareWorkflow) whose one activity
//     makes the go-openai call under Temporal's default retry policy;
//   - NewDurable: durable-llm, LLMCall through llmclient on an in-process
//     llmworker with the default policy.
//
// Every upstream request carries Idempotency-Key "<call>/<n>" (durable-llm
// sends "<workflow id>/<attempt>" itself), so llmsim's per-conversation
// stats give each logical call's attempts exactly. Summarize turns the
// client-side outcomes and llmsim's stats into the storm metrics:
// amplification over the incident and overall, calls answered within the
// deadline and by a model, latency percentiles, peak-to-mean of upstream
// arrivals per 100 ms, and the time to recover after the incident.
// WriteStormChart draws the upstream arrivals per 100 ms of each contender.
//
// # Overhead
//
// RunOverhead compares a direct go-openai call, the bare one-activity
// workflow (Temporal's floor on the machine) and durable-llm against a
// zero-latency llmsim: latency at concurrency 1 (calls interleaved) and
// throughput with closed-loop callers, and what one call costs in history.
//
// # Memory
//
// RunMemory builds ./worker, runs it as a process of its own, holds many
// calls in flight against a slow llmsim and reads the process's RSS from
// /proc and its goroutines from its /metrics.
//
// Nothing here runs in `go test` except a short smoke test of the storm
// harness on the baselines that need no Temporal server; the benchmarks
// themselves are not timed tests.
package bench
