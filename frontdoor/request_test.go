package frontdoor

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/request"
)

func TestDecodeChatRequest(t *testing.T) {
	temp, topP := 0.2, 0.9
	for _, tc := range []struct {
		name string
		body string
		want chatRequest
	}{
		{
			name: "OpenAI fields, ignore-listed ones accepted",
			body: `{"model":"qwen-14b","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi","name":"ann"}],
				"max_tokens":100,"temperature":0.2,"user":"u-1","stream":true,"stream_options":{"include_usage":true},
				"n":1,"top_p":0.9,"tools":[],"response_format":{"type":"text"},"metadata":{"a":"b"},"store":false,"service_tier":"auto"}`,
			want: chatRequest{Model: "qwen-14b", Messages: []request.Message{
				{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi", Name: "ann"},
			}, MaxTokens: 100, maxTokensBy: "max_tokens", Temperature: &temp, User: "u-1", Stream: true, IncludeUsage: true,
				Agent: request.Request{Tools: []request.Tool{}, TopP: &topP, ResponseFormat: &request.ResponseFormat{Type: "text"}}},
		},
		{
			name: "stream_options: unknown fields ignored, include_usage false",
			body: `{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":true}}`,
			want: chatRequest{Messages: []request.Message{{Role: "user", Content: "Hi"}}, Stream: true},
		},
		{
			name: "stream_options null",
			body: `{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":null}`,
			want: chatRequest{Messages: []request.Message{{Role: "user", Content: "Hi"}}, Stream: true},
		},
		{
			name: "max_completion_tokens wins over max_tokens",
			body: `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":100,"max_completion_tokens":300}`,
			want: chatRequest{Messages: []request.Message{{Role: "user", Content: "Hi"}}, MaxTokens: 300, maxTokensBy: "max_completion_tokens"},
		},
		{
			name: "text parts joined, null content, tool calls",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"42"},{"role":"user","content":"so?"}],
				"temperature":null,"user":null,"stream":null}`,
			want: chatRequest{Messages: []request.Message{
				{Role: "user", Content: "a\nb"},
				{Role: "assistant", ToolCalls: []request.ToolCall{{ID: "c1", Type: "function", Function: request.FunctionCall{Name: "f", Arguments: "{}"}}}},
				{Role: "tool", ToolCallID: "c1", Content: "42"},
				{Role: "user", Content: "so?"},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeChatRequest([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeChatRequestNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name, body, field, problem string
	}{
		{"empty body", ``, "", "the request body is empty"},
		{"malformed", `{"messages":[`, "", "malformed JSON at byte 13"},
		{"trailing garbage", `{"messages":[]} x`, "", "malformed JSON"},
		{"array body", `[1]`, "", "is a JSON array, want an object"},
		{"null body", `null`, "", "is null"},
		{"model a number", `{"model":4}`, "model", "want a string, got a JSON number 4"},
		{"stream a string", `{"stream":"yes"}`, "stream", "want a boolean, got a JSON string"},
		{"temperature a string", `{"temperature":"hot"}`, "temperature", "want a number, got a JSON string"},
		{"max_tokens fractional", `{"max_tokens":1.5}`, "max_tokens", "want an integer, got a JSON number 1.5"},
		{"n two", `{"n":2,"messages":[]}`, "n", "2 choices asked"},
		{"n two with stream", `{"stream":true,"n":2,"messages":[{"role":"user","content":"Hi"}]}`, "n", "2 choices asked"},
		{"stream_options a boolean", `{"stream":true,"stream_options":true}`, "stream_options", "want an object, got a JSON boolean"},
		{"stream_options an array", `{"stream":true,"stream_options":[]}`, "stream_options", "want an object, got a JSON array"},
		{"include_usage a string", `{"stream":true,"stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage", "want a boolean, got a JSON string"},
		{"messages missing", `{}`, "messages", "missing"},
		{"messages an object", `{"messages":{}}`, "messages", "want an array"},
		{"message a string", `{"messages":["hi"]}`, "messages[0]", "want a message object"},
		{"role a number", `{"messages":[{"role":1}]}`, "messages[0].role", "want a string"},
		{"content an object", `{"messages":[{"role":"user","content":{}}]}`, "messages[0].content", "want a string or an array of content parts"},
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].type", `"input_audio" parts are not supported (want "text" or "image_url")`},
		{"image_url a string", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/y.png"}]}]}`, "messages[0].content[0].image_url", "want an object {url, detail}"},
		{"unknown field", `{"messages":[],"toolz":[]}`, "toolz", "unknown field"},
		{"deprecated functions", `{"messages":[],"functions":[]}`, "functions", "send tools instead"},
		{"tools an object", `{"messages":[],"tools":{}}`, "tools", "want an array of {type"},
		{"tool_choice a number", `{"messages":[],"tool_choice":3}`, "tool_choice", "want \"none\", \"auto\""},
		{"stop a number", `{"messages":[],"stop":3}`, "stop", "want a string or an array of strings"},
		{"seed a string", `{"messages":[],"seed":"x"}`, "seed", "want an integer"},
		{"part text a number", `{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content[0].text", "want a string"},
		{"tool call without function", `{"messages":[{"role":"assistant","tool_calls":[{"id":"x"}]}]}`, "messages[0].tool_calls[0].function", "missing"},
		{"tool calls a string", `{"messages":[{"role":"assistant","tool_calls":"x"}]}`, "messages[0].tool_calls", "want an array"},
		// Unknown fields inside the body are refused by path, as at the top level.
		{"unknown field in a message", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi","reasoning_content":"x"}]}`, "messages[1].reasoning_content", "unknown field"},
		{"misspelt field in a message", `{"messages":[{"role":"tool","tool_call_idx":"c1","content":"42"}]}`, "messages[0].tool_call_idx", "unknown field"},
		{"empty field name in a message", `{"messages":[{"role":"user","content":"Hi","":1}]}`, `messages[0].""`, "unknown field"},
		{"audio reference in a message", `{"messages":[{"role":"assistant","audio":{"id":"audio_1"}},{"role":"user","content":"Hi"}]}`, "messages[0].audio", "audio output is not supported"},
		{"function_call in a message", `{"messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]}`, "messages[0].function_call", "send tool_calls instead"},
		{"unknown field in a text part", `{"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}]}`, "messages[0].content[0].cache_control", "unknown field"},
		{"unknown field in an image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"},"text":"x"}]}]}`, "messages[0].content[0].text", "unknown field"},
		{"unknown field in image_url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","format":"png"}}]}]}`, "messages[0].content[0].image_url.format", "unknown field"},
		{"unknown field in a tool call", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"extra":1}]}]}`, "messages[0].tool_calls[0].extra", "unknown field"},
		{"unknown field in a tool call's function", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","args":"{}"}}]}]}`, "messages[0].tool_calls[0].function.args", "unknown field"},
		{"unknown field in a tool", `{"messages":[],"tools":[{"type":"function","function":{"name":"f"},"cache_control":{}}]}`, "tools[0].cache_control", "unknown field"},
		{"unknown field in a tool's function", `{"messages":[],"tools":[{"type":"function","function":{"name":"f","parameter":{}}}]}`, "tools[0].function.parameter", "unknown field"},
		{"unknown field in response_format", `{"messages":[],"response_format":{"type":"json_object","schema":{}}}`, "response_format.schema", "unknown field"},
		{"unknown field in json_schema", `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{},"strct":true}}}`, "response_format.json_schema.strct", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeChatRequest([]byte(tc.body), nil)
			if err == nil {
				t.Fatal("no error")
			}
			if err.field != tc.field || !strings.Contains(err.problem, tc.problem) {
				t.Errorf("got %q: %q; want %q: …%q…", err.field, err.problem, tc.field, tc.problem)
			}
		})
	}
}

func TestValidationErrorUsesTheClientsNames(t *testing.T) {
	neg := -1.0
	req := request.Request{UserID: "u\xff", Messages: []request.Message{{Role: "user", Content: "hi"}},
		MaxTokens: -5, Temperature: &neg, IdempotencyKey: "a b", DeadlineMS: 5}
	err := request.Validate(req, nil)
	e := validationError(err, chatRequest{maxTokensBy: "max_completion_tokens"})
	if e.status != http.StatusBadRequest || e.param != "user" {
		t.Errorf("status %d param %q", e.status, e.param)
	}
	for _, want := range []string{"user: invalid UTF-8", "max_completion_tokens: -5 is negative", "temperature: -1 is negative",
		"X-Deadline-Ms header: 5 ms", "Idempotency-Key header: byte 1"} {
		if !strings.Contains(e.message, want) {
			t.Errorf("message %q lacks %q", e.message, want)
		}
	}
}

func TestSplitContent(t *testing.T) {
	long := strings.Repeat("word ", 40)
	cjk := strings.Repeat("订单已发货", 10) // 150 bytes, no spaces
	for _, s := range []string{"", "short", long, cjk, long + cjk} {
		parts := splitContent(s)
		if strings.Join(parts, "") != s {
			t.Errorf("pieces of %q do not add up", s)
		}
		for _, p := range parts {
			if len(p) > chunkSize || p == "" {
				t.Errorf("piece %q: %d bytes", p, len(p))
			}
			if !strings.HasSuffix(p, " ") && strings.Contains(s, " ") && p != parts[len(parts)-1] && !strings.ContainsRune(p, '订') {
				t.Errorf("piece %q of spaced text not cut at a space", p)
			}
			if !utf8Valid(p) {
				t.Errorf("piece %q cuts a character", p)
			}
		}
	}
	if n := len(splitContent(long)); n != 4 {
		t.Errorf("200 bytes in %d pieces, want 4", n)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestPreferAsync(t *testing.T) {
	for v, want := range map[string]bool{
		"respond-async": true, "wait=10, respond-async": true, "Respond-Async; foo": true,
		"return=minimal": false, "": false, "respond-asyncx": false,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Prefer", v)
		}
		if got := preferAsync(h); got != want {
			t.Errorf("Prefer: %q → %v, want %v", v, got, want)
		}
	}
}

// TestDecodeChatRequestTakesBackItsOwnMessages: the fields the official
// clients keep in a message they return (refusal, parsed, annotations,
// null audio and function_call, a streamed tool call's index, the parse
// helpers' parsed_arguments) are accepted when an agent sends the message
// back, and dropped.
func TestDecodeChatRequestTakesBackItsOwnMessages(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"Where is order 42?"},
		{"role":"assistant","content":null,"refusal":null,"audio":null,"function_call":null,"annotations":[],"parsed":null,
		 "tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"lookup_order","arguments":"{}","parsed_arguments":{}}}]},
		{"role":"tool","tool_call_id":"c1","content":"shipped"}],
		"tools":[{"type":"function","function":{"name":"lookup_order","description":"d","parameters":{"type":"object"},"strict":false}}],
		"response_format":{"type":"json_schema","json_schema":{"name":"a","description":"d","schema":{"type":"object"},"strict":true}}}`
	got, err := decodeChatRequest([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []request.Message{{Role: "user", Content: "Where is order 42?"},
		{Role: "assistant", ToolCalls: []request.ToolCall{{ID: "c1", Type: "function", Function: request.FunctionCall{Name: "lookup_order", Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "c1", Content: "shipped"}}
	if !reflect.DeepEqual(got.Messages, want) {
		t.Errorf("got  %+v\nwant %+v", got.Messages, want)
	}
	// A tool of another type is named by Validate ("custom" is not
	// supported), not refused here for its fields.
	if _, err := decodeChatRequest([]byte(`{"messages":[],"tools":[{"type":"custom","custom":{"name":"f"}}]}`), nil); err != nil {
		t.Errorf("a custom tool: %v", err)
	}
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		name, body, problem string
	}{
		{"UTF-8", `{"messages":[{"role":"user","content":"订单 ✓ 😀"}]}`, ""},
		{"escaped pair", `{"content":"\ud83d\ude00 and \u00e9 and \\ud83d"}`, ""},
		{"a bad byte", "{\"content\":\"ok \xff\"}", "not valid UTF-8 (byte 15)"},
		{"a cut sequence", "{\"content\":\"\xe8\xae\"}", "not valid UTF-8 (byte 12)"},
		{"overlong encoding", "{\"content\":\"\xc0\xaf\"}", "not valid UTF-8"},
		{"an encoded surrogate", "{\"content\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"lone high surrogate escape", `{"content":"\ud83d!"}`, "half a UTF-16 surrogate pair at byte 12"},
		{"high surrogate at the end", `{"content":"\ud83d"}`, "half a UTF-16 surrogate pair at byte 12"},
		{"lone low surrogate escape", `{"content":"\uDE00"}`, "half a UTF-16 surrogate pair"},
		{"high then a non-surrogate escape", `{"content":"\ud83d\u0041"}`, "half a UTF-16 surrogate pair"},
		{"two high surrogates", `{"content":"\ud83d\ud83d"}`, "half a UTF-16 surrogate pair"},
		{"in a field name", `{"\ud800":1}`, "half a UTF-16 surrogate pair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkText([]byte(tc.body))
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.problem != "" && (err == nil || err.field != "" || !strings.Contains(err.problem, tc.problem)):
				t.Errorf("got %v, want …%q…", err, tc.problem)
			}
		})
	}
}

func TestParseDeadlineMS(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		ms      int64
		problem string
	}{
		{"ten seconds", "10000", 10000, ""},
		{"beyond a Duration, for Validate to refuse", "10000000000000", 10000000000000, ""},
		{"beyond int64", "99999999999999999999", 0, "over the limit of 600000 ms (10m0s)"},
		{"far below int64", "-99999999999999999999", 0, "negative"},
		{"a fraction", "1.5", 0, `"1.5" is not a whole number of milliseconds`},
		{"long garbage, not echoed", strings.Repeat("x", 100), 0, "not a whole number of milliseconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, problem := parseDeadlineMS(tc.v, 10*time.Minute)
			if ms != tc.ms || !strings.Contains(problem, tc.problem) || (tc.problem == "") != (problem == "") {
				t.Errorf("got %d, %q; want %d, …%q…", ms, problem, tc.ms, tc.problem)
			}
			if strings.Contains(problem, "xxxx") {
				t.Errorf("the header is echoed: %q", problem)
			}
		})
	}
}
