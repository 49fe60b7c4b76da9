package frontdoor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/request"
)

// chatRequest is what the front door takes from an OpenAI chat-completions
// body. A field it does not know is refused, naming it, except the ones
// stock SDKs send that do not change the answer (IgnoredFields) and the
// passthrough fields of the policy's models.
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
	// prev is the Responses API's previous_response_id.
	prev string
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

// fieldError is a problem with one field of the request body.
type fieldError struct {
	field, problem string
}

func (e *fieldError) Error() string {
	if e.field == "" {
		return e.problem
	}
	return e.field + ": " + e.problem
}

// decodeChatRequest decodes an OpenAI chat-completions body, naming the
// field of every problem (messages[1].content, temperature, …); passthrough
// are the fields the policy's models forward as they are.
func decodeChatRequest(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	var req chatRequest
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case len(bytes.TrimSpace(body)) == 0:
			return req, &fieldError{problem: "the request body is empty (want a JSON object)"}
		case errors.As(err, &syn):
			return req, &fieldError{problem: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err)}
		case errors.As(err, &typ):
			return req, &fieldError{problem: fmt.Sprintf("the request body is a JSON %s, want an object", typ.Value)}
		}
		return req, &fieldError{problem: "malformed JSON: " + err.Error()}
	}
	if top == nil {
		return req, &fieldError{problem: "the request body is null, want a JSON object"}
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

// nestedFields is what the front door makes of the fields of an object
// inside the body: the ones it reads, the ones it drops, and the ones it
// takes only as null (any other value is refused with the reason).
type nestedFields struct {
	read, ignored []string
	nullOnly      map[string]string
}

// check refuses the first field of obj (at path at), in sorted order,
// that nf neither reads nor drops, naming its path.
func (nf nestedFields) check(obj map[string]json.RawMessage, at string) *fieldError {
	for _, name := range sortedFields(obj) {
		path := at + "." + name
		if name == "" {
			path = at + `.""`
		}
		switch {
		case slices.Contains(nf.read, name), slices.Contains(nf.ignored, name):
		case nf.nullOnly[name] != "":
			if !isNull(obj[name]) {
				return &fieldError{path, nf.nullOnly[name]}
			}
		default:
			return &fieldError{path, "unknown field (not sent upstream, so not accepted)"}
		}
	}
	return nil
}

// checkNested decodes raw, when it is an object, and checks its fields
// with nf; any other JSON is left to the decoder that names its type.
func checkNested(raw json.RawMessage, at string, nf nestedFields) *fieldError {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return nf.check(obj, at)
}

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

// decodeParts reads message content: null (no parts), a string (one text
// part), or an array of typed parts, each read by part (typ is its "type",
// pat its path) — the one shape both APIs share.
func decodeParts(raw json.RawMessage, at string, part func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError)) ([]request.Part, *fieldError) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []request.Part{{Type: request.PartText, Text: s}}, nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, &fieldError{at, "want a string or an array of content parts"}
	}
	out := make([]request.Part, 0, len(parts))
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		var typ string
		if err := stringAt(p, "type", pat, &typ); err != nil {
			return nil, err
		}
		pt, err := part(p, typ, pat)
		if err != nil {
			return nil, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// stringAt is decodeString for a field of the object at path at.
func stringAt(obj map[string]json.RawMessage, name, at string, dst *string) *fieldError {
	if err := decodeString(obj, name, dst); err != nil {
		err.field = at + "." + err.field
		return err
	}
	return nil
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

// fieldSet is what one API makes of top-level request fields: the ones
// it reads, the ones it ignores, and the ones it refuses with a reason.
type fieldSet struct {
	handled, ignored []string
	unsupported      map[string]string
}

// sortFields checks every top-level field of a body against an API's
// fieldSet: a passthrough field (one the policy's models forward) goes to
// r.Passthrough compacted, an unsupported or unknown one is refused by
// name, in sorted order so the same body always names the same field.
func sortFields(top map[string]json.RawMessage, fs fieldSet, passthrough map[string]bool, r *request.Request) *fieldError {
	for _, name := range sortedFields(top) {
		switch {
		case name == "":
			// Named as written: an empty field name would read as a
			// problem of the whole body.
			return &fieldError{`""`, "a field with an empty name is not accepted"}
		case slices.Contains(fs.handled, name), slices.Contains(fs.ignored, name):
		case passthrough[name]:
			var buf bytes.Buffer
			if err := json.Compact(&buf, top[name]); err != nil {
				return &fieldError{name, "not valid JSON"}
			}
			if r.Passthrough == nil {
				r.Passthrough = map[string]json.RawMessage{}
			}
			r.Passthrough[name] = buf.Bytes()
		case fs.unsupported[name] != "":
			return &fieldError{name, fs.unsupported[name]}
		default:
			return &fieldError{name, "unknown field (not sent upstream, so not accepted; a model's passthrough list in the policy can forward provider-specific fields)"}
		}
	}
	return nil
}

// sortedFields are the keys of obj, sorted, so the first problem named is
// the same on every run.
func sortedFields(obj map[string]json.RawMessage) []string {
	out := make([]string, 0, len(obj))
	for k := range obj {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// decodeString decodes an optional string field (null: empty).
func decodeString(obj map[string]json.RawMessage, name string, dst *string) *fieldError {
	var p *string
	if err := decodeField(obj, name, &p, "a string"); err != nil {
		return err
	}
	if p != nil {
		*dst = *p
	}
	return nil
}

// decodeField decodes obj[name] into dst when present; want describes the
// expected JSON type for the error.
func decodeField(obj map[string]json.RawMessage, name string, dst any, want string) *fieldError {
	raw, ok := obj[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		got := "a JSON " + jsonKind(raw)
		return &fieldError{name, fmt.Sprintf("want %s, got %s", want, got)}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonKind names the JSON type of a raw value.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if len(t) > 24 {
		t = append(t[:24:24], "…"...)
	}
	return "number " + string(t)
}

// parseDeadlineMS reads an X-Deadline-Ms header: a whole number of
// milliseconds, returned for Validate to check against the limits; or the
// problem. A number too large for int64 is over the limit max, not "not a
// number" (nor, as a time.Duration, negative).
func parseDeadlineMS(v string, max time.Duration) (int64, string) {
	ms, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil:
		return ms, ""
	case errors.Is(err, strconv.ErrRange) && ms > 0:
		return 0, fmt.Sprintf("over the limit of %d ms (%v)", max.Milliseconds(), max)
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("negative (want 0 for the default, or %d..%d)", request.MinRequestDeadline.Milliseconds(), max.Milliseconds())
	}
	if len(v) > 32 {
		return 0, "not a whole number of milliseconds"
	}
	return 0, fmt.Sprintf("%q is not a whole number of milliseconds", v)
}

// decodeBody decodes a request body of api a, after checkText: the JSON
// decoder would replace what is not UTF-8 by U+FFFD without a word, and
// the request would run on text the client did not send.
func decodeBody(a api, body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	if err := checkText(body); err != nil {
		return chatRequest{}, err
	}
	return a.decode(body, passthrough)
}

// checkText reports where body is not Unicode text: a byte sequence that
// is not UTF-8, or a \u escape of half a UTF-16 surrogate pair (a "\ud83d"
// without its low half), which JSON decoding replaces by U+FFFD too. The
// offset is the byte's in the body; the field is not known this early.
func checkText(body []byte) *fieldError {
	if !utf8.Valid(body) {
		i := 0
		for i < len(body) {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return &fieldError{problem: fmt.Sprintf("the request body is not valid UTF-8 (byte %d); JSON text must be UTF-8", i)}
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			i++
			if body[i] != 'u' {
				continue
			}
			hi, ok := hex4(body, i+1)
			if !ok {
				continue // a malformed escape: the decoder names it
			}
			switch {
			case hi >= 0xDC00 && hi <= 0xDFFF:
				return surrogateProblem(i - 1)
			case hi >= 0xD800 && hi <= 0xDBFF:
				lo, ok := -1, false
				if i+6 < len(body) && body[i+5] == '\\' && body[i+6] == 'u' {
					lo, ok = hex4(body, i+7)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return surrogateProblem(i - 1)
				}
				i += 10 // both escapes, the loop's i++ steps past the last digit
			default:
				i += 4
			}
		}
	}
	return nil
}

func surrogateProblem(at int) *fieldError {
	return &fieldError{problem: fmt.Sprintf("the request body has a \\u escape of half a UTF-16 surrogate pair at byte %d, which is no character (JSON strings must be Unicode text)", at)}
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (int, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return int(v), err == nil
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

// singleHeaders are the request headers the front door reads one value
// of: sent twice, which one counts would depend on who reads them (a
// proxy in front may check the other), so a second one is refused.
var singleHeaders = []string{"Authorization", "Content-Type", HeaderIdempotencyKey, HeaderSessionID,
	HeaderScenario, HeaderDeadlineMS, HeaderLastEventID}

// headerProblem checks what every authenticated route reads of a
// request's headers before its token: each of singleHeaders at most once,
// and the body of a POST declared as JSON in UTF-8 (no Content-Type: JSON
// is assumed). It returns the refusal, or nil.
func headerProblem(r *http.Request) *apiError {
	for _, name := range singleHeaders {
		if n := len(r.Header.Values(name)); n > 1 {
			return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: name, code: "duplicate_header",
				message: fmt.Sprintf("Invalid request: the %s header is sent %d times; send it once.", name, n)}
		}
	}
	ct := r.Header.Get("Content-Type")
	if r.Method != http.MethodPost || ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: "Content-Type", code: "invalid_content_type",
			message: "Invalid request: the Content-Type header is not a media type; send Content-Type: application/json."}
	case mt != "application/json" && !strings.HasSuffix(mt, "+json"):
		return &apiError{status: http.StatusUnsupportedMediaType, typ: typeInvalidRequest, param: "Content-Type", code: "unsupported_media_type",
			message: "Invalid request: the body must be JSON; send Content-Type: application/json."}
	case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
		return &apiError{status: http.StatusUnsupportedMediaType, typ: typeInvalidRequest, param: "Content-Type", code: "unsupported_media_type",
			message: "Invalid request: the body must be UTF-8 JSON; send Content-Type: application/json (charset=utf-8, or none)."}
	}
	return nil
}
