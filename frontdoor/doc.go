// Package frontdoor is the OpenAI-compatible HTTP front door of durable-llm:
// an agent backend that already speaks the OpenAI chat-completions API gets
// durable, idempotent, resilient calls by changing only its base URL.
//
// Every POST /v1/chat/completions starts, or attaches to, one LLMCall
// workflow through llmclient and answers in OpenAI's shape, plus an
// x_resilience object (source, degraded, attempts, classes, workflow ID,
// reason) and the X-Workflow-Id, X-Resilience-Source and
// X-Resilience-Degraded headers.
//
// # Invariants
//
//   - Tenants. A bearer token maps to a tenant (Tenants; compared by
//     SHA-256 in constant time, never logged). The tenant is part of every
//     workflow ID: an Idempotency-Key header becomes
//     IDs.Scoped(tenant, key); without one the key is derived from the
//     tenant, user, X-Session-Id, messages and every field that changes the
//     answer (IDs.For; docs/how-it-works.md "Idempotency and audit"), keyed with the
//     deployment secret (IDsFor refuses a non-loopback address without
//     one). Two tenants sending the same key reach two different calls; a
//     key sent again with another request is a 422 naming the key. GET and
//     DELETE /v1/calls/{id} and POST /v1/calls/{id}/feedback read the
//     owner from the call's memo with one Describe and answer 404 for
//     another tenant's call, exactly as for a call that does not exist.
//   - Tenants cannot crowd each other out. Each has a token bucket of
//     requests, estimated tokens and milliseconds of validation per minute
//     and a cap on calls in flight (Limits, from the tenants file; counted
//     per front-door process), answered 429 with Retry-After. A request
//     takes its request and its slot before its body is read (over a
//     limit: 429, nothing read) and its tokens once it is decoded, so
//     reading and validating it run under the tenant's max_in_flight, and
//     a request refused once read still spent a request. A tenant's
//     requests are decoded and validated one at a time, the time charged
//     to its validation budget: however expensive they are (schemas to
//     compile), they take at most one core, and a tenant's refused
//     requests cost it, not the others. A tenant at its daily spend cap
//     (the workers' policy) gets 429 spend_cap.
//   - Slow clients cannot hold the server: a body must arrive within
//     BodyTimeout (408), and every refusal closes the connection without
//     reading the rest of the body.
//   - Nothing waits forever. A call's execution timeout is its deadline
//     plus a margin (llmclient), and every wait for an answer, plain or
//     streamed, ends after that plus WaitMargin with a 504 that names the
//     call; the same request attaches to it again.
//   - Nothing starts for bad input, and nothing of it is dropped or
//     repaired. The headers it reads are taken once each, the body must be
//     JSON (Content-Type) in UTF-8 (no U+FFFD replaces a bad byte), is
//     capped (413), decoded with every problem naming its field, unknown
//     fields included at every level (400), and checked with
//     request.Validate against the same policy the workers run (its
//     scenarios, its image hosts) before any workflow is started.
//     ShapeErrors gives what net/http answers by itself the same error
//     shape.
//   - A client that disconnects does not cancel its call: the workflow
//     runs on, and the same request (or Idempotency-Key) returns its
//     recorded answer without a second upstream call.
//   - Temporal unreachable or slow to accept a call is a 503 with
//     Retry-After; retrying with the same key can never run a call twice.
//
// # Modes
//
// A plain request waits for the answer. stream: true starts the call with
// stream: true (it hosts a workflow stream of its deltas) and forwards the
// deltas as they are generated, as SSE chat.completion.chunk events: a
// role chunk, a content chunk per delta, a final chunk with finish_reason
// and x_resilience, a usage chunk when stream_options.include_usage is
// set, then [DONE]. Each content chunk has an SSE id, "OFFSET:BYTES" (the
// stream offset and the answer bytes sent so far); a client that
// reconnects with the same key and a Last-Event-ID header gets the rest of
// the text, none of it twice, even once the call has ended. Across retries
// and model switches the text is continued, never repeated; a fallback's
// answer comes as content at the end. While nothing is sent (first token,
// backoff) the stream carries ": keep-alive" comments, and a comment per
// attempt event. The 200 is committed at the first delta or after
// KeepAlive: a call that fails before is answered with its status code,
// after it with an SSE error event. All the connections streaming one call
// share one subscription to its stream (a workflow admits only a few
// updates in flight). Prefer:
// respond-async is answered 202 with the workflow ID and a Location,
// /v1/calls/{id}, that answers 202 with the state so far while the call
// runs and 200 with the completion when it is done (respond-async wins over
// stream: true); DELETE on it cancels the call.
//
// # Request mapping
//
//	model                      a model of the ladder; "" or "auto": the ladder's first
//	messages                   role, content (a string, or text parts joined by "\n"),
//	                           name, tool_calls, tool_call_id
//	max_completion_tokens,     max_tokens of the call (max_completion_tokens wins)
//	max_tokens
//	temperature, user          temperature; user ID of the derived key
//	stream, stream_options     SSE answer; include_usage (a boolean)
//	Last-Event-ID header       where a reconnecting stream resumes
//	n                          must be 1 when given
//	Idempotency-Key header     the caller's key, scoped by tenant
//	X-Session-Id header        session ID of the derived key
//	X-Scenario header          business scenario (selects business rules)
//	X-Deadline-Ms header       deadline of the whole call
//
// Every other field is refused by name, except those stock clients send
// that do not change the answer (IgnoredFields, and the fields they keep
// in a message they return: see decodeMessage) and the passthrough
// fields of the policy's models.
//
// # Responses API streams
//
// The sequence numbers of a response's stream events run 0, 1, 2, … without
// a gap, as OpenAI numbers them (clients that check for gaps, or count
// events by them, take a jump for lost events). They are a function of
// the answer, not of the connection, so that every connection that
// streams one response numbers its events alike and a client resumes
// (starting_after, Last-Event-ID) exactly where it stopped:
//
//	0, 1             response.created, response.in_progress
//	2, 3             output_item.added, content_part.added of the message
//	3 + k            the output_text.delta of the text's k-th piece
//	4 + pieces …     output_text.done, content_part.done, output_item.done,
//	                 then 4 per function call, then response.completed
//
// A connection is handed the text in pieces of its own (the stream's
// deltas while the call runs, one piece from the result after it ended,
// from a worker that resent an attempt), so the text is cut again into
// pieces that depend on it alone (nextPiece): a word with the spaces after
// it, or at most maxPiece bytes of text without spaces. A piece goes out
// once the byte after it has arrived, so a delta waits for at most the
// next word.
//
// # Layout
//
// One pipeline serves the requests that start calls, in either API
// (pipeline.go: admit, decode, start, answer). Each API has its files:
// chat.go and completion.go for chat completions; responses.go,
// responses_request.go, responses_stream.go, stored.go and itemref.go for
// the Responses API; calls.go for /v1/calls; models.go. routes.go holds
// the route table, errors.go every error answer, stream.go the SSE
// answers both APIs share, limits.go and admission.go the tenants' limits.
package frontdoor
