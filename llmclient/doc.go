// Package llmclient is what a Go agent backend imports to make durable LLM
// calls: it builds the idempotency key, starts the LLMCall workflow (or
// attaches to the running or finished one with the same key) and waits for
// the answer.
//
// # Following a call
//
// Client.Follow reads a live attempt's text (workflows.EventLive) from the
// worker that generates it and hands it over as deltas at its event's
// offset; a follower that cannot read it to its end gets the rest from the
// result once the call ends. Follow returns at the done event rather than
// when the call closes (it lingers for its late subscribers). Once the
// call has ended its stream can no longer be polled, so the text the
// caller has not seen is then handed over from the result as one last
// Delta (Offset -1), followed by a done Event when the stream had not sent
// it. A call that hosts no stream (it was started without stream: true) is
// followed the same way, from its result.
package llmclient
