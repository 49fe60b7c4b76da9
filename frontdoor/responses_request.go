package frontdoor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/durable-llm/durable-llm/policies/request"
)

// responsesRequest is what the front door takes from a Responses API
// body: the call it asks for, in the shape both APIs share, and the
// fields only this API has.
type responsesRequest struct {
	chatRequest
	// prev is previous_response_id: the stored response it continues.
	prev string
	// background asks for a background response.
	background bool
}

// responsesHandled are the request fields decodeResponsesRequest reads.
var responsesHandled = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
	"text", "max_output_tokens", "temperature", "top_p", "stream", "user", "reasoning", "top_logprobs",
	"previous_response_id", "truncation", "stream_options", "background", "store"}

// responsesIgnored are Responses API fields that do not change the answer.
var responsesIgnored = []string{"metadata", "service_tier", "prompt_cache_key", "safety_identifier", "include"}

// responsesUnsupported explains Responses API fields the front door refuses.
var responsesUnsupported = map[string]string{
	"conversation":   "stored conversations are not supported: send the conversation as input",
	"prompt":         "stored prompts are not supported: send instructions and input",
	"max_tool_calls": "not supported",
}

// decodeResponsesRequest decodes a Responses API body, naming the field of
// every problem as the client sent it (input[2].content[0].image_url,
// text.format, …).
func decodeResponsesRequest(body []byte, passthrough map[string]bool) (responsesRequest, *fieldError) {
	var req responsesRequest
	top, ferr := decodeTop(body)
	if ferr != nil {
		return req, ferr
	}
	if err := sortFields(top, fieldSet{responsesHandled, responsesIgnored, responsesUnsupported}, passthrough, &req.Agent); err != nil {
		return req, err
	}
	var background, store *bool
	if err := decodeField(top, "background", &background, "a boolean"); err != nil {
		return req, err
	}
	if err := decodeField(top, "store", &store, "a boolean"); err != nil {
		return req, err
	}
	req.background = background != nil && *background
	if req.background && store != nil && !*store {
		// As OpenAI answers it: a background response is retrieved later.
		return req, &fieldError{"store", "background responses must be stored (want store: true or no store with background: true)"}
	}
	req.Agent.NoStore = store != nil && !*store
	return req, decodeResponsesFields(top, &req)
}

// decodeResponsesFields decodes the fields of a Responses API body but
// background and store into req.
func decodeResponsesFields(top map[string]json.RawMessage, req *responsesRequest) *fieldError {
	var prev *string
	if err := decodeField(top, "previous_response_id", &prev, "a string"); err != nil {
		return err
	}
	if prev != nil {
		req.prev = *prev
	}
	var truncation *string
	if err := decodeField(top, "truncation", &truncation, "a string"); err != nil {
		return err
	}
	if truncation != nil && *truncation != "disabled" {
		return &fieldError{"truncation", fmt.Sprintf("%q is not supported (want \"disabled\"; the call prunes the context itself when a model's window is exceeded)", *truncation)}
	}
	for _, f := range []struct {
		name, want string
		dst        any
	}{
		{"model", "a string", &req.Model}, {"user", "a string", &req.User},
		{"temperature", "a number", &req.Temperature}, {"top_p", "a number", &req.Agent.TopP},
		{"parallel_tool_calls", "a boolean", &req.Agent.ParallelToolCalls},
		{"top_logprobs", "an integer", &req.Agent.TopLogprobs},
	} {
		if raw, ok := top[f.name]; ok && isNull(raw) {
			continue
		}
		if err := decodeField(top, f.name, f.dst, f.want); err != nil {
			return err
		}
	}
	if req.Agent.TopLogprobs != nil {
		req.Agent.Logprobs = true
	}
	var stream *bool
	if err := decodeField(top, "stream", &stream, "a boolean"); err != nil {
		return err
	}
	req.Stream = stream != nil && *stream
	var maxOut *int
	if err := decodeField(top, "max_output_tokens", &maxOut, "an integer"); err != nil {
		return err
	}
	if maxOut != nil {
		req.MaxTokens, req.maxTokensBy = *maxOut, "max_output_tokens"
	}
	var reasoning map[string]json.RawMessage
	if err := decodeField(top, "reasoning", &reasoning, "an object {effort}"); err != nil {
		return err
	}
	if err := decodeString(reasoning, "effort", &req.Agent.ReasoningEffort); err != nil {
		err.field = "reasoning." + err.field
		return err
	}
	if err := decodeResponseTools(top, &req.Agent); err != nil {
		return err
	}
	if err := decodeTextFormat(top, &req.Agent); err != nil {
		return err
	}
	return decodeInput(top, req)
}

// decodeInput reads instructions and input into req's messages, and
// names their fields as the client sent them (fieldOf).
func decodeInput(top map[string]json.RawMessage, req *responsesRequest) *fieldError {
	var paths []string // the input path of each message
	var instructions string
	if err := decodeString(top, "instructions", &instructions); err != nil {
		return err
	}
	if instructions != "" {
		req.Messages = append(req.Messages, request.Message{Role: request.RoleSystem, Content: instructions})
		paths = append(paths, "instructions")
	}
	raw, ok := top["input"]
	if !ok || isNull(raw) {
		return &fieldError{"input", "missing (want a string or an array of input items)"}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		req.Messages = append(req.Messages, request.Message{Role: request.RoleUser, Content: s})
		paths = append(paths, "input")
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return &fieldError{"input", "want a string or an array of input items"}
		}
		for i, it := range items {
			at := fmt.Sprintf("input[%d]", i)
			if err := decodeInputItem(it, at, &req.Messages, &paths); err != nil {
				return err
			}
		}
	}
	req.fieldOf = func(field string) string { return responsesField(field, paths) }
	return nil
}

// responsesField names a CallRequest field as the Responses API spells it.
func responsesField(field string, paths []string) string {
	if rest, ok := strings.CutPrefix(field, "messages["); ok {
		if n, tail, ok := strings.Cut(rest, "]"); ok {
			if i, err := strconv.Atoi(n); err == nil && i < len(paths) {
				return paths[i] + tail
			}
		}
		return "input"
	}
	switch {
	case field == "messages":
		return "input"
	case field == "max_tokens":
		return "max_output_tokens"
	case field == "reasoning_effort":
		return "reasoning.effort"
	case strings.HasPrefix(field, "response_format"):
		return "text.format"
	case strings.HasPrefix(field, "tools["):
		return strings.Replace(field, ".function.", ".", 1)
	}
	return field
}

// decodeResponseTools reads function tools ({type, name, description,
// parameters, strict}) and tool_choice.
func decodeResponseTools(top map[string]json.RawMessage, r *request.Request) *fieldError {
	if raw, ok := top["tools"]; ok && !isNull(raw) {
		var tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		if err := json.Unmarshal(raw, &tools); err != nil {
			return &fieldError{"tools", "want an array of {type: \"function\", name, description, parameters, strict}"}
		}
		r.Tools = []request.Tool{}
		for i, t := range tools {
			if t.Type != "function" {
				return &fieldError{fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("%q tools are not supported (want \"function\")", t.Type)}
			}
			r.Tools = append(r.Tools, request.Tool{Type: "function", Function: request.FunctionTool{
				Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
		}
	}
	if raw, ok := top["tool_choice"]; ok && !isNull(raw) {
		var mode string
		if json.Unmarshal(raw, &mode) == nil {
			r.ToolChoice = &request.ToolChoice{Mode: mode}
			return nil
		}
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
			return &fieldError{"tool_choice", "want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": …}"}
		}
		r.ToolChoice = &request.ToolChoice{Function: named.Name}
	}
	return nil
}

// decodeTextFormat reads text.format into response_format.
func decodeTextFormat(top map[string]json.RawMessage, r *request.Request) *fieldError {
	var text map[string]json.RawMessage
	if err := decodeField(top, "text", &text, "an object {format}"); err != nil {
		return err
	}
	raw, ok := text["format"]
	if !ok || isNull(raw) {
		return nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return &fieldError{"text.format", "want an object {type, name, schema, strict}"}
	}
	r.ResponseFormat = &request.ResponseFormat{Type: f.Type}
	if f.Type == request.FormatJSONSchema {
		r.ResponseFormat.JSONSchema = &request.JSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
	}
	return nil
}

// decodeInputItem appends what one input item says to msgs: a message, a
// function call (joined to the assistant message before it) or a
// function call's output (a tool message). Reasoning items are skipped.
func decodeInputItem(raw json.RawMessage, at string, msgs *[]request.Message, paths *[]string) *fieldError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return &fieldError{at, "want an input item object"}
	}
	var typ, role string
	if err := stringAt(obj, "type", at, &typ); err != nil {
		return err
	}
	if err := stringAt(obj, "role", at, &role); err != nil {
		return err
	}
	switch {
	case typ == "message" || (typ == "" && role != ""):
		parts, err := decodeInputContent(obj["content"], at+".content")
		if err != nil {
			return err
		}
		m := request.Message{Role: role}
		m.SetParts(parts)
		*msgs = append(*msgs, m)
		*paths = append(*paths, at)
	case typ == "function_call":
		var c request.ToolCall
		c.Type = "function"
		for _, f := range []struct {
			name string
			dst  *string
		}{{"call_id", &c.ID}, {"name", &c.Function.Name}, {"arguments", &c.Function.Arguments}} {
			if err := stringAt(obj, f.name, at, f.dst); err != nil {
				return err
			}
		}
		if n := len(*msgs); n > 0 && (*msgs)[n-1].Role == request.RoleAssistant {
			(*msgs)[n-1].ToolCalls = append((*msgs)[n-1].ToolCalls, c)
			return nil
		}
		*msgs = append(*msgs, request.Message{Role: request.RoleAssistant, ToolCalls: []request.ToolCall{c}})
		*paths = append(*paths, at)
	case typ == "function_call_output":
		m := request.Message{Role: request.RoleTool}
		if err := stringAt(obj, "call_id", at, &m.ToolCallID); err != nil {
			return err
		}
		parts, err := decodeInputContent(obj["output"], at+".output")
		if err != nil {
			return err
		}
		m.SetParts(parts)
		if len(m.Parts) > 0 {
			return &fieldError{at + ".output", "images in a function call's output are not supported"}
		}
		*msgs = append(*msgs, m)
		*paths = append(*paths, at)
	case typ == "reasoning":
		// The model's reasoning from an earlier turn: not sent again.
	case typ == "":
		return &fieldError{at + ".type", "missing (want message, function_call or function_call_output)"}
	default:
		return &fieldError{at + ".type", fmt.Sprintf("%q items are not supported (want message, function_call, function_call_output or reasoning)", typ)}
	}
	return nil
}

// decodeInputContent reads a message's content: a string, or an array of
// input_text, output_text, refusal and input_image parts.
func decodeInputContent(raw json.RawMessage, at string) ([]request.Part, *fieldError) {
	return decodeParts(raw, at, func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError) {
		part := request.Part{Type: request.PartText}
		switch typ {
		case "input_text", "output_text":
			return part, stringAt(p, "text", pat, &part.Text)
		case "refusal":
			return part, stringAt(p, "refusal", pat, &part.Text)
		case "input_image":
			img := &request.ImageURL{}
			if err := stringAt(p, "image_url", pat, &img.URL); err != nil {
				return part, err
			}
			if err := stringAt(p, "detail", pat, &img.Detail); err != nil {
				return part, err
			}
			if img.URL == "" {
				return part, &fieldError{pat + ".image_url", "missing (file_id images are not supported: send an image URL or a data URI)"}
			}
			return request.Part{Type: request.PartImageURL, ImageURL: img}, nil
		}
		return part, &fieldError{pat + ".type", fmt.Sprintf("%q parts are not supported (want input_text or input_image)", typ)}
	})
}
