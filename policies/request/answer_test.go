package request

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
		public  string // "" for a good answer; else a part of Error()
		detail  string // a part of structured.Detail
	}{
		{"good call", tools(nil), "", []ToolCall{call("lookup_order", `{"order_id":"42"}`)}, "", ""},
		{"text with optional tools", tools(nil), "Order 42 has shipped.", nil, "", ""},
		{"unknown tool", tools(nil), "", []ToolCall{call("delete_db", `{}`)},
			"tool_calls[0] calls a tool that was not offered", `calls "delete_db", which was not offered (offered: lookup_order, cancel_order)`},
		{"arguments not JSON", tools(nil), "", []ToolCall{call("cancel_order", `{"order_id": 4`)},
			"tool_calls[0]: the arguments are not valid JSON", "tool_calls[0] (cancel_order): the arguments are not valid JSON"},
		{"arguments not an object", tools(nil), "", []ToolCall{call("cancel_order", `[1]`)},
			"tool_calls[0]: the arguments are not a JSON object", "not a JSON object"},
		{"strict parameters", tools(nil), "", []ToolCall{call("lookup_order", `{"order_id":42}`)},
			"tool_calls[0]: the arguments do not match its parameters: at /order_id: fails type", "at /order_id: got number, want string"},
		{"required but none", tools(&ToolChoice{Mode: ToolChoiceRequired}), "I think it shipped.", nil,
			"tool_choice requires a tool call but the answer called no tool", "tool_choice is required but the answer called no tool"},
		{"named but another", tools(&ToolChoice{Function: "lookup_order"}), "", []ToolCall{call("cancel_order", `{}`)},
			"tool_calls[0] calls another tool than the one tool_choice names", `tool_choice names "lookup_order"`},
		{"none offered", Request{}, "", []ToolCall{call("f", `{}`)},
			"the answer called a tool but no tool was offered", "the answer called f but no tool was offered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			toolErr, schemaErr := tc.req.CheckAnswer(context.Background(), c, tc.content, tc.calls)
			if schemaErr != nil {
				t.Errorf("schema error %v for a request without response_format", schemaErr)
			}
			switch {
			case tc.public == "" && toolErr != nil:
				t.Errorf("toolErr = %v, want nil", toolErr)
			case tc.public != "" && (toolErr == nil || !strings.Contains(toolErr.Error(), tc.public)):
				t.Errorf("toolErr = %v, want it to contain %q", toolErr, tc.public)
			case tc.public != "" && !strings.Contains(structured.Detail(toolErr), tc.detail):
				t.Errorf("Detail(toolErr) = %q, want it to contain %q", structured.Detail(toolErr), tc.detail)
			}
		})
	}
}

// TestAnswerPublicWordsQuoteNothing: what a tenant reads of a failed
// check (the error's text, an attempt's reason) holds neither the value
// that failed, nor the pattern, nor a name the model chose; the detail
// for the model's repair has the value.
func TestAnswerPublicWordsQuoteNothing(t *testing.T) {
	strict := true
	tool := func(params string) Request {
		return Request{Tools: []Tool{{Type: "function", Function: FunctionTool{Name: "lookup", Parameters: json.RawMessage(params), Strict: &strict}}}}
	}
	pattern := tool(`{"type":"object","additionalProperties":false,"required":["q"],"properties":{"q":{"type":"string","pattern":"^x$"}}}`)
	open := tool(`{"type":"object","additionalProperties":{"type":"integer"}}`)
	list := tool(`{"type":"object","properties":{"list":{"type":"array","items":{"type":"integer"}}}}`)
	c := structured.NewCache()
	for _, tc := range []struct {
		name   string
		req    Request
		calls  []ToolCall
		secret []string // never in Error()
		detail string   // in Detail
		public string   // in Error()
	}{
		{"value against a pattern", pattern, []ToolCall{call("lookup", `{"q":"notakeyx"}`)}, []string{"notakeyx", "^x$"}, "notakeyx", "at /q: fails pattern"},
		{"an extra property the model named", pattern, []ToolCall{call("lookup", `{"q":"x","notakeyx":1}`)}, []string{"notakeyx"}, "notakeyx", "at /: fails additionalProperties"},
		{"a name the model chose in the path", open, []ToolCall{call("lookup", `{"notakeyx":"s"}`)}, []string{"notakeyx", `"s"`}, "notakeyx", "at /*: fails type"},
		{"a name of digits the model chose", open, []ToolCall{call("lookup", `{"12345678":"s"}`)}, []string{"12345678"}, "12345678", "at /*: fails type"},
		{"an index in an array", list, []ToolCall{call("lookup", `{"list":[1,"notakeyx"]}`)}, []string{"notakeyx"}, "at /list/1: got string, want integer", "at /list/1: fails type"},
		{"a tool the model invented", pattern, []ToolCall{call("notakeyx", `{}`)}, []string{"notakeyx", "lookup"}, "notakeyx", "tool_calls[0] calls a tool that was not offered"},
		{"arguments that are not JSON", pattern, []ToolCall{call("lookup", `notakeyx`)}, []string{"notakeyx"}, "lookup", "tool_calls[0]: the arguments are not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := tc.req.CheckAnswer(context.Background(), c, "", tc.calls)
			if err == nil {
				t.Fatal("the answer passed")
			}
			for _, s := range tc.secret {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Error() = %q quotes %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), tc.public) {
				t.Errorf("Error() = %q, want %q", err, tc.public)
			}
			if d := structured.Detail(err); !strings.Contains(d, tc.detail) {
				t.Errorf("Detail = %q, want %q in it", d, tc.detail)
			}
		})
	}
	schemaReq := Request{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema,
		JSONSchema: &JSONSchema{Name: "s", Schema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":3}}}`)}}}
	for _, tc := range []struct{ content, public string }{
		{`{"q":"notakeyx"}`, "at /q: fails maxLength"},
		{`notakeyx {`, "the answer is not valid JSON"},
	} {
		_, err := schemaReq.CheckAnswer(context.Background(), c, tc.content, nil)
		if err == nil || err.Error() != tc.public {
			t.Errorf("CheckAnswer(%q) = %v, want %q", tc.content, err, tc.public)
		}
	}
}

// TestAnswerThatCannotBeChecked: arguments whose check would be
// exponential (a strict tool whose $ref cycle doubles with every level,
// arguments 40 levels deep) are a schema_mismatch that says so, found
// after the step budget; a check whose context ends stops.
func TestAnswerThatCannotBeChecked(t *testing.T) {
	strict := true
	r := Request{Tools: []Tool{{Type: "function", Function: FunctionTool{Name: "nest", Strict: &strict,
		Parameters: json.RawMessage(`{"$defs":{"r":{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/r"},{"$ref":"#/$defs/r"}]}}}},"$ref":"#/$defs/r"}`)}}}}
	if err := Validate(Request{Messages: []Message{{Role: RoleUser, Content: "nest"}}, Tools: r.Tools}, nil); err != nil {
		t.Fatalf("Validate = %v: the schema is small and within the limits", err)
	}
	deep := strings.Repeat(`{"a":`, 40) + `{}` + strings.Repeat(`}`, 40)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
		text string
	}{
		{"out of steps", context.Background(), structured.ErrStepBudget, fmt.Sprintf("tool_calls[0]: the answer could not be checked within %d steps", structured.StepBudget)},
		{"cancelled", cancelled, context.Canceled, "tool_calls[0]: checking the answer was stopped: context canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan struct{})
			var toolErr, schemaErr error
			go func() {
				defer close(done)
				toolErr, schemaErr = r.CheckAnswer(c.ctx, Schemas(), "", []ToolCall{call("nest", deep)})
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the check still runs after a minute")
			}
			if toolErr != nil || !errors.Is(schemaErr, c.want) || schemaErr.Error() != c.text {
				t.Errorf("CheckAnswer = %v, %v; want nil, %q", toolErr, schemaErr, c.text)
			}
		})
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
