// Package bench holds durable-llm's benchmarks and their baselines; the
// command bench/cmd/bench runs them (make bench) and writes the tables and
// charts to bench/results.
//
// # Storm
//
// RunStorm replays an incident of docs/benchmarks.md as an llmsim scenario
// (bench/scenarios/storm-*.yaml, loaded by LoadStormCase) and drives it at
// a constant arrival rate (OpenLoop: call i starts at i/rate whether or not
// earlier calls have finished, as users arrive). Five contenders run one
// after another, each against its own fresh simulator with the same
// scenario and seed:
//
//   - NewOneShot: go-openai, one request per call, no retry, the call's
//     deadline as its timeout: the floor no resilience layer may fall
//     below;
//   - NewNaive: go-openai, fixed timeout, immediate retries ×3;
//   - NewBackoff: the same with waits of 1, 2 and 4 s (no jitter);
//   - NewOpenAIGo: the official openai-go/v3 client with its default retries;
//   - NewTemporalDefault: a bare workflow (BareWorkflow) whose one activity
//     makes the go-openai call under Temporal's default retry policy;
//   - NewDurable: durable-llm, LLMCall through llmclient on an in-process
//     llmworker with the default policy (and with three workers).
//
// A scenario's first phase is healthy, its last recovered and those
// between are the incident; a scenario of one faulty phase (storm-sporadic)
// is faulty for the whole run.
//
// Every upstream request carries Idempotency-Key "<call>/<n>" (durable-llm
// sends "<workflow id>/<attempt>" itself), so llmsim's per-conversation
// stats give each logical call's attempts exactly. Summarize turns the
// client-side outcomes and llmsim's stats into the storm metrics:
// amplification over the incident and overall, calls answered within the
// deadline and by a model (over the run, over the calls started in the
// incident, over those started while the endpoint works: phases without
// faults or changed latency), latency percentiles, peak-to-mean of
// upstream arrivals per 100 ms, the time to recover after each end of the
// fault, and self-heal: of the calls whose first upstream request failed
// (llmsim's record of that request: an injected fault, or anything but a
// 200), the share a model still answered. Targets checks issue 26's
// targets on durable-llm's runs and prints each met or MISSED.
// WriteStormChart draws the upstream arrivals per 100 ms of each contender.
//
// # Overhead
//
// RunOverhead compares a direct go-openai call, the bare one-activity
// workflow (Temporal's floor on the machine) and durable-llm against a
// zero-latency llmsim: latency at concurrency 1 (calls interleaved) and
// throughput with closed-loop callers, and what one call costs in history.
//
// The upstream there is llmsim with instant models (llmsim.InstantModels):
// llmsim generates at a realistic speed by default, and the overhead is
// everything but the upstream's time.
//
// # Streaming
//
// RunStream measures what a caller of a streamed answer (500 tokens by
// default) waits for, one call at a time: the time to the first token, to
// the last token and to the end of the stream, for go-openai streaming
// straight from llmsim, for LLMCall with stream: true followed through
// llmclient.Stream, and for the front door (stream: true, go-openai
// pointed at it). Every contender has its own llmsim with the same seeded
// scenario (StreamScenario: the default models at their realistic speed),
// so call i meets the same upstream time to first token everywhere and the
// overhead is taken call by call. WriteStreamChart draws every call's
// time to first token.
//
// RunStreamEvents counts the history events of a streamed call
// (GetWorkflowHistory) per second of upstream generation, for each
// stream.batch_interval, with a subscriber (llmclient.Stream) and without,
// and for the same call not streamed.
//
// # Memory
//
// RunMemory builds ./worker, runs it as a process of its own, holds many
// calls in flight against a slowly generating llmsim (a long time to the
// first token, then a slow stream of tokens), streamed (each with a
// subscriber, as the front door would) and not, and reads the process's
// RSS from /proc, its goroutines, heap and stacks from its /metrics and
// its CPU time from /proc.
//
// # Fairness
//
// RunFairness sends tenant B's normal load through a front door
// (frontdoor.Handler) at a constant rate, alone, then while tenant A floods
// at 10× its requests_per_minute with its limits on, then with A
// unlimited, against an in-process worker and an llmsim whose first model
// has a fixed number of slots (FairnessScenario): B's latency percentiles
// in each row and their ratio to B alone, and each tenant's answers by
// status (A should get 429s, B none).
//
// Nothing here runs in `go test -short` but smoke tests of the storm and
// streaming harnesses on the contenders that need no Temporal server; a
// miniature of the streaming benchmarks runs against the dev server in the
// full test run. The benchmarks themselves are not timed tests.
package bench
