// Package activities holds the Temporal activities of an LLM call: the
// upstream call through go-openai and the decision steps (Admit,
// PrepareAttempt, DecideNext, RecordRetrySuccess, Fallback) that gather the
// verdicts of the per-process guards and call the pure functions under
// policies/ (callstate.Next decides; prompt.Fit cuts and counts the prompt
// once per attempt, and CallModel sends exactly that cut).
//
// One Activities value is built per worker process and shared by every
// workflow it runs: it owns the retry budget and the circuit breakers, which
// are per process by design (like Envoy and Finagle), and the HTTP clients.
// The decision steps run as local activities (recorded in history as
// markers, nearly free); only the upstream call is a regular activity, so
// each attempt is its own visible event with its own failure.
//
// API keys are read from the environment inside the call activity; they
// never enter activity input, results, errors or logs.
package activities
