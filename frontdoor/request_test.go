package frontdoor

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

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
