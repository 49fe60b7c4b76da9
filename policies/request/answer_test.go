package request

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/structured"
)

func tools(choice *ToolChoice) Request {
	strict := true
	return Request{
		Tools: []Tool{
			{Type: "function", Function: FunctionTool{Name: "lookup_order", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`), Strict: &strict}},
			{Type: "function", Function: FunctionTool{Name: "cancel_order"}},
		},
		ToolChoice: choice,
	}
}

func call(name, args string) ToolCall {
	return ToolCall{ID: "call_1", Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

func TestAnswerToolCalls(t *testing.T) {
	c := structured.NewCache()
	cases := []struct {
		name    string
		req     Request
		content string
		calls   []ToolCall
		want    string
	}{
		{"good call", tools(nil), "", []ToolCall{call("lookup_order", `{"order_id":"42"}`)}, ""},
		{"text with optional tools", tools(nil), "Order 42 has shipped.", nil, ""},
		{"unknown tool", tools(nil), "", []ToolCall{call("delete_db", `{}`)}, `calls "delete_db", which was not offered (offered: lookup_order, cancel_order)`},
		{"arguments not JSON", tools(nil), "", []ToolCall{call("cancel_order", `{"order_id": 4`)}, "not valid JSON"},
		{"arguments not an object", tools(nil), "", []ToolCall{call("cancel_order", `[1]`)}, "not a JSON object"},
		{"strict parameters", tools(nil), "", []ToolCall{call("lookup_order", `{"order_id":42}`)}, "do not match its parameters: at /order_id"},
		{"required but none", tools(&ToolChoice{Mode: ToolChoiceRequired}), "I think it shipped.", nil, "tool_choice is required but the answer called no tool"},
		{"named but another", tools(&ToolChoice{Function: "lookup_order"}), "", []ToolCall{call("cancel_order", `{}`)}, `tool_choice names "lookup_order"`},
		{"none offered", Request{}, "", []ToolCall{call("f", `{}`)}, "no tool was offered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			toolErr, schemaErr := tc.req.CheckAnswer(c, tc.content, tc.calls)
			if schemaErr != nil {
				t.Errorf("schema error %v for a request without response_format", schemaErr)
			}
			switch {
			case tc.want == "" && toolErr != nil:
				t.Errorf("toolErr = %v, want nil", toolErr)
			case tc.want != "" && (toolErr == nil || !strings.Contains(toolErr.Error(), tc.want)):
				t.Errorf("toolErr = %v, want it to contain %q", toolErr, tc.want)
			}
		})
	}
}

func TestAnswerResponseFormat(t *testing.T) {
	c := structured.NewCache()
	schemaReq := Request{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema,
		JSONSchema: &JSONSchema{Name: "order", Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"status":{"type":"string","enum":["shipped","pending"]}},"required":["order_id","status"],"additionalProperties":false}`)}}}
	objReq := Request{ResponseFormat: &ResponseFormat{Type: FormatJSONObject}}
	for _, tc := range []struct {
		req     Request
		content string
		bad     bool
	}{
		{schemaReq, `{"order_id":"42","status":"shipped"}`, false},
		{schemaReq, `{"order_id":"42"}`, true},
		{schemaReq, "```json\n{}\n```", true},
		{objReq, `{"anything": [1,2]}`, false},
		{objReq, `[1,2]`, true},
		{objReq, `Here you go`, true},
		{Request{}, `not json at all`, false},
	} {
		_, err := tc.req.CheckAnswer(c, tc.content, nil)
		if (err != nil) != tc.bad {
			t.Errorf("Answer(%q) schema error = %v, want bad=%v", tc.content, err, tc.bad)
		}
	}
}

// TestStructured: only a model's answer can answer a required tool call
// or a JSON answer; optional tools and text formats can take the FAQ.
func TestStructured(t *testing.T) {
	tools := []Tool{{Type: "function", Function: FunctionTool{Name: "f"}}}
	for _, c := range []struct {
		name string
		r    Request
		want bool
	}{
		{"plain", Request{}, false},
		{"optional tools", Request{Tools: tools}, false},
		{"required tool", Request{Tools: tools, ToolChoice: &ToolChoice{Mode: ToolChoiceRequired}}, true},
		{"named tool", Request{Tools: tools, ToolChoice: &ToolChoice{Function: "f"}}, true},
		{"json_object", Request{ResponseFormat: &ResponseFormat{Type: FormatJSONObject}}, true},
		{"json_schema", Request{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "s", Schema: json.RawMessage(`{}`)}}}, true},
		{"text format", Request{ResponseFormat: &ResponseFormat{Type: FormatText}}, false},
	} {
		if got := c.r.Structured(); got != c.want {
			t.Errorf("%s: Structured() = %v, want %v", c.name, got, c.want)
		}
	}
}
