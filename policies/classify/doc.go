// Package classify turns what one upstream attempt produced (an
// Observation: go-openai's error or response, the status, headers and raw
// body) into a Verdict: its failure class (docs/how-it-works.md "Failure classes") and a
// one-line reason, plus the upstream's Retry-After and rate-limit headers.
//
// Classify is in classify.go, its streamed case in stream.go; codes.go
// reads what error codes and messages name, body.go the error bodies of
// the dialects seen in the wild, transport.go transport errors, and
// headers.go the Retry-After and rate-limit headers.
//
// Invariants:
//   - It imports go-openai and the failure package only: no Temporal, no
//     configuration.
//   - Classify is a pure function of the Observation and never panics on
//     upstream garbage; the current time is an argument where a Retry-After
//     date needs one (Observation.Now, ParseRetryAfter).
//   - No state, no logging.
package classify
