package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
)

// callersLimit reports whether the attempt's max_tokens is the one the
// caller set (the request's, not grown by a retry).
func callersLimit(in CallInput) bool {
	return in.Request.MaxTokens > 0 && in.Shape.MaxTokens == in.Request.MaxTokens && in.Continue == ""
}

// usableAnswer reports whether a reply that stopped at its limit holds an
// answer: text besides thinking, or a tool call (checked after).
func usableAnswer(resp openai.ChatCompletionResponse) bool {
	if len(resp.Choices) == 0 {
		return false
	}
	msg := resp.Choices[0].Message
	return len(msg.ToolCalls) > 0 || classify.StripThinking(answerText(resp)) != ""
}

// bodyLimit makes an attempt whose reply went over http.max_body_bytes
// body_error, whatever the rest of the reply said: its body, one of its
// stream's lines or its streamed answer (read up to the limit, then
// dropped), or a reply whose answer is over the limit once JSON-encoded
// for history (a plain body may write < as one byte; history takes six).
// The status and the upstream's Retry-After stay.
func (a *Activities) bodyLimit(v classify.Verdict, ex *exchange, obs classify.Observation, resp openai.ChatCompletionResponse) classify.Verdict {
	lim := ex.tooLarge()
	if lim == nil && obs.Stream != nil {
		errors.As(obs.Stream.Err, &lim)
	}
	if lim == nil && v.Class == failure.None {
		if n, limit := answerSize(resp), a.cfg.HTTP.MaxBodyBytes; limit > 0 && n > limit {
			lim = &bodyLimitError{what: fmt.Sprintf("answer (%d bytes JSON-encoded)", n), limit: int64(limit)}
		}
	}
	if lim == nil {
		return v
	}
	reason := lim.Error()
	if v.Status != 0 {
		reason = fmt.Sprintf("HTTP %d, %s", v.Status, reason)
	}
	if obs.Stream != nil && obs.Stream.Chunks > 0 {
		reason += fmt.Sprintf(" after %d chunk(s)", obs.Stream.Chunks)
	}
	return classify.Verdict{Class: failure.BodyError, Status: v.Status, Reason: reason,
		RetryAfter: v.RetryAfter, HasRetryAfter: v.HasRetryAfter,
		RateLimitRemaining: v.RateLimitRemaining, HasRateLimitRemaining: v.HasRateLimitRemaining}
}

// answerSize is what the answer of a reply takes in the attempt's
// outcome, JSON-encoded: text, tool calls and logprobs.
func answerSize(resp openai.ChatCompletionResponse) int {
	if len(resp.Choices) == 0 {
		return 0
	}
	ch := resp.Choices[0]
	n := encodedLen(answerText(resp))
	for _, tc := range ch.Message.ToolCalls {
		n += encodedLen(tc.ID) + encodedLen(tc.Function.Name) + encodedLen(tc.Function.Arguments)
	}
	if ch.LogProbs != nil {
		for _, lp := range ch.LogProbs.Content {
			n += logprobSize(lp.Token, nil) + 4*len(lp.Bytes)
			for _, top := range lp.TopLogProbs {
				n += logprobSize(top.Token, nil) + 4*len(top.Bytes)
			}
		}
	}
	return n
}

// answerText is the text of a reply's first choice.
func answerText(resp openai.ChatCompletionResponse) string {
	if len(resp.Choices) == 0 {
		return ""
	}
	msg := resp.Choices[0].Message
	if msg.Content != "" {
		return msg.Content
	}
	var b strings.Builder
	for _, part := range msg.MultiContent {
		b.WriteString(part.Text)
	}
	return b.String()
}

// toolCalls converts a reply's tool calls. A call without an id (some
// servers send none) gets one made from the attempt's request ID, so the
// agent can answer it in its next turn, and a resend names it alike.
func toolCalls(calls []openai.ToolCall, requestID string) []request.ToolCall {
	var out []request.ToolCall
	for i, c := range calls {
		typ := string(c.Type)
		if typ == "" {
			typ = "function"
		}
		id := c.ID
		if id == "" {
			sum := sha256.Sum256([]byte(requestID))
			id = fmt.Sprintf("call_%s_%d", hex.EncodeToString(sum[:8]), i)
		}
		out = append(out, request.ToolCall{ID: id, Type: typ, Function: request.FunctionCall{Name: c.Function.Name, Arguments: c.Function.Arguments}})
	}
	return out
}

// checked reports whether an answer to r is checked before the caller sees
// any of it: tool calls and JSON answers may be repaired.
func checked(r request.Request) bool { return r.NeedsTools() || r.JSONAnswer() }
