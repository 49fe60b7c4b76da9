package frontdoor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// chatAPI is POST /v1/chat/completions.
type chatAPI struct{}

func (chatAPI) decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	return decodeChatRequest(body, passthrough)
}

func (a chatAPI) decodeCall(h *Handler, r *http.Request, tenant string, body []byte) (call, *apiError) {
	cr, ferr := decodeText(body, h.passthrough, a.decode)
	if ferr != nil {
		return call{}, invalidBody(ferr)
	}
	return h.newCall(r, tenant, cr, nil)
}

func (chatAPI) write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	writeCompletion(w, id, created, res, idem)
}

func (chatAPI) stream(sw *sseWriter, c call) streamFormat {
	return chatFormat{sw: sw, includeUsage: c.cr.IncludeUsage}
}

func (chatAPI) objectID(id string) string { return completionID(id) }

// chatCompletions serves POST /v1/chat/completions.
func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request, tenant string) {
	h.serveCall(w, r, tenant, chatAPI{})
}

// chatRequest is what the front door takes from an OpenAI chat-completions
// body, and the shape in which both APIs hand a request on (a
// responsesRequest holds one). A field it does not know is refused,
// naming it, except the ones stock SDKs send that do not change the
// answer (IgnoredFields) and the passthrough fields of the policy's
// models.
type chatRequest struct {
	Model        string
	Messages     []request.Message
	MaxTokens    int
	maxTokensBy  string // the JSON field max_tokens came from
	Temperature  *float64
	User         string
	Stream       bool
	IncludeUsage bool
	// Agent are the agent fields (tools, response_format, …), in the
	// CallRequest's shape.
	Agent request.Request
	// fieldOf, when set, names a CallRequest field as the client's API
	// spells it (the Responses API's input[3] for messages[2]).
	fieldOf func(field string) string
}

// IgnoredFields are request fields that stock OpenAI SDKs and agent
// frameworks send and that do not change the answer: accepted and not
// sent upstream (docs/agents.md).
var IgnoredFields = []string{"store", "metadata", "service_tier", "prompt_cache_key", "safety_identifier"}

// handledFields are the fields decodeChatRequest reads.
var handledFields = []string{"model", "messages", "stream", "stream_options", "temperature", "n",
	"max_tokens", "max_completion_tokens", "user", "tools", "tool_choice", "parallel_tool_calls",
	"response_format", "stop", "seed", "top_p", "presence_penalty", "frequency_penalty", "logit_bias",
	"logprobs", "top_logprobs", "reasoning_effort"}

// unsupported explains fields of the OpenAI API the front door refuses.
var unsupported = map[string]string{
	"functions":          "deprecated by OpenAI: send tools instead",
	"function_call":      "deprecated by OpenAI: send tool_choice instead",
	"modalities":         "only text (and image input) is supported",
	"audio":              "audio output is not supported",
	"prediction":         "predicted outputs are not supported",
	"web_search_options": "web search is not supported",
	"verbosity":          "not supported (it changes the answer; a model's passthrough list can forward it)",
}

// decodeChatRequest decodes an OpenAI chat-completions body, naming the
// field of every problem (messages[1].content, temperature, …); passthrough
// are the fields the policy's models forward as they are.
func decodeChatRequest(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	var req chatRequest
	top, ferr := decodeChatTop(body)
	if ferr != nil {
		return req, ferr
	}
	if err := sortFields(top, fieldSet{handledFields, IgnoredFields, unsupported}, passthrough, &req.Agent); err != nil {
		return req, err
	}
	if err := decodeAgent(top, &req.Agent); err != nil {
		return req, err
	}
	if err := decodeString(top, "model", &req.Model); err != nil {
		return req, err
	}
	if err := decodeString(top, "user", &req.User); err != nil {
		return req, err
	}
	var stream *bool
	if err := decodeField(top, "stream", &stream, "a boolean"); err != nil {
		return req, err
	}
	req.Stream = stream != nil && *stream
	// stream_options: an object whose include_usage, when given, is a
	// boolean; its other fields are ignored like the body's.
	var so map[string]json.RawMessage
	if err := decodeField(top, "stream_options", &so, "an object"); err != nil {
		return req, err
	}
	var includeUsage *bool
	if err := decodeField(so, "include_usage", &includeUsage, "a boolean"); err != nil {
		err.field = "stream_options." + err.field
		return req, err
	}
	req.IncludeUsage = includeUsage != nil && *includeUsage
	if err := decodeField(top, "temperature", &req.Temperature, "a number"); err != nil {
		return req, err
	}
	var n *int
	if err := decodeField(top, "n", &n, "an integer"); err != nil {
		return req, err
	}
	if n != nil && *n != 1 {
		return req, &fieldError{"n", fmt.Sprintf("%d choices asked; the front door answers exactly 1", *n)}
	}
	for _, name := range []string{"max_completion_tokens", "max_tokens"} {
		var v *int
		if err := decodeField(top, name, &v, "an integer"); err != nil {
			return req, err
		}
		if v != nil && req.maxTokensBy == "" {
			req.MaxTokens, req.maxTokensBy = *v, name
		}
	}

	raw, ok := top["messages"]
	if !ok || isNull(raw) {
		return req, &fieldError{"messages", "missing (want an array of messages, the last from the user)"}
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return req, &fieldError{"messages", "want an array of messages"}
	}
	for i, m := range msgs {
		msg, err := decodeMessage(m, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return req, err
		}
		req.Messages = append(req.Messages, msg)
	}
	return req, nil
}

// decodeChatTop decodes a chat body into its top-level fields, saying
// where and why one that is not a JSON object is not.
func decodeChatTop(body []byte) (map[string]json.RawMessage, *fieldError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case len(bytes.TrimSpace(body)) == 0:
			return nil, &fieldError{problem: "the request body is empty (want a JSON object)"}
		case errors.As(err, &syn):
			return nil, &fieldError{problem: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err)}
		case errors.As(err, &typ):
			return nil, &fieldError{problem: fmt.Sprintf("the request body is a JSON %s, want an object", typ.Value)}
		}
		return nil, &fieldError{problem: "malformed JSON: " + err.Error()}
	}
	if top == nil {
		return nil, &fieldError{problem: "the request body is null, want a JSON object"}
	}
	return top, nil
}

// The fields of the objects inside a chat request that the front door
// reads, and those it accepts and drops: what the official OpenAI clients
// put in a message they return, so that an agent may send it back as it
// came (refusal: the model's refusal text, never sent upstream; parsed,
// parsed_arguments: their parse helpers' copies of content and
// arguments; annotations: citations on OpenAI's answers; index: a
// streamed tool call's position). Any other field is refused by name, as
// at the top level.
var (
	messageFields = nestedFields{read: []string{"role", "content", "name", "tool_call_id", "tool_calls"},
		ignored: []string{"refusal", "parsed", "annotations"},
		nullOnly: map[string]string{
			"audio":         "audio output is not supported (send its transcript as content)",
			"function_call": "deprecated by OpenAI: send tool_calls instead",
		}}
	toolCallFields  = nestedFields{read: []string{"id", "type", "function"}, ignored: []string{"index"}}
	functionFields  = nestedFields{read: []string{"name", "arguments"}, ignored: []string{"parsed_arguments"}}
	textPartFields  = nestedFields{read: []string{"type", "text"}}
	imagePartFields = nestedFields{read: []string{"type", "image_url"}}
	imageURLFields  = nestedFields{read: []string{"url", "detail"}}
	toolFields      = nestedFields{read: []string{"type", "function"}}
	toolFuncFields  = nestedFields{read: []string{"name", "description", "parameters", "strict"}}
	formatFields    = nestedFields{read: []string{"type", "json_schema"}}
	schemaFields    = nestedFields{read: []string{"name", "description", "schema", "strict"}}
)

// decodeMessage decodes one chat message; content is a string, null, or an
// array of text parts (joined with newlines).
func decodeMessage(raw json.RawMessage, at string) (request.Message, *fieldError) {
	var m request.Message
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return m, &fieldError{at, "want a message object"}
	}
	if err := messageFields.check(obj, at); err != nil {
		return m, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"role", &m.Role}, {"name", &m.Name}, {"tool_call_id", &m.ToolCallID}} {
		if err := decodeString(obj, f.name, f.dst); err != nil {
			err.field = at + "." + err.field
			return m, err
		}
	}
	parts, err := decodeContent(obj["content"], at+".content")
	if err != nil {
		return m, err
	}
	m.SetParts(parts)
	if tc, ok := obj["tool_calls"]; ok && !isNull(tc) {
		var raws []json.RawMessage
		if json.Unmarshal(tc, &raws) == nil {
			for j, c := range raws {
				cat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
				if err := checkNested(c, cat, toolCallFields); err != nil {
					return m, err
				}
				var fn struct {
					Function json.RawMessage `json:"function"`
				}
				if json.Unmarshal(c, &fn) == nil && fn.Function != nil {
					if err := checkNested(fn.Function, cat+".function", functionFields); err != nil {
						return m, err
					}
				}
			}
		}
		var calls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function *struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal(tc, &calls); err != nil {
			return m, &fieldError{at + ".tool_calls", "want an array of {id, type, function: {name, arguments}} with string values"}
		}
		for j, c := range calls {
			if c.Function == nil {
				return m, &fieldError{fmt.Sprintf("%s.tool_calls[%d].function", at, j), "missing"}
			}
			typ := c.Type
			if typ == "" {
				typ = "function"
			}
			m.ToolCalls = append(m.ToolCalls, request.ToolCall{ID: c.ID, Type: typ,
				Function: request.FunctionCall{Name: c.Function.Name, Arguments: c.Function.Arguments}})
		}
	}
	return m, nil
}

// decodeContent accepts "text", null, or an array of chat parts: text,
// and image_url ({url, detail}).
func decodeContent(raw json.RawMessage, at string) ([]request.Part, *fieldError) {
	return decodeParts(raw, at, func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError) {
		part := request.Part{Type: typ}
		switch typ {
		case request.PartText:
			if err := textPartFields.check(p, pat); err != nil {
				return part, err
			}
			return part, stringAt(p, "text", pat, &part.Text)
		case request.PartImageURL:
			if err := imagePartFields.check(p, pat); err != nil {
				return part, err
			}
			var img map[string]json.RawMessage
			if err := decodeField(p, "image_url", &img, "an object {url, detail}"); err != nil {
				err.field = pat + "." + err.field
				return part, err
			}
			if err := imageURLFields.check(img, pat+".image_url"); err != nil {
				return part, err
			}
			part.ImageURL = &request.ImageURL{}
			if err := stringAt(img, "url", pat+".image_url", &part.ImageURL.URL); err != nil {
				return part, err
			}
			return part, stringAt(img, "detail", pat+".image_url", &part.ImageURL.Detail)
		}
		return part, &fieldError{pat + ".type", fmt.Sprintf("%q parts are not supported (want \"text\" or \"image_url\")", typ)}
	})
}

// decodeAgent decodes the agent fields (docs/agents.md) into r, naming
// the field of a value of the wrong type; Validate checks the values.
func decodeAgent(top map[string]json.RawMessage, r *request.Request) *fieldError {
	fields := []struct {
		name, want string
		dst        any
	}{
		{"tools", "an array of {type: \"function\", function: {name, description, parameters, strict}}", &r.Tools},
		{"parallel_tool_calls", "a boolean", &r.ParallelToolCalls},
		{"response_format", "an object {type, json_schema: {name, schema, strict}}", &r.ResponseFormat},
		{"seed", "an integer", &r.Seed},
		{"top_p", "a number", &r.TopP},
		{"presence_penalty", "a number", &r.PresencePenalty},
		{"frequency_penalty", "a number", &r.FrequencyPenalty},
		{"logit_bias", "an object of token ids to integer biases", &r.LogitBias},
		{"top_logprobs", "an integer", &r.TopLogprobs},
		{"reasoning_effort", "a string", &r.ReasoningEffort},
	}
	for _, f := range fields {
		if raw, ok := top[f.name]; ok && isNull(raw) {
			continue
		}
		if err := decodeField(top, f.name, f.dst, f.want); err != nil {
			return err
		}
	}
	if err := checkToolsAndFormat(top); err != nil {
		return err
	}
	var logprobs *bool
	if err := decodeField(top, "logprobs", &logprobs, "a boolean"); err != nil {
		return err
	}
	r.Logprobs = logprobs != nil && *logprobs
	if raw, ok := top["tool_choice"]; ok && !isNull(raw) {
		var c request.ToolChoice
		if err := json.Unmarshal(raw, &c); err != nil {
			return &fieldError{"tool_choice", err.Error()}
		}
		r.ToolChoice = &c
	}
	if raw, ok := top["stop"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.Stop); err != nil {
			return &fieldError{"stop", err.Error()}
		}
	}
	return nil
}

// checkToolsAndFormat refuses unknown fields in tools (function tools:
// another type is named by Validate) and in response_format, which
// decodeAgent has decoded without them.
func checkToolsAndFormat(top map[string]json.RawMessage) *fieldError {
	var tools []map[string]json.RawMessage
	if raw, ok := top["tools"]; ok && json.Unmarshal(raw, &tools) == nil {
		for i, t := range tools {
			at := fmt.Sprintf("tools[%d]", i)
			var typ string
			if json.Unmarshal(t["type"], &typ) != nil || typ != "function" {
				continue
			}
			if err := toolFields.check(t, at); err != nil {
				return err
			}
			if err := checkNested(t["function"], at+".function", toolFuncFields); err != nil {
				return err
			}
		}
	}
	var format map[string]json.RawMessage
	if raw, ok := top["response_format"]; ok && json.Unmarshal(raw, &format) == nil && format != nil {
		if err := formatFields.check(format, "response_format"); err != nil {
			return err
		}
		if raw, ok := format["json_schema"]; ok {
			if err := checkNested(raw, "response_format.json_schema", schemaFields); err != nil {
				return err
			}
		}
	}
	return nil
}
