package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The request fields agents use besides messages (docs/agents.md): tools,
// structured outputs, sampling controls and image parts. They are plain
// JSON in the chat-completions shape, so a CallRequest written by any
// Temporal SDK carries them as the OpenAI API spells them.

// Tool is a function the model may call.
type Tool struct {
	// Type is "function" (the only kind of tool).
	Type     string       `json:"type"`
	Function FunctionTool `json:"function"`
}

// FunctionTool describes a callable function: its name, what it does and
// the JSON Schema of its arguments.
type FunctionTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments object, kept as sent.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Strict     *bool           `json:"strict,omitempty"`
}

// The modes of tool_choice.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// ToolChoice is OpenAI's tool_choice: a mode ("none", "auto",
// "required") or one named function ({"type": "function", "function":
// {"name": …}}), which it is when Function is set.
type ToolChoice struct {
	Mode     string
	Function string
}

// MarshalJSON writes the mode as a string, a named function as the object.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.Function != "" {
		return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Function}})
	}
	return json.Marshal(c.Mode)
}

// UnmarshalJSON reads either form.
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	var mode string
	if err := json.Unmarshal(b, &mode); err == nil {
		*c = ToolChoice{Mode: mode}
		return nil
	}
	var obj struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}")
	}
	if obj.Type != "function" || obj.Function == nil || obj.Function.Name == "" {
		return fmt.Errorf("want {\"type\": \"function\", \"function\": {\"name\": …}} naming a function")
	}
	*c = ToolChoice{Function: obj.Function.Name}
	return nil
}

// String is the mode, or "function <name>".
func (c ToolChoice) String() string {
	if c.Function != "" {
		return "function " + c.Function
	}
	return c.Mode
}

// The types of response_format.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat is OpenAI's response_format.
type ResponseFormat struct {
	// Type is text, json_object or json_schema.
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema names the schema an answer must match.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Stop is the stop sequences; it reads a single string as one sequence.
type Stop []string

// UnmarshalJSON accepts a string, an array of strings or null.
func (s *Stop) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or an array of strings")
	}
	*s = many
	return nil
}

// The kinds of content part.
const (
	PartText     = "text"
	PartImageURL = "image_url"
)

// Part is one content part of a message: text, or an image by URL (http
// or https) or as a data URI.
type Part struct {
	Type     string    `json:"type" yaml:"type"`
	Text     string    `json:"text,omitempty" yaml:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty" yaml:"image_url,omitempty"`
}

// ImageURL is an image part's image and the detail it is seen at.
type ImageURL struct {
	URL    string `json:"url" yaml:"url"`
	Detail string `json:"detail,omitempty" yaml:"detail,omitempty"`
}

// messageJSON is Message on the wire, content still raw.
type messageJSON struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// MarshalJSON writes content as a string, or as the array of parts when
// the message has image parts.
func (m Message) MarshalJSON() ([]byte, error) {
	w := messageJSON{Role: m.Role, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	var err error
	if len(m.Parts) > 0 {
		w.Content, err = json.Marshal(m.Parts)
	} else {
		w.Content, err = json.Marshal(m.Content)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads content as a string, null, or an array of parts. An
// array of text parts only becomes Content (joined by newlines); one with
// an image is kept in Parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w messageJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Message{Role: w.Role, Name: w.Name, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID}
	raw := bytes.TrimSpace(w.Content)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil
	case raw[0] == '"':
		return json.Unmarshal(raw, &m.Content)
	case raw[0] == '[':
		var parts []Part
		if err := json.Unmarshal(raw, &parts); err != nil {
			return fmt.Errorf("content: want a string or an array of parts: %w", err)
		}
		m.SetParts(parts)
		return nil
	}
	return fmt.Errorf("content: want a string or an array of parts, got %s", raw)
}

// SetParts stores content parts: text only becomes Content (joined by
// newlines), parts with an image stay in Parts.
func (m *Message) SetParts(parts []Part) {
	for _, p := range parts {
		if p.Type != PartText {
			m.Parts = parts
			return
		}
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	m.Content = strings.Join(texts, "\n")
}

// Question is the text of the request's last user message: the question
// rules, the FAQ and the steps read ("" when there is none).
func (r Request) Question() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == RoleUser {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// Instructs reports whether m is a system or developer message: the
// instructions of the conversation, not a turn of it.
func (m Message) Instructs() bool {
	return m.Role == RoleSystem || m.Role == RoleDeveloper
}

// Text is the message's text: Content, or its text parts joined by
// newlines.
func (m Message) Text() string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var texts []string
	for _, p := range m.Parts {
		if p.Type == PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Images counts the message's image parts.
func (m Message) Images() int {
	n := 0
	for _, p := range m.Parts {
		if p.Type == PartImageURL {
			n++
		}
	}
	return n
}

// NeedsTools reports whether r offers tools the model may call.
func (r Request) NeedsTools() bool {
	return len(r.Tools) > 0 && (r.ToolChoice == nil || r.ToolChoice.Mode != ToolChoiceNone)
}

// RequiresToolCall reports whether the only valid answer to r is a tool
// call (tool_choice required, or a named function).
func (r Request) RequiresToolCall() bool {
	return len(r.Tools) > 0 && r.ToolChoice != nil && (r.ToolChoice.Mode == ToolChoiceRequired || r.ToolChoice.Function != "")
}

// JSONAnswer reports whether r asks for a JSON answer (json_object or
// json_schema).
func (r Request) JSONAnswer() bool {
	return r.ResponseFormat != nil && (r.ResponseFormat.Type == FormatJSONObject || r.ResponseFormat.Type == FormatJSONSchema)
}

// Schema is r's JSON schema, nil unless response_format is json_schema.
func (r Request) Schema() json.RawMessage {
	if r.ResponseFormat == nil || r.ResponseFormat.Type != FormatJSONSchema || r.ResponseFormat.JSONSchema == nil {
		return nil
	}
	return r.ResponseFormat.JSONSchema.Schema
}

// Structured reports whether a text answer that is not a model's cannot
// answer r: it requires a tool call, or a JSON answer (json_object or
// json_schema) (docs/agents.md: the FAQ is no answer to an agent that
// must parse it).
func (r Request) Structured() bool {
	return r.RequiresToolCall() || r.JSONAnswer()
}

// HasTool reports whether r offers a function named name.
func (r Request) HasTool(name string) bool {
	_, ok := r.tool(name)
	return ok
}

// ToolNames lists the functions r offers, in order.
func (r Request) ToolNames() []string {
	out := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		out[i] = t.Function.Name
	}
	return out
}
