package llmsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The agent side of the simulator: tools and structured outputs, as an
// OpenAI-compatible server with a tool parser and guided decoding serves
// them. A request that offers tools (and tool_choice is not "none") gets a
// tool call until the turn holds tool results; then the model answers
// from them. A json_object or json_schema response_format gets JSON that
// matches the schema. Faults bad_tool_args, unknown_tool and bad_json
// break the shape of such answers.

// tool is a function tool of a request.
type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// responseFormat is a request's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// knownFields are the top-level request fields the simulator reads or
// knows; the others are recorded as they came (Generation.Extra).
var knownFields = []string{"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
	"continue_final_message", "add_generation_prompt", "tools", "tool_choice", "response_format", "temperature",
	"parallel_tool_calls", "stop", "seed", "top_p", "presence_penalty", "frequency_penalty", "logit_bias",
	"logprobs", "top_logprobs", "reasoning_effort", "n", "user", "store", "metadata", "service_tier"}

// extraFields are the fields of body not in known, as received.
func extraFields(body []byte, known []string) map[string]json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	var out map[string]json.RawMessage
	for k, v := range top {
		if !slices.Contains(known, k) {
			if out == nil {
				out = map[string]json.RawMessage{}
			}
			out[k] = v
		}
	}
	return out
}

// toolChoice reads tool_choice: the mode, or the named function.
func (r *chatRequest) toolChoice() (mode, function string) {
	if len(r.ToolChoice) == 0 || string(r.ToolChoice) == "null" {
		return "auto", ""
	}
	if json.Unmarshal(r.ToolChoice, &mode) == nil {
		return mode, ""
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(r.ToolChoice, &named)
	return "function", named.Function.Name
}

// turn is the index of the current turn's first message: the messages
// after the last assistant message that answered (without tool calls).
func (r *chatRequest) turn() int {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "assistant" && len(m.ToolCalls) == 0 && i < len(r.Messages)-1 {
			return i + 1
		}
	}
	return 0
}

// toolResults are the tool messages of the current turn.
func (r *chatRequest) toolResults() []Message {
	var out []Message
	for _, m := range r.Messages[r.turn():] {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// callsTool decides whether the answer is a tool call, and to which tool.
func (r *chatRequest) callsTool() (tool, bool) {
	if len(r.Tools) == 0 {
		return tool{}, false
	}
	mode, name := r.toolChoice()
	switch {
	case mode == "none":
		return tool{}, false
	case mode == "function":
		for _, t := range r.Tools {
			if t.Function.Name == name {
				return t, true
			}
		}
		return tool{}, false
	case mode == "auto" && len(r.toolResults()) > 0:
		return tool{}, false // the results are in: answer from them
	}
	// The tool whose name shares the most words with the question.
	q := strings.ToLower(r.question())
	best, score := r.Tools[0], 0
	for _, t := range r.Tools {
		n := 0
		for _, w := range strings.FieldsFunc(strings.ToLower(t.Function.Name), func(c rune) bool { return c == '_' || c == '-' }) {
			if len(w) > 2 && strings.Contains(q, w) {
				n++
			}
		}
		if n > score {
			best, score = t, n
		}
	}
	return best, true
}

// fromToolResults is the answer once the turn holds tool results.
func (r *chatRequest) fromToolResults() string {
	names := map[string]string{}
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
	}
	var parts []string
	for _, m := range r.toolResults() {
		name := names[m.ToolCallID]
		if name == "" {
			name = "the tool"
		}
		parts = append(parts, fmt.Sprintf("%s says %s", name, strings.TrimSpace(m.Content)))
	}
	return fmt.Sprintf("[%s] %s.", r.Model, strings.Join(parts, "; "))
}

var numberRE = regexp.MustCompile(`\d+`)

// instance makes a JSON value that matches schema (the subset tools and
// response formats use: object, properties, required, enum, const, type,
// items, anyOf), filling strings from the question: a property whose name
// says id or number gets the question's first number.
func instance(schema json.RawMessage, question, text string) any {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return map[string]any{}
	}
	return fill(s, "", StripDirectives(question), text, 0)
}

func fill(s map[string]any, name, question, text string, depth int) any {
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		// The value the question names, as a model reading it would;
		// else the first.
		q := strings.ToLower(question)
		for _, v := range e {
			if str, ok := v.(string); ok && str != "" && strings.Contains(q, strings.ToLower(str)) {
				return v
			}
		}
		return e[0]
	}
	if alts, ok := s["anyOf"].([]any); ok && len(alts) > 0 {
		if sub, ok := alts[0].(map[string]any); ok {
			return fill(sub, name, question, text, depth+1)
		}
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	num := numberRE.FindString(question)
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if sub, ok := props[k].(map[string]any); ok && depth < 8 {
				out[k] = fill(sub, k, question, text, depth+1)
			}
		}
		return out
	case "array":
		if sub, ok := s["items"].(map[string]any); ok && depth < 8 {
			return []any{fill(sub, name, question, text, depth+1)}
		}
		return []any{}
	case "integer", "number":
		if num != "" {
			var n json.Number = json.Number(num)
			return n
		}
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	}
	lname := strings.ToLower(name)
	if num != "" && (strings.Contains(lname, "id") || strings.Contains(lname, "number")) {
		return num
	}
	return text
}

// jsonAnswer renders the content of a JSON answer for rf.
func jsonAnswer(rf *responseFormat, question, text string) string {
	var v any = map[string]any{"answer": text}
	if rf.Type == "json_schema" && rf.JSONSchema != nil {
		v = instance(rf.JSONSchema.Schema, question, text)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// toolArguments renders the arguments of a call to t.
func toolArguments(t tool, question string) string {
	b, _ := json.Marshal(instance(t.Function.Parameters, question, strings.Join(strings.Fields(StripDirectives(question)), " ")))
	if string(b) == "null" {
		return "{}"
	}
	return string(b)
}

// simToolCall is a tool call the simulator answers with.
type simToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// renderAgent shapes the answer of a request that offers tools or asks
// for JSON: a tool call (ok true: content is empty, finish_reason
// tool_calls), the answer from the turn's tool results, or JSON. f breaks
// the shape (bad_tool_args, unknown_tool, bad_json).
func renderAgent(req *chatRequest, content string, f Fault) (out string, calls []simToolCall, ok bool) {
	q := req.question()
	if t, yes := req.callsTool(); yes {
		c := simToolCall{Type: "function"}
		c.Function.Name, c.Function.Arguments = t.Function.Name, toolArguments(t, q)
		switch f {
		case FaultBadToolArgs:
			c.Function.Arguments = c.Function.Arguments[:len(c.Function.Arguments)/2]
		case FaultUnknownTool:
			c.Function.Name = "unknown_" + c.Function.Name
		}
		c.ID = "call_" + shortHash(req.Model+"\x00"+c.Function.Name+"\x00"+c.Function.Arguments)
		return "", []simToolCall{c}, true
	}
	if len(req.toolResults()) > 0 {
		content = req.fromToolResults()
	}
	if req.ResponseFormat != nil && (req.ResponseFormat.Type == "json_object" || req.ResponseFormat.Type == "json_schema") {
		content = jsonAnswer(req.ResponseFormat, q, strings.Join(strings.Fields(content), " "))
		if f == FaultBadJSON {
			// Prose around cut JSON: what a model without guided decoding
			// sometimes writes.
			content = "Sure! Here is the JSON: " + content[:len(content)/2]
		}
	}
	return content, nil, false
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}
