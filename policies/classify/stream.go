package classify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
	openai "github.com/sashabaranov/go-openai"
)

// Stream is what reading a streamed reply saw.
type Stream struct {
	// Chunks counts the chunks that carried a content, reasoning or
	// tool-call delta; Tokens the completion tokens received so far.
	Chunks, Tokens int
	// Finished is set when a chunk carried a finish_reason.
	Finished bool
	// Err ended the reading (nil when the stream ended with [DONE] or a
	// clean end of body).
	Err error
	// FirstTokenTimedOut: no first chunk within FirstTokenTimeout (the
	// headers may have come). IdleTimedOut: no chunk within IdleTimeout
	// once the stream had started.
	FirstTokenTimedOut, IdleTimedOut bool
	FirstTokenTimeout, IdleTimeout   time.Duration
}

// classifyStream judges a streamed reply once its stream was opened: a
// stream that never produced a chunk is judged as the reply it was (no
// first token in time is read_timeout; an error object is judged by its
// code, as a non-streamed body is); a stream that broke after it had
// started is stream_broken; one that ended cleanly is judged by its
// assembled answer.
func classifyStream(obs Observation, v Verdict) Verdict {
	st := obs.Stream
	after := fmt.Sprintf("after %d chunk(s), %d token(s)", st.Chunks, st.Tokens)
	switch {
	case st.FirstTokenTimedOut:
		return v.is(failure.ReadTimeout, fmt.Sprintf("no first token within %s: the request is queued upstream", st.FirstTokenTimeout))
	case st.IdleTimedOut:
		return v.is(failure.StreamBroken, fmt.Sprintf("no chunk within %s %s", st.IdleTimeout, after))
	case st.Err != nil && errors.Is(st.Err, context.Canceled):
		v.Canceled = true
		return v.withDetail(st.Err).is(failure.Timeout, "cancelled by the caller")
	case st.Err != nil && obs.AttemptTimedOut:
		return v.is(failure.Timeout, "attempt deadline exceeded "+after)
	case st.Err != nil && st.Chunks == 0 && errors.As(st.Err, new(*openai.APIError)):
		// An error object instead of the first chunk: as a non-streamed
		// HTTP 200 error body, judged by its code, else body_error.
		var apiErr *openai.APIError
		errors.As(st.Err, &apiErr)
		info := errorInfo{code: anyString(apiErr.Code), typ: apiErr.Type, message: apiErr.Message, isError: true}
		v.Code, v.Type, v.Message = info.code, info.typ, cleanMessage(info.message)
		seen := describeResponse(v, info) + " with an error object in the stream"
		if c, why := classByCode(info, v.Status); c != failure.None {
			return v.is(c, seen+" ("+why+")")
		}
		return v.is(failure.BodyError, seen)
	case st.Err != nil && st.Chunks == 0:
		// Nothing was received: judge it as the reply it is (a cut or
		// malformed body).
		inner := obs
		inner.Stream, inner.Err, inner.Response = nil, st.Err, nil
		if inner.Status == 0 {
			inner.Status = 200
		}
		return Classify(inner)
	case st.Err != nil:
		var apiErr *openai.APIError
		if errors.As(st.Err, &apiErr) {
			v.Code, v.Type, v.Message = anyString(apiErr.Code), apiErr.Type, cleanMessage(apiErr.Message)
			what := "error inside the stream"
			if c := codeOf(errorInfo{code: v.Code, typ: v.Type}); c != "" {
				what += " " + c
			}
			return v.withDetail(st.Err).is(failure.StreamBroken, what+" "+after)
		}
		var mc *MalformedChunk
		if errors.As(st.Err, &mc) {
			return v.withDetail(st.Err).is(failure.StreamBroken, "malformed chunk "+after+": "+mc.What)
		}
		if isJSONError(st.Err) {
			return v.withDetail(st.Err).is(failure.StreamBroken, "malformed chunk "+after)
		}
		v.Cut = true
		return v.withDetail(st.Err).is(failure.StreamBroken, "stream cut "+after+" ("+errKind(st.Err)+")")
	case !st.Finished && st.Chunks == 0:
		return v.is(failure.BodyError, "the stream ended without a chunk")
	case !st.Finished:
		v.Cut = true
		return v.is(failure.StreamBroken, "the stream ended without a finish_reason "+after)
	}
	return classifyReply(obs, v)
}

// MalformedChunk is a stream's chunk that decoded but cannot be used
// (a tool call's index out of range). What says so in the product's words
// and numbers, so a reason may quote it.
type MalformedChunk struct{ What string }

func (e *MalformedChunk) Error() string { return "malformed chunk: " + e.What }
