package llmsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Anthropic's Messages API (POST /v1/messages): the request is mapped onto
// the chat request the pipeline reads, and the answer, errors and stream
// are written in Anthropic's wire format. Everything else (plan, faults,
// capacity, pacing, stats) is the chat path's.

// anthropicRequest is the part of a Messages request the simulator reads.
type anthropicRequest struct {
	Model         string               `json:"model"`
	MaxTokens     *int                 `json:"max_tokens"`
	System        json.RawMessage      `json:"system"`
	Messages      []anthropicMessage   `json:"messages"`
	Tools         []anthropicTool      `json:"tools"`
	ToolChoice    *anthropicToolChoice `json:"tool_choice"`
	StopSequences []string             `json:"stop_sequences"`
	Temperature   *float64             `json:"temperature"`
	Stream        bool                 `json:"stream"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is a content block of a request: text, image, tool_use,
// tool_result (others are ignored).
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicToolChoice struct {
	Type string `json:"type"` // auto, any, tool, none
	Name string `json:"name"`
}

// anthropicFields are the top-level Messages fields the simulator reads or
// knows; the others are recorded as they came (Generation.Extra).
var anthropicFields = []string{"model", "max_tokens", "system", "messages", "tools", "tool_choice",
	"stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata", "thinking", "service_tier"}

// decodeAnthropic reads a Messages request into x.req. Its error, a bad
// body or a missing required field, is the 400's message.
func (x *exchange) decodeAnthropic(body []byte) error {
	var a anthropicRequest
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("invalid request body: %v", err)
	}
	x.extra = extraFields(body, anthropicFields)
	x.req = chatRequest{Model: a.Model, Stream: a.Stream, MaxTokens: a.MaxTokens, Temperature: a.Temperature,
		stop: a.StopSequences, ToolChoice: a.ToolChoice.chat()}
	switch {
	case a.Model == "":
		return errors.New("model: Field required")
	case a.MaxTokens == nil:
		return errors.New("max_tokens: Field required")
	case *a.MaxTokens < 1:
		return errors.New("max_tokens: Input should be greater than or equal to 1")
	case a.Messages == nil:
		return errors.New("messages: Field required")
	case len(a.Messages) == 0:
		return errors.New("messages: at least one message is required")
	}
	for _, t := range a.Tools {
		ct := tool{Type: "function"}
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, t.InputSchema
		x.req.Tools = append(x.req.Tools, ct)
	}
	sys, err := blocksText(a.System)
	if err != nil {
		return fmt.Errorf("system: %v", err)
	}
	if sys != "" {
		x.req.Messages = append(x.req.Messages, Message{Role: "system", Content: sys})
	}
	for i, m := range a.Messages {
		msgs, err := m.chat(i)
		if err != nil {
			return err
		}
		x.req.Messages = append(x.req.Messages, msgs...)
	}
	// A last assistant message is Anthropic's prefill: the answer
	// continues it (see Continuation).
	if n := len(x.req.Messages); x.req.Messages[n-1].Role == "assistant" && len(x.req.Messages[n-1].ToolCalls) == 0 {
		x.req.Messages[n-1].Prefix = true
	}
	return nil
}

// chat maps message i onto chat messages: a user message's tool_result
// blocks become tool messages (before its text), an assistant message's
// tool_use blocks its tool calls. Images and other blocks carry no text,
// as image parts on the chat wire.
func (m anthropicMessage) chat(i int) ([]Message, error) {
	blocks, err := parseBlocks(m.Content)
	if err != nil {
		return nil, fmt.Errorf("messages.%d.content: %v", i, err)
	}
	var out []Message
	var texts []string
	var calls []ToolCall
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case "tool_use":
			c := ToolCall{ID: b.ID, Type: "function"}
			c.Function.Name, c.Function.Arguments = b.Name, "{}"
			if len(b.Input) > 0 {
				var buf bytes.Buffer
				if json.Compact(&buf, b.Input) == nil {
					c.Function.Arguments = buf.String()
				}
			}
			calls = append(calls, c)
		case "tool_result":
			text, err := blocksText(b.Content)
			if err != nil {
				return nil, fmt.Errorf("messages.%d.content: tool_result: %v", i, err)
			}
			if b.IsError {
				text = "error: " + text
			}
			out = append(out, Message{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
		}
	}
	text := strings.Join(texts, "\n")
	switch m.Role {
	case "user":
		if len(texts) > 0 || len(out) == 0 {
			out = append(out, Message{Role: "user", Content: text})
		}
	case "assistant":
		out = append(out, Message{Role: "assistant", Content: text, ToolCalls: calls})
	default:
		return nil, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
	}
	return out, nil
}

// parseBlocks reads content given as a string (one text block) or blocks.
func parseBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	c := bytes.TrimSpace(raw)
	switch {
	case len(c) == 0 || string(c) == "null":
		return nil, nil
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return nil, err
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	case c[0] == '[':
		var blocks []anthropicBlock
		err := json.Unmarshal(c, &blocks)
		return blocks, err
	}
	return nil, errors.New("Input should be a valid string or a list of content blocks")
}

// blocksText is the text of content given as a string or blocks (text
// blocks joined by newlines).
func blocksText(raw json.RawMessage) (string, error) {
	blocks, err := parseBlocks(raw)
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), err
}

// chat maps tool_choice onto the chat wire's: any is required, tool a
// named function.
func (c *anthropicToolChoice) chat() json.RawMessage {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "any":
		return json.RawMessage(`"required"`)
	case "none":
		return json.RawMessage(`"none"`)
	case "tool":
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
		return b
	}
	return json.RawMessage(`"auto"`)
}

// anthropicErrorBody is Anthropic's error envelope.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anthropicError(typ, msg string) anthropicErrorBody {
	e := anthropicErrorBody{Type: "error"}
	e.Error.Type, e.Error.Message = typ, msg
	return e
}

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// anthropicMsg is a Messages answer (and message_start's message).
type anthropicMsg struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []contentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// contentBlock is a content block of an answer: text, thinking or
// tool_use.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// args are a tool_use's arguments as generated, streamed as
	// input_json_delta (cut JSON under bad_tool_args).
	args string
}

// anthropicMessage is the Messages answer of rd.
func (x *exchange) anthropicMessage(rd rendered) anthropicMsg {
	m := anthropicMsg{ID: x.id(), Type: "message", Role: "assistant", Model: x.req.Model,
		Content: x.blocks(rd), StopReason: stopReason(rd),
		Usage: anthropicUsage{InputTokens: rd.prompt, OutputTokens: rd.completion}}
	if rd.stopSequence != "" {
		m.StopSequence = strp(rd.stopSequence)
	}
	return m
}

// blocks are the content blocks of rd: thinking (reasoning), tool_use
// calls, then text. no_choices has none; an empty answer none but
// empty_content's empty text block.
func (x *exchange) blocks(rd rendered) []contentBlock {
	out := []contentBlock{}
	if rd.noChoices {
		return out
	}
	if rd.reasoning != "" {
		out = append(out, contentBlock{Type: "thinking", Thinking: strp(rd.reasoning), Signature: strp("llmsim-" + shortHash(rd.reasoning))})
	}
	for _, c := range rd.toolCalls {
		out = append(out, contentBlock{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: toolInput(c.Function.Arguments), args: c.Function.Arguments})
	}
	if rd.content != "" || (x.rec.Fault == FaultEmptyContent && len(rd.toolCalls) == 0) {
		out = append(out, contentBlock{Type: "text", Text: strp(rd.content)})
	}
	return out
}

// toolInput is a tool_use's input: the arguments when they are a JSON
// object; else (bad_tool_args' cut JSON) an object holding them as a
// string under INVALID_JSON, since a non-streamed input is always an
// object.
func toolInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(map[string]string{"INVALID_JSON": args})
	return b
}

// stopReason maps finish_reason onto stop_reason: stop is end_turn (or
// stop_sequence), length max_tokens, tool_calls tool_use, content_filter
// refusal; no_choices has none (null).
func stopReason(rd rendered) *string {
	switch {
	case rd.noChoices:
		return nil
	case rd.finish == "length":
		return strp("max_tokens")
	case rd.finish == "tool_calls":
		return strp("tool_use")
	case rd.finish == "content_filter":
		return strp("refusal")
	case rd.stopSequence != "":
		return strp("stop_sequence")
	}
	return strp("end_turn")
}
