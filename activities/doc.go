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
//
// # One attempt
//
// CallModel runs one attempt (call.go) in the steps the workflow sees:
// send the request (request.go builds it; the recorder of httpclient.go
// keeps what go-openai drops), observe the reply, judge it (verdict.go),
// record the verdict in the outcome and the guards (guards.go), publish
// the answer (publish.go, live.go).
//
// # Counting steps count once
//
// The local activities that count something (Admit and StartHedge count a
// request for the hedge budget; PrepareAttempt charges the retry budget,
// the pacer and a key's headroom; DecideNext and RecordRetrySuccess feed
// the breakers) may run twice for one step of a call: a local activity is
// retried when its attempt timed out after it counted, and a workflow task
// that failed before its result was recorded runs it again. Each is
// wrapped in oncePerStep (once.go): the result of the first run of a step
// is returned to a second run on this worker without counting again.
// Another worker never counted it, so counting there is right.
package activities
