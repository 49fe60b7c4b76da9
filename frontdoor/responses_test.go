package frontdoor

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
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

// responsesEvent is one event of a Responses API stream as a client reads it.
type responsesEvent struct {
	id    string
	typ   string
	seq   int
	delta string
}

// readResponsesEvents parses the SSE events a responsesFormat wrote.
func readResponsesEvents(t *testing.T, body string) []responsesEvent {
	t.Helper()
	var out []responsesEvent
	if strings.TrimSpace(body) == "" {
		return nil
	}
	for _, block := range strings.Split(strings.TrimSpace(body), "\n\n") {
		var ev responsesEvent
		for _, line := range strings.Split(block, "\n") {
			switch k, v, _ := strings.Cut(line, ": "); k {
			case "id":
				ev.id = v
			case "data":
				var d struct {
					Type  string `json:"type"`
					Seq   int    `json:"sequence_number"`
					Delta string `json:"delta"`
				}
				if err := json.Unmarshal([]byte(v), &d); err != nil {
					t.Fatalf("event data %q: %v", v, err)
				}
				ev.typ, ev.seq, ev.delta = d.Type, d.Seq, d.Delta
			}
		}
		out = append(out, ev)
	}
	return out
}

// TestResponsesEventNumbering: a response's events are numbered 0, 1, 2, …
// without a gap, as OpenAI numbers them, and alike on every connection
// whatever pieces of the text it was handed (one delta per word, a few
// long ones, the whole answer at once from the result), so a client
// resumes with starting_after (or Last-Event-ID) exactly where it
// stopped: nothing repeated, nothing lost.
func TestResponsesEventNumbering(t *testing.T) {
	const answer = "The order left the warehouse on Monday.\n\n  It should arrive within three days; 订单已于周一从仓库发出，预计三天内送达。 Track it at https://example.com/track?id=0123456789abcdefghij."
	res := workflows.CallResult{Content: answer, Model: "qwen-72b", Source: workflows.SourceModel, FinishReason: "stop"}
	feeds := map[string][]string{
		"whole":  {answer},
		"bytes7": nil,
		"words":  strings.SplitAfter(answer, " "),
	}
	for i := 0; i < len(answer); i += 7 {
		feeds["bytes7"] = append(feeds["bytes7"], answer[i:min(i+7, len(answer))])
	}
	run := func(pieces []string, bg bool, after, have int) []responsesEvent {
		rec := httptest.NewRecorder()
		sw := newSSEWriter(rec, "resp_llm-x", time.Unix(0, 0))
		f := newResponsesFormat(sw, bg, after, have)
		if after < 0 && have == 0 {
			f.start("qwen-72b")
		}
		b := 0
		for i, p := range pieces {
			b += len(p)
			f.text(resumePoint{set: true, offset: int64(i), bytes: b}, "qwen-72b", p)
		}
		f.end("llm-x", res)
		return readResponsesEvents(t, rec.Body.String())
	}
	texts := func(evs []responsesEvent) (string, []string) {
		var all strings.Builder
		var ds []string
		for _, ev := range evs {
			if ev.typ == "response.output_text.delta" {
				all.WriteString(ev.delta)
				ds = append(ds, ev.delta)
			}
		}
		return all.String(), ds
	}

	want := run(feeds["whole"], true, -1, 0)
	for i, ev := range want {
		if ev.seq != i {
			t.Fatalf("event %d (%s) has sequence number %d: want 0, 1, 2, … without a gap", i, ev.typ, ev.seq)
		}
	}
	text, deltas := texts(want)
	if text != answer {
		t.Fatalf("the deltas add up to %q, want %q", text, answer)
	}
	if len(deltas) < 10 {
		t.Fatalf("the answer went out in %d deltas, want it streamed in word-sized pieces: %q", len(deltas), deltas)
	}
	if last := want[len(want)-1]; last.typ != "response.completed" {
		t.Fatalf("the last event is %s, want response.completed", last.typ)
	}
	for name, pieces := range feeds {
		got := run(pieces, true, -1, 0)
		if !sameEvents(got, want) {
			t.Errorf("%s: the events differ from those of the whole answer:\n got %v\nwant %v", name, got, want)
		}
		// Resumed after each event: exactly the events after it.
		for after := 0; after < len(want); after++ {
			rest := run(pieces, true, after, 0)
			if !sameEvents(rest, want[after+1:]) {
				t.Fatalf("%s, starting_after %d:\n got %v\nwant %v", name, after, rest, want[after+1:])
			}
		}
	}
	// A POST stream reconnecting with the Last-Event-ID of a delta gets
	// the events after it.
	for i, ev := range want {
		if ev.typ != "response.output_text.delta" {
			continue
		}
		p, err := parseLastEventID(ev.id)
		if err != nil {
			t.Fatalf("delta %d: id %q: %v", i, ev.id, err)
		}
		rest := run(feeds["bytes7"], true, seqInProgress, p.bytes)
		if !sameEvents(rest, want[i+1:]) {
			t.Fatalf("Last-Event-ID %q:\n got %v\nwant %v", ev.id, rest, want[i+1:])
		}
	}
}

// sameEvents compares events by type, sequence number and delta (not by
// SSE id, whose stream offset depends on the connection).
func sameEvents(a, b []responsesEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].typ != b[i].typ || a[i].seq != b[i].seq || a[i].delta != b[i].delta {
			return false
		}
	}
	return true
}

func TestDecodeMessagesRequest(t *testing.T) {
	body := `{"model":"auto","max_tokens":300,"system":[{"type":"text","text":"Be brief."}],"metadata":{"user_id":"u-7"},
		"messages":[{"role":"user","content":[{"type":"text","text":"Where is order 42?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"…","signature":"s"},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"lookup_order","input":{"order_id":"42"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"shipped","is_error":false},{"type":"text","text":"And order 43?"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"lookup_order","input":{"order_id":"43"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no such order"}],"is_error":true}]}],
		"tools":[{"name":"lookup_order","description":"Find an order","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"any","disable_parallel_tool_use":true},"stop_sequences":["END"],"temperature":0.2,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024}}`
	got, err := decodeMessagesRequest([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, m := range got.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,user,assistant,tool" {
		t.Fatalf("roles %v", roles)
	}
	if m := got.Messages[1]; m.Images() != 1 || m.Text() != "Where is order 42?" || !strings.HasPrefix(m.Parts[1].ImageURL.URL, "data:image/png;base64,") {
		t.Errorf("user message %+v", m)
	}
	if m := got.Messages[2]; m.Content != "Let me look." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"order_id":"42"}` {
		t.Errorf("assistant message %+v", m)
	}
	if m := got.Messages[6]; m.ToolCallID != "toolu_2" || m.Content != "Error: no such order" {
		t.Errorf("an error tool_result %+v", m)
	}
	a := got.Agent
	if len(a.Tools) != 1 || string(a.Tools[0].Function.Parameters) != `{"type":"object"}` || a.ToolChoice.Mode != "required" ||
		a.ParallelToolCalls == nil || *a.ParallelToolCalls || len(a.Stop) != 1 || got.MaxTokens != 300 || !got.Stream || got.User != "u-7" {
		t.Errorf("fields %+v (max %d, user %q)", a, got.MaxTokens, got.User)
	}
	if f := got.fieldOf("messages[3].tool_call_id"); f != "messages[2].content[0].tool_call_id" {
		t.Errorf("fieldOf = %q", f)
	}
	if f := got.fieldOf("tools[0].function.parameters"); f != "tools[0].input_schema" {
		t.Errorf("fieldOf = %q", f)
	}

	// count_tokens takes the same body without max_tokens.
	if cr, err := decodeMessages([]byte(`{"model":"auto","messages":[{"role":"user","content":"hi"}]}`), nil, false); err != nil || cr.MaxTokens != 0 {
		t.Errorf("a body without max_tokens for count_tokens: %v (max %d)", err, cr.MaxTokens)
	}
	for _, c := range []struct{ body, field, part string }{
		{`{"model":"auto","messages":[{"role":"user","content":"hi"}]}`, "max_tokens", "missing"},
		{`{"model":"auto","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", "at least 1"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model", "missing"},
		{`{"model":"auto","max_tokens":5}`, "messages", "missing"},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, "messages[0].role", "top-level system"},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, "messages[0].content[0].type", `"document" blocks are not supported`},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type", "not supported"},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools[0].type", "server tools"},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"tool"}}`, "tool_choice.name", "missing"},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"top_k":5}`, "top_k", "not supported"},
		{`{"model":"auto","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"frequency_penalty":1}`, "frequency_penalty", "unknown field"},
	} {
		_, err := decodeMessagesRequest([]byte(c.body), nil)
		if err == nil || err.field != c.field || !strings.Contains(err.problem, c.part) {
			t.Errorf("%s: error %v, want %s: …%s…", c.body, err, c.field, c.part)
		}
	}
}

// TestMessagesStreamEnds: a message stream handed no delta sends the
// answer from the result once; one resumed (Last-Event-ID) after the last
// delta sends none of it again, only the closing events; tool calls come
// as tool_use blocks after the text, each with its input as one
// input_json_delta.
func TestMessagesStreamEnds(t *testing.T) {
	res := workflows.CallResult{Content: "Your parcel ships today.", Model: "qwen-72b", Source: workflows.SourceModel, FinishReason: "tool_calls",
		ToolCalls: []request.ToolCall{{ID: "call_1", Type: "function", Function: request.FunctionCall{Name: "lookup_order", Arguments: `{"order_id":"42"}`}}}}
	run := func(resumed bool) string {
		rec := httptest.NewRecorder()
		sw := newSSEWriter(rec, messageID("llm-x"), time.Unix(0, 0))
		f := &messagesFormat{sw: sw, wid: "llm-x", resumed: resumed}
		if !resumed {
			f.start("qwen-72b")
		}
		f.end("llm-x", res)
		return rec.Body.String()
	}
	fresh := run(false)
	if n := strings.Count(fresh, "Your parcel ships today."); n != 1 {
		t.Fatalf("a fresh stream sends the answer %d times, want once:\n%s", n, fresh)
	}
	for _, want := range []string{"event: message_start", `"type":"tool_use","id":"call_1","name":"lookup_order","input":{}`,
		`"partial_json":"{\"order_id\":\"42\"}"`, `"stop_reason":"tool_use"`, "event: message_stop"} {
		if !strings.Contains(fresh, want) {
			t.Errorf("the stream lacks %s:\n%s", want, fresh)
		}
	}
	resumed := run(true)
	if strings.Contains(resumed, "Your parcel ships today.") || strings.Contains(resumed, "message_start") {
		t.Fatalf("a resumed stream repeats what the client has:\n%s", resumed)
	}
	if !strings.Contains(resumed, `{"content_block":{"type":"tool_use","id":"call_1","name":"lookup_order","input":{}},"index":1,"type":"content_block_start"}`) ||
		!strings.Contains(resumed, "event: message_stop") {
		t.Fatalf("a resumed stream lacks its closing events, the tool_use block after the text block:\n%s", resumed)
	}
}
