package llmsim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Message is one chat message of a request, as the simulator reads it.
// Content may arrive as a string or as an array of content parts; Content
// holds the text either way.
type Message struct {
	// Role is "system", "developer", "user", "assistant" or "tool".
	Role string `json:"role"`
	// Content is the message text (text parts joined by newlines).
	Content string `json:"content"`
	// Name is the optional participant name.
	Name string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant message requests.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to its call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Prefix is DeepSeek's flag on a final assistant message: continue its
	// text.
	Prefix bool `json:"prefix,omitempty"`
}

// ToolCall is a function call of an assistant message.
type ToolCall struct {
	// ID of the call.
	ID string `json:"id"`
	// Type is "function".
	Type string `json:"type"`
	// Function names the function and carries its arguments.
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Text returns the message's text.
func (m Message) Text() string { return m.Content }

// UnmarshalJSON accepts content as a string, null, or an array of parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Prefix     bool            `json:"prefix"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role, Name: raw.Name, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID, Prefix: raw.Prefix}
	c := strings.TrimSpace(string(raw.Content))
	switch {
	case c == "" || c == "null":
	case c[0] == '"':
		return json.Unmarshal(raw.Content, &m.Content)
	case c[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw.Content, &parts); err != nil {
			return err
		}
		var texts []string
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		m.Content = strings.Join(texts, "\n")
	default:
		return &json.UnmarshalTypeError{Value: "content", Field: "content"}
	}
	return nil
}

// chatRequest is the part of a chat-completions request the simulator reads.
type chatRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	// vLLM's chat-template flags: continue the final assistant message.
	ContinueFinalMessage *bool `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	// Tools, tool_choice and response_format (see renderAgent);
	// temperature as sent.
	Tools          []tool          `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat *responseFormat `json:"response_format"`
	Temperature    *float64        `json:"temperature"`
	// stop are the stop sequences that end an answer (Anthropic's
	// stop_sequences; the OpenAI wire's stop is not simulated).
	stop []string
}

// continuation describes a request to continue the last assistant message.
type continuation struct {
	asked  bool   // the request carries continue_final_message or prefix
	field  string // the flag's name, for errors
	prefix string // the text to continue
	bad    string // why the request is invalid ("" when it is not)
}

// continuation reads the continuation flags: vLLM's top-level
// continue_final_message (which needs add_generation_prompt: false) or
// DeepSeek's prefix: true on the last message, which must be the
// assistant's.
func (r *chatRequest) continuation() continuation {
	var c continuation
	n := len(r.Messages)
	if r.ContinueFinalMessage != nil && *r.ContinueFinalMessage {
		c.asked, c.field = true, "continue_final_message"
		if r.AddGenerationPrompt == nil || *r.AddGenerationPrompt {
			c.bad = "Cannot set both `continue_final_message` and `add_generation_prompt` to True (add_generation_prompt defaults to True: send false)."
		}
	}
	for i, m := range r.Messages {
		if m.Prefix {
			c.asked, c.field = true, fmt.Sprintf("messages[%d].prefix", i)
			if i != n-1 && c.bad == "" {
				c.bad = "prefix: true is only allowed on the last message."
			}
		}
	}
	if !c.asked {
		return c
	}
	if n == 0 || r.Messages[n-1].Role != "assistant" {
		if c.bad == "" {
			c.bad = "continue_final_message / prefix: the last message must be an assistant message."
		}
		return c
	}
	c.prefix = r.Messages[n-1].Content
	return c
}

func (r *chatRequest) maxTokens() int {
	if r.MaxCompletionTokens != nil && *r.MaxCompletionTokens > 0 {
		return *r.MaxCompletionTokens
	}
	if r.MaxTokens != nil && *r.MaxTokens > 0 {
		return *r.MaxTokens
	}
	return 0
}

// question returns the current turn's question: its first user message
// (later ones, like a client's note on a rejected answer, and tool
// results do not change what is asked), else the last user message, else "".
func (r *chatRequest) question() string {
	for _, m := range r.Messages[r.turn():] {
		if m.Role == "user" {
			return m.Content
		}
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

type chatResponse struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []choice `json:"choices"`
	Usage             *usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      *respMessage `json:"message,omitempty"`
	Delta        *respMessage `json:"delta,omitempty"`
	FinishReason *string      `json:"finish_reason"`
	Logprobs     *struct{}    `json:"logprobs"`
}

type respMessage struct {
	Role             string        `json:"role,omitempty"`
	Content          *string       `json:"content,omitempty"`
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []simToolCall `json:"tool_calls,omitempty"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type errorBody struct {
	Error apiError `json:"error"`
}

func strp(s string) *string { return &s }

func newAPIError(typ, code, msg string) errorBody {
	e := errorBody{Error: apiError{Message: msg, Type: typ}}
	if code != "" {
		e.Error.Code = strp(code)
	}
	return e
}
