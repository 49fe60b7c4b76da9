package frontdoor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/durable-llm/durable-llm/policies/request"
)

// messagesHandled are the request fields decodeMessagesRequest reads.
var messagesHandled = []string{"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
	"top_p", "metadata", "stream", "tools", "tool_choice"}

// messagesIgnored are Messages API fields that do not change the answer an
// OpenAI-compatible upstream gives: accepted and not sent upstream.
var messagesIgnored = []string{"service_tier", "thinking", "container", "context_management"}

// messagesUnsupported explains Messages API fields the front door refuses.
var messagesUnsupported = map[string]string{
	"top_k":       "not supported by the OpenAI-compatible upstreams (a model's passthrough list in the policy can forward it)",
	"mcp_servers": "MCP servers are not supported: send the tools as tools",
}

// decodeMessagesRequest decodes an Anthropic Messages API body, naming the
// field of every problem as the client sent it (messages[1].content[0].source,
// tools[2].input_schema, …).
func decodeMessagesRequest(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	return decodeMessages(body, passthrough, true)
}

// decodeMessages is decodeMessagesRequest, max_tokens required or not
// (count_tokens does not take it).
func decodeMessages(body []byte, passthrough map[string]bool, needMaxTokens bool) (chatRequest, *fieldError) {
	var req chatRequest
	top, ferr := decodeTop(body)
	if ferr != nil {
		return req, ferr
	}
	if err := sortFields(top, fieldSet{messagesHandled, messagesIgnored, messagesUnsupported}, passthrough, &req.Agent); err != nil {
		return req, err
	}
	if raw, ok := top["model"]; !ok || isNull(raw) {
		return req, &fieldError{"model", "missing (want a model of the ladder)"}
	}
	if err := decodeString(top, "model", &req.Model); err != nil {
		return req, err
	}
	var maxTokens *int
	if err := decodeField(top, "max_tokens", &maxTokens, "an integer"); err != nil {
		return req, err
	}
	switch {
	case maxTokens == nil && needMaxTokens:
		return req, &fieldError{"max_tokens", "missing (the Messages API requires it: the most tokens the answer may have)"}
	case maxTokens != nil && *maxTokens < 1:
		return req, &fieldError{"max_tokens", fmt.Sprintf("want at least 1, got %d", *maxTokens)}
	case maxTokens != nil:
		req.MaxTokens, req.maxTokensBy = *maxTokens, "max_tokens"
	}
	for _, f := range []struct {
		name, want string
		dst        any
	}{
		{"temperature", "a number", &req.Temperature}, {"top_p", "a number", &req.Agent.TopP},
		{"stop_sequences", "an array of strings", &req.Agent.Stop},
	} {
		if raw, ok := top[f.name]; ok && isNull(raw) {
			continue
		}
		if err := decodeField(top, f.name, f.dst, f.want); err != nil {
			return req, err
		}
	}
	var stream *bool
	if err := decodeField(top, "stream", &stream, "a boolean"); err != nil {
		return req, err
	}
	req.Stream = stream != nil && *stream
	var metadata map[string]json.RawMessage
	if err := decodeField(top, "metadata", &metadata, "an object {user_id}"); err != nil {
		return req, err
	}
	if err := stringAt(metadata, "user_id", "metadata", &req.User); err != nil {
		return req, err
	}
	if err := decodeMessageTools(top, &req.Agent); err != nil {
		return req, err
	}
	return req, decodeMessagesInput(top, &req)
}

// decodeMessageTools reads tools ({name, description, input_schema}) and
// tool_choice ({type: auto | any | tool | none, name,
// disable_parallel_tool_use}).
func decodeMessageTools(top map[string]json.RawMessage, r *request.Request) *fieldError {
	if raw, ok := top["tools"]; ok && !isNull(raw) {
		var tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &tools); err != nil {
			return &fieldError{"tools", "want an array of {name, description, input_schema}"}
		}
		r.Tools = []request.Tool{}
		for i, t := range tools {
			at := fmt.Sprintf("tools[%d]", i)
			if t.Type != "" && t.Type != "custom" {
				return &fieldError{at + ".type", fmt.Sprintf("%q tools are Anthropic's server tools, not supported here (want client tools: {name, description, input_schema})", t.Type)}
			}
			if len(t.InputSchema) == 0 || isNull(t.InputSchema) {
				return &fieldError{at + ".input_schema", "missing (want the JSON Schema of the tool's input)"}
			}
			r.Tools = append(r.Tools, request.Tool{Type: "function", Function: request.FunctionTool{
				Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
		}
	}
	raw, ok := top["tool_choice"]
	if !ok || isNull(raw) {
		return nil
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return &fieldError{"tool_choice", "want an object {type: auto, any, tool or none}"}
	}
	switch tc.Type {
	case "auto":
		r.ToolChoice = &request.ToolChoice{Mode: "auto"}
	case "any":
		r.ToolChoice = &request.ToolChoice{Mode: "required"}
	case "none":
		r.ToolChoice = &request.ToolChoice{Mode: "none"}
	case "tool":
		if tc.Name == "" {
			return &fieldError{"tool_choice.name", "missing (type tool names the tool to use)"}
		}
		r.ToolChoice = &request.ToolChoice{Function: tc.Name}
	default:
		return &fieldError{"tool_choice.type", fmt.Sprintf("%q is not a tool choice (want auto, any, tool or none)", tc.Type)}
	}
	if tc.DisableParallelToolUse != nil {
		parallel := !*tc.DisableParallelToolUse
		r.ParallelToolCalls = &parallel
	}
	return nil
}

// decodeMessagesInput reads system and messages into req's messages, and
// names their fields as the client sent them (fieldOf).
func decodeMessagesInput(top map[string]json.RawMessage, req *chatRequest) *fieldError {
	var paths []string // the path of each message, as the client sent it
	if raw, ok := top["system"]; ok && !isNull(raw) {
		parts, err := decodeParts(raw, "system", func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError) {
			if typ != "text" {
				return request.Part{}, &fieldError{pat + ".type", fmt.Sprintf("%q blocks are not supported in system (want text)", typ)}
			}
			part := request.Part{Type: request.PartText}
			return part, stringAt(p, "text", pat, &part.Text)
		})
		if err != nil {
			return err
		}
		m := request.Message{Role: request.RoleSystem}
		m.SetParts(parts)
		req.Messages = append(req.Messages, m)
		paths = append(paths, "system")
	}
	raw, ok := top["messages"]
	if !ok || isNull(raw) {
		return &fieldError{"messages", "missing (want an array of {role, content})"}
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return &fieldError{"messages", "want an array of {role, content}"}
	}
	for i, m := range msgs {
		if err := decodeAnthropicMessage(m, fmt.Sprintf("messages[%d]", i), &req.Messages, &paths); err != nil {
			return err
		}
	}
	req.fieldOf = func(field string) string { return messagesField(field, paths) }
	return nil
}

// decodeAnthropicMessage appends what one message says to msgs: a user message's
// tool_result blocks become tool messages (in order, the text and images
// around them user messages); an assistant message's tool_use blocks its
// tool calls. Thinking blocks of earlier turns are not sent again.
func decodeAnthropicMessage(raw json.RawMessage, at string, msgs *[]request.Message, paths *[]string) *fieldError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return &fieldError{at, "want a message object {role, content}"}
	}
	var role string
	if err := stringAt(obj, "role", at, &role); err != nil {
		return err
	}
	if role != request.RoleUser && role != request.RoleAssistant {
		return &fieldError{at + ".role", fmt.Sprintf("%q is not a role of the Messages API (want user or assistant; the system prompt is the top-level system)", role)}
	}
	content, ok := obj["content"]
	if !ok || isNull(content) {
		return &fieldError{at + ".content", "missing (want a string or an array of content blocks)"}
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		*msgs = append(*msgs, request.Message{Role: role, Content: s})
		*paths = append(*paths, at)
		return nil
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(content, &blocks); err != nil {
		return &fieldError{at + ".content", "want a string or an array of content blocks"}
	}
	var parts []request.Part
	var calls []request.ToolCall
	flush := func() {
		if len(parts) == 0 && len(calls) == 0 {
			return
		}
		m := request.Message{Role: role, ToolCalls: calls}
		m.SetParts(parts)
		*msgs = append(*msgs, m)
		*paths = append(*paths, at)
		parts, calls = nil, nil
	}
	for j, b := range blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		var typ string
		if err := stringAt(b, "type", bat, &typ); err != nil {
			return err
		}
		switch typ {
		case "text":
			part := request.Part{Type: request.PartText}
			if err := stringAt(b, "text", bat, &part.Text); err != nil {
				return err
			}
			parts = append(parts, part)
		case "image":
			part, err := decodeImageBlock(b, bat)
			if err != nil {
				return err
			}
			parts = append(parts, part)
		case "tool_use":
			if role != request.RoleAssistant {
				return &fieldError{bat + ".type", "tool_use blocks belong in assistant messages"}
			}
			c, err := decodeToolUse(b, bat)
			if err != nil {
				return err
			}
			calls = append(calls, c)
		case "tool_result":
			if role != request.RoleUser {
				return &fieldError{bat + ".type", "tool_result blocks belong in user messages"}
			}
			flush()
			m, err := decodeToolResult(b, bat)
			if err != nil {
				return err
			}
			*msgs = append(*msgs, m)
			*paths = append(*paths, bat)
		case "thinking", "redacted_thinking":
			// The model's reasoning from an earlier turn: not sent again.
		default:
			return &fieldError{bat + ".type", fmt.Sprintf("%q blocks are not supported (want text, image, tool_use or tool_result)", typ)}
		}
	}
	flush()
	return nil
}

// decodeImageBlock reads an image block: {source: {type: base64,
// media_type, data}} as a data URI, or {source: {type: url, url}}.
func decodeImageBlock(b map[string]json.RawMessage, at string) (request.Part, *fieldError) {
	var src map[string]json.RawMessage
	if err := decodeField(b, "source", &src, "an object {type, media_type, data} or {type: url, url}"); err != nil {
		err.field = at + "." + err.field
		return request.Part{}, err
	}
	if src == nil {
		return request.Part{}, &fieldError{at + ".source", "missing (want {type: base64, media_type, data} or {type: url, url})"}
	}
	sat := at + ".source"
	var typ, url, mediaType, data string
	for _, f := range []struct {
		name string
		dst  *string
	}{{"type", &typ}, {"url", &url}, {"media_type", &mediaType}, {"data", &data}} {
		if err := stringAt(src, f.name, sat, f.dst); err != nil {
			return request.Part{}, err
		}
	}
	switch typ {
	case "url":
		if url == "" {
			return request.Part{}, &fieldError{sat + ".url", "missing"}
		}
	case "base64":
		if mediaType == "" || data == "" {
			return request.Part{}, &fieldError{sat, "want media_type and data for a base64 image"}
		}
		url = "data:" + mediaType + ";base64," + data
	default:
		return request.Part{}, &fieldError{sat + ".type", fmt.Sprintf("%q image sources are not supported (want base64 or url; file ids are not)", typ)}
	}
	return request.Part{Type: request.PartImageURL, ImageURL: &request.ImageURL{URL: url}}, nil
}

// decodeToolUse reads a tool_use block {id, name, input} as a tool call.
func decodeToolUse(b map[string]json.RawMessage, at string) (request.ToolCall, *fieldError) {
	c := request.ToolCall{Type: "function"}
	if err := stringAt(b, "id", at, &c.ID); err != nil {
		return c, err
	}
	if err := stringAt(b, "name", at, &c.Function.Name); err != nil {
		return c, err
	}
	input, ok := b["input"]
	if !ok || isNull(input) {
		input = json.RawMessage("{}")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, input); err != nil || !strings.HasPrefix(buf.String(), "{") {
		return c, &fieldError{at + ".input", "want the tool's input as a JSON object"}
	}
	c.Function.Arguments = buf.String()
	return c, nil
}

// decodeToolResult reads a tool_result block {tool_use_id, content,
// is_error} as a tool message; an error result says so in its text.
func decodeToolResult(b map[string]json.RawMessage, at string) (request.Message, *fieldError) {
	m := request.Message{Role: request.RoleTool}
	if err := stringAt(b, "tool_use_id", at, &m.ToolCallID); err != nil {
		return m, err
	}
	if m.ToolCallID == "" {
		return m, &fieldError{at + ".tool_use_id", "missing (the id of the tool_use block it answers)"}
	}
	var isError *bool
	if err := decodeField(b, "is_error", &isError, "a boolean"); err != nil {
		err.field = at + "." + err.field
		return m, err
	}
	parts, err := decodeParts(b["content"], at+".content", func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError) {
		if typ != "text" {
			return request.Part{}, &fieldError{pat + ".type", fmt.Sprintf("%q blocks are not supported in a tool result (want text)", typ)}
		}
		part := request.Part{Type: request.PartText}
		return part, stringAt(p, "text", pat, &part.Text)
	})
	if err != nil {
		return m, err
	}
	m.SetParts(parts)
	if isError != nil && *isError {
		m.Content = "Error: " + m.Content
	}
	return m, nil
}

// messagesField names a CallRequest field as the Messages API spells it.
func messagesField(field string, paths []string) string {
	if rest, ok := strings.CutPrefix(field, "messages["); ok {
		if n, tail, ok := strings.Cut(rest, "]"); ok {
			if i, err := strconv.Atoi(n); err == nil && i < len(paths) {
				return paths[i] + tail
			}
		}
		return "messages"
	}
	switch {
	case field == "stop":
		return "stop_sequences"
	case field == "user":
		return "metadata.user_id"
	case strings.HasPrefix(field, "tools["):
		return strings.Replace(strings.Replace(field, ".function.", ".", 1), ".parameters", ".input_schema", 1)
	}
	return field
}
