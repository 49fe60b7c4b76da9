package request

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

func agentReq() Request {
	return Request{Messages: []Message{{Role: RoleUser, Content: "Where is order 42?"}},
		Tools: []Tool{{Type: "function", Function: FunctionTool{Name: "lookup_order",
			Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)}}}}
}

// doublingSchema is issue 30's schema whose d_i is two $refs to d_{i-1}.
func doublingSchema(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"d0":{"type":"string"}`)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, `,"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i-1, i-1)
	}
	fmt.Fprintf(&b, `},"type":"object","properties":{"q":{"$ref":"#/$defs/d%d"}}}`, levels)
	return b.String()
}

// propertiesSchema is an object schema of n properties, each one.
func propertiesSchema(n int, one string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"p%d":%s`, i, one)
	}
	return `{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`
}

func TestValidateAgentFields(t *testing.T) {
	cfg := config.DefaultConfig() // qwen-72b: tools, json_schema, vision, reasoning, passthrough top_k; llama-8b: nothing
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	img := func(url string) Message {
		return Message{Role: RoleUser, Parts: []Part{{Type: PartText, Text: "what is this?"}, {Type: PartImageURL, ImageURL: &ImageURL{URL: url}}}}
	}
	big := "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, 300<<10))
	cases := []struct {
		name  string
		edit  func(r *Request)
		field string // "" : valid
		part  string
	}{
		{"tools, tool_choice named", func(r *Request) { r.ToolChoice = &ToolChoice{Function: "lookup_order"} }, "", ""},
		{"unknown tool in tool_choice", func(r *Request) { r.ToolChoice = &ToolChoice{Function: "cancel_order"} }, "tool_choice", `names "cancel_order", which is not in tools (offered: lookup_order)`},
		{"unknown tool_choice mode", func(r *Request) { r.ToolChoice = &ToolChoice{Mode: "always"} }, "tool_choice", `unknown mode "always"`},
		{"tool_choice without tools", func(r *Request) { r.Tools = nil; r.ToolChoice = &ToolChoice{Mode: ToolChoiceRequired} }, "tool_choice", "without tools"},
		{"tool type", func(r *Request) { r.Tools[0].Type = "retrieval" }, "tools[0].type", `"retrieval" is not supported`},
		{"tool name", func(r *Request) { r.Tools[0].Function.Name = "look up" }, "tools[0].function.name", "not a function name"},
		{"duplicate tool", func(r *Request) { r.Tools = append(r.Tools, r.Tools[0]) }, "tools[1].function.name", "offered twice"},
		{"bad parameters schema", func(r *Request) { r.Tools[0].Function.Parameters = json.RawMessage(`{"type":"objekt"}`) }, "tools[0].function.parameters", "not a valid JSON Schema"},
		{"parameters that double their $refs", func(r *Request) { r.Tools[0].Function.Parameters = json.RawMessage(doublingSchema(40)) },
			"tools[0].function.parameters", "the schema's $refs expand it to more than 100000 subschemas; at most 100000"},
		{"parameters of 120,000 properties", func(r *Request) {
			r.Tools[0].Function.Parameters = json.RawMessage(propertiesSchema(120000, `{"type":"string"}`))
		}, "tools[0].function.parameters", "the schema is 3248922 bytes; at most 524288 (512 KiB)"},
		{"json_schema of 5,001 properties", func(r *Request) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "big", Schema: json.RawMessage(propertiesSchema(5001, "true"))}}
		}, "response_format.json_schema.schema", "the schema has 5001 properties; at most 5000"},
		{"json_schema ok", func(r *Request) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "order", Schema: json.RawMessage(`{"type":"object"}`)}}
		}, "", ""},
		{"json_schema without schema", func(r *Request) { r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema} }, "response_format.json_schema", "missing"},
		{"response_format type", func(r *Request) { r.ResponseFormat = &ResponseFormat{Type: "xml"} }, "response_format.type", `unknown type "xml"`},
		{"stop count", func(r *Request) { r.Stop = Stop{"a", "b", "c", "d", "e"} }, "stop", "over the limit of 4"},
		{"top_p", func(r *Request) { r.TopP = f(1.5) }, "top_p", "out of range"},
		{"presence_penalty", func(r *Request) { r.PresencePenalty = f(-3) }, "presence_penalty", "out of range"},
		{"logit_bias key", func(r *Request) { r.LogitBias = map[string]int{"You": 5} }, "logit_bias", "not a token id"},
		{"top_logprobs without logprobs", func(r *Request) { r.TopLogprobs = n(3) }, "top_logprobs", "needs logprobs: true"},
		{"reasoning_effort", func(r *Request) { r.ReasoningEffort = "max" }, "reasoning_effort", "unknown effort"},
		{"image by URL", func(r *Request) { r.Messages = []Message{img("https://example.com/a.png")} }, "", ""},
		{"image over the cap", func(r *Request) { r.Messages = []Message{img(big)} }, "messages[0].content[1].image_url.url", "over the limit of 256 KiB"},
		{"image not a URL", func(r *Request) { r.Messages = []Message{img("file:///etc/passwd")} }, "messages[0].content[1].image_url.url", "not an http(s) URL"},
		{"image data URI type", func(r *Request) { r.Messages = []Message{img("data:text/html;base64,PGI+")} }, "messages[0].content[1].image_url.url", `type "text/html"`},
		{"passthrough listed", func(r *Request) { r.Passthrough = map[string]json.RawMessage{"top_k": json.RawMessage(`40`)} }, "", ""},
		{"passthrough not listed", func(r *Request) { r.Passthrough = map[string]json.RawMessage{"mirostat": json.RawMessage(`2`)} }, "passthrough.mirostat", "not a passthrough field of any model (the policy's passthrough lists: repetition_penalty, top_k)"},
		{"preferred model without tools", func(r *Request) { r.Model = "llama-8b" }, "tools", "model llama-8b cannot serve it (it lacks tools; its capabilities: none)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := agentReq()
			c.edit(&r)
			err := Validate(r, cfg)
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			ve, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("Validate = %v, want a *ValidationError naming %s", err, c.field)
			}
			for _, p := range ve.Problems {
				if p.Field == c.field && strings.Contains(p.Problem, c.part) {
					return
				}
			}
			t.Errorf("Validate = %v\nwant %s: …%s…", err, c.field, c.part)
		})
	}
}

func TestValidateNoModelCanServe(t *testing.T) {
	cfg := config.DefaultConfig()
	for i := range cfg.Models {
		cfg.Models[i].Capabilities = nil
	}
	err := Validate(agentReq(), cfg)
	if err == nil || !strings.Contains(err.Error(), "tools: no model of the ladder can serve it (it needs tools)") {
		t.Errorf("Validate = %v", err)
	}
}

func TestMessageJSON(t *testing.T) {
	for _, c := range []struct{ in, text string }{
		{`{"role":"user","content":"hi"}`, "hi"},
		{`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""},
		{`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, "a\nb"},
		{`{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}`, "see"},
	} {
		var m Message
		if err := json.Unmarshal([]byte(c.in), &m); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if m.Text() != c.text {
			t.Errorf("%s: Text() = %q, want %q", c.in, m.Text(), c.text)
		}
		b, _ := json.Marshal(m)
		var back Message
		if err := json.Unmarshal(b, &back); err != nil || back.Text() != m.Text() || back.Images() != m.Images() {
			t.Errorf("%s: round trip %s → %+v (%v)", c.in, b, back, err)
		}
	}
	var m Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`), &m); err != nil || m.Images() != 1 {
		t.Errorf("image part: %+v %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"role":"user","content":42}`), &m); err == nil {
		t.Error("content 42 accepted")
	}
}

// TestNullFieldsAreUnset: a starter that writes null for an optional
// field sets nothing.
func TestNullFieldsAreUnset(t *testing.T) {
	var r Request
	body := `{"messages":[{"role":"user","content":"hi"}],"stop":null,"tools":null,"tool_choice":null,"response_format":null,"top_p":null}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Stop != nil || r.Tools != nil || r.ToolChoice != nil || r.ResponseFormat != nil || r.TopP != nil {
		t.Errorf("null fields set: %+v", r)
	}
	if err := Validate(r, nil); err != nil {
		t.Errorf("Validate = %v", err)
	}
	if err := json.Unmarshal([]byte(`{"stop":"END"}`), &r); err != nil || len(r.Stop) != 1 || r.Stop[0] != "END" {
		t.Errorf("stop as one string: %v %v", r.Stop, err)
	}
}
