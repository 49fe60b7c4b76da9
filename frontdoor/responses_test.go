package frontdoor

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

func TestDecodeResponsesRequest(t *testing.T) {
	body := `{"model":"auto","instructions":"Be brief.","store":false,"include":["reasoning.encrypted_content"],
		"input":[{"role":"user","content":[{"type":"input_text","text":"Where is order 42?"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]},
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"function_call","call_id":"c1","name":"lookup_order","arguments":"{\"order_id\":\"42\"}"},
			{"type":"function_call","call_id":"c2","name":"lookup_order","arguments":"{\"order_id\":\"43\"}"},
			{"type":"function_call_output","call_id":"c1","output":"shipped"},
			{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"pending"}]}],
		"tools":[{"type":"function","name":"lookup_order","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"lookup_order"},
		"text":{"format":{"type":"json_schema","name":"order","schema":{"type":"object"},"strict":true}},
		"max_output_tokens":300,"reasoning":{"effort":"low"},"stream":true,"top_k":5}`
	got, err := decodeResponsesRequest([]byte(body), map[string]bool{"top_k": true})
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, m := range got.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,tool" {
		t.Fatalf("roles %v", roles)
	}
	if m := got.Messages[1]; m.Images() != 1 || m.Text() != "Where is order 42?" {
		t.Errorf("user message %+v", m)
	}
	if m := got.Messages[2]; len(m.ToolCalls) != 2 || m.ToolCalls[1].ID != "c2" {
		t.Errorf("consecutive function calls are one assistant message: %+v", m)
	}
	if m := got.Messages[4]; m.ToolCallID != "c2" || m.Content != "pending" {
		t.Errorf("function_call_output %+v", m)
	}
	a := got.Agent
	if len(a.Tools) != 1 || a.ToolChoice.Function != "lookup_order" || a.ResponseFormat.JSONSchema.Name != "order" ||
		a.ReasoningEffort != "low" || string(a.Passthrough["top_k"]) != "5" || got.MaxTokens != 300 || !got.Stream {
		t.Errorf("fields %+v (max %d)", a, got.MaxTokens)
	}
	if f := got.fieldOf("messages[4].tool_call_id"); f != "input[5].tool_call_id" {
		t.Errorf("fieldOf = %q", f)
	}
	if f := got.fieldOf("response_format.json_schema.schema"); f != "text.format" {
		t.Errorf("fieldOf = %q", f)
	}

	for _, c := range []struct{ body, field, part string }{
		{`{"input":"hi","conversation":"conv_1"}`, "conversation", "not supported"},
		{`{"input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type", `"web_search" tools are not supported`},
		{`{"input":[{"type":"item_reference","id":"x"}]}`, "input[0].type", `"item_reference" items are not supported`},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type", `"input_file" parts are not supported`},
		{`{"input":"hi","truncation":"auto"}`, "truncation", "not supported"},
		{`{"input":"hi","frequency_penalty":1}`, "frequency_penalty", "unknown field"},
		{`{"model":"auto"}`, "input", "missing"},
	} {
		_, err := decodeResponsesRequest([]byte(c.body), nil)
		if err == nil || err.field != c.field || !strings.Contains(err.problem, c.part) {
			t.Errorf("%s: error %v, want %s: …%s…", c.body, err, c.field, c.part)
		}
	}
}

// TestFieldListsAreStandard: every field the front door reads, ignores or
// refuses by name is one a model's passthrough list may not claim, so a
// policy can never shadow a field the call sends itself.
func TestFieldListsAreStandard(t *testing.T) {
	for _, list := range [][]string{handledFields, IgnoredFields, slices.Collect(maps.Keys(unsupported))} {
		for _, f := range list {
			if !slices.Contains(config.StandardFields, f) {
				t.Errorf("chat field %q is missing from config.StandardFields", f)
			}
		}
	}
}
