package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/classify"
)

// anthropicUpstream is a model served by Anthropic's Messages API, through
// Anthropic's Go SDK. A request is said in Anthropic's words and its
// answer read back into the chat completions shape; Anthropic's errors
// become go-openai's, so that the classifier reads Anthropic's signals as
// Anthropic sends them: its error envelope's type (overloaded_error,
// rate_limit_error, …), the status the recorder saw (529, 429), and an
// error event inside an HTTP 200 stream.
type anthropicUpstream struct{ c anthropic.Client }

// noSDKTimeout stands in for the SDK's own per-request timeout, which it
// otherwise derives from max_tokens (and then refuses long non-streamed
// answers): the attempt's context is the only deadline.
const noSDKTimeout = 24 * time.Hour

func (u anthropicUpstream) create(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	params, trimmed, err := messageParams(req)
	if err != nil {
		return openai.ChatCompletionResponse{}, err
	}
	msg, err := u.c.Messages.New(ctx, params, option.WithRequestTimeout(noSDKTimeout))
	if err != nil {
		return openai.ChatCompletionResponse{}, fromAnthropicError(err)
	}
	resp := chatResponse(msg)
	resp.Choices[0].Message.Content, _ = dropRewritten(resp.Choices[0].Message.Content, trimmed)
	return resp, nil
}

func (u anthropicUpstream) openStream(ctx context.Context, req openai.ChatCompletionRequest) (chunkStream, error) {
	params, trimmed, err := messageParams(req)
	if err != nil {
		return nil, err
	}
	// The SDK sends the request here and returns a stream that already
	// holds a refusal's error.
	s := u.c.Messages.NewStreaming(ctx, params, option.WithHeader("Accept", "text/event-stream"))
	if err := s.Err(); err != nil {
		s.Close()
		return nil, fromAnthropicError(err)
	}
	return &anthropicChunks{s: s, tools: map[int64]int{}, argued: map[int64]bool{}, pending: trimmed}, nil
}

// fromAnthropicError is an error of Anthropic's SDK as go-openai reports
// one: an *openai.APIError with the envelope's type and message and the
// reply's status (200 for an error event inside a stream). Other errors
// (transport, context) are returned as they are.
func fromAnthropicError(err error) error {
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) {
		return err
	}
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(aerr.RawJSON()), &env)
	return &openai.APIError{Type: env.Error.Type, Message: env.Error.Message, HTTPStatusCode: aerr.StatusCode}
}

// anthropicStops are Anthropic's stop reasons as chat completions'
// finish reasons.
var anthropicStops = map[anthropic.StopReason]openai.FinishReason{
	anthropic.StopReasonEndTurn:      openai.FinishReasonStop,
	anthropic.StopReasonStopSequence: openai.FinishReasonStop,
	anthropic.StopReasonPauseTurn:    openai.FinishReasonStop,
	anthropic.StopReasonMaxTokens:    openai.FinishReasonLength,
	anthropic.StopReasonToolUse:      openai.FinishReasonToolCalls,
	anthropic.StopReasonRefusal:      openai.FinishReasonContentFilter,
	"model_context_window_exceeded":  openai.FinishReasonLength,
}

// finishReason is Anthropic's stop reason r as a finish reason: a reason
// this table does not know still ends the answer.
func finishReason(r anthropic.StopReason) openai.FinishReason {
	if f, ok := anthropicStops[r]; ok {
		return f
	}
	if r != "" {
		return openai.FinishReasonStop
	}
	return ""
}

// chatResponse is an Anthropic message as a chat completion: its text
// blocks joined, its tool_use blocks as tool calls, its thinking as
// reasoning.
func chatResponse(msg *anthropic.Message) openai.ChatCompletionResponse {
	out := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	var text, thinking strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			thinking.WriteString(b.Thinking)
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, openai.ToolCall{ID: b.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: b.Name, Arguments: string(b.Input)}})
		}
	}
	out.Content, out.ReasoningContent = text.String(), thinking.String()
	u := msg.Usage
	prompt := int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens)
	return openai.ChatCompletionResponse{
		ID: msg.ID, Object: "chat.completion", Model: string(msg.Model),
		Choices: []openai.ChatCompletionChoice{{Message: out, FinishReason: finishReason(msg.StopReason)}},
		Usage:   openai.Usage{PromptTokens: prompt, CompletionTokens: int(u.OutputTokens), TotalTokens: prompt + int(u.OutputTokens)},
	}
}

// anthropicChunks reads Anthropic's stream events as chat completion
// chunks: text and thinking deltas as content and reasoning, a tool_use
// block and its input_json deltas as a tool call by index, message_delta
// as the finish reason and usage.
type anthropicChunks struct {
	s         *ssestream.Stream[anthropic.MessageStreamEventUnion]
	id, model string
	prompt    int
	tools     map[int64]int // content block index → tool call index
	// argued are the tool_use blocks whose input came in deltas; one
	// that ends without any had the input {} (a tool with no arguments).
	argued map[int64]bool
	// pending is the whitespace a prefill lost, dropped from the text
	// when the model writes it again (dropRewritten).
	pending string
}

func (a *anthropicChunks) Recv() (openai.ChatCompletionStreamResponse, error) {
	for a.s.Next() {
		if chunk, ok := a.chunk(a.s.Current()); ok {
			chunk.ID, chunk.Model, chunk.Object = a.id, a.model, "chat.completion.chunk"
			return chunk, nil
		}
	}
	if err := a.s.Err(); err != nil {
		return openai.ChatCompletionStreamResponse{}, fromAnthropicError(err)
	}
	return openai.ChatCompletionStreamResponse{}, io.EOF
}

func (a *anthropicChunks) Close() error { return a.s.Close() }

// chunk is ev as a chunk; ok is false for an event that carries none.
func (a *anthropicChunks) chunk(ev anthropic.MessageStreamEventUnion) (c openai.ChatCompletionStreamResponse, ok bool) {
	var d openai.ChatCompletionStreamChoiceDelta
	var finish openai.FinishReason
	switch ev.Type {
	case "message_start":
		a.id, a.model = ev.Message.ID, string(ev.Message.Model)
		u := ev.Message.Usage
		a.prompt = int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens)
		return c, false
	case "content_block_start":
		b := ev.ContentBlock
		switch b.Type {
		case "tool_use":
			i := len(a.tools)
			a.tools[ev.Index] = i
			d.ToolCalls = []openai.ToolCall{{Index: &i, ID: b.ID, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: b.Name}}}
		case "text":
			d.Content, a.pending = dropRewritten(b.Text, a.pending)
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			d.Content, a.pending = dropRewritten(ev.Delta.Text, a.pending)
		case "thinking_delta":
			d.ReasoningContent = ev.Delta.Thinking
		case "input_json_delta":
			i, known := a.tools[ev.Index]
			if !known {
				i = -1 // arguments of a call never started: a malformed chunk
			}
			if ev.Delta.PartialJSON == "" {
				return c, false
			}
			a.argued[ev.Index] = true
			d.ToolCalls = []openai.ToolCall{{Index: &i, Function: openai.FunctionCall{Arguments: ev.Delta.PartialJSON}}}
		}
	case "content_block_stop":
		i, isTool := a.tools[ev.Index]
		if !isTool || a.argued[ev.Index] {
			return c, false
		}
		d.ToolCalls = []openai.ToolCall{{Index: &i, Function: openai.FunctionCall{Arguments: "{}"}}}
	case "message_delta":
		finish = finishReason(ev.Delta.StopReason)
		out := int(ev.Usage.OutputTokens)
		c.Usage = &openai.Usage{PromptTokens: a.prompt, CompletionTokens: out, TotalTokens: a.prompt + out}
	}
	if d.Content == "" && d.ReasoningContent == "" && len(d.ToolCalls) == 0 && finish == "" && c.Usage == nil {
		return c, false
	}
	c.Choices = []openai.ChatCompletionStreamChoice{{Delta: d, FinishReason: finish}}
	return c, true
}

// errNotSaid is a request the Messages API has no words for.
func errNotSaid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{classify.ErrNotTranslatable}, args...)...)
}
