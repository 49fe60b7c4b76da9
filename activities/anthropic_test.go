package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestAConversationInAnthropicsWords: a chat request with a system
// prompt, an image, a tool call and its two results, and a final
// assistant message to continue goes out as Anthropic expects it: the
// system apart, the two tool results in one user turn, the tool's
// parameters as its input_schema, required as any with one call at a
// time, the prefill without its trailing space, max_tokens kept.
func TestAConversationInAnthropicsWords(t *testing.T) {
	req := openai.ChatCompletionRequest{
		Model: "claude-x", MaxTokens: 300, Stop: []string{"END"}, User: "u-7",
		Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: "You are a support agent."},
			{Role: "user", MultiContent: []openai.ChatMessagePart{
				{Type: "text", Text: "What is in the picture, and where are parcels 1 and 2?"},
				{Type: "image_url", ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,iVBORw0KGgo="}},
			}},
			{Role: "assistant", ToolCalls: []openai.ToolCall{
				{ID: "t1", Type: "function", Function: openai.FunctionCall{Name: "track", Arguments: `{"parcel":1}`}},
				{ID: "t2", Type: "function", Function: openai.FunctionCall{Name: "track", Arguments: `{"parcel":2}`}},
			}},
			{Role: "tool", ToolCallID: "t1", Content: "in Lyon"},
			{Role: "tool", ToolCallID: "t2", Content: "delivered"},
			{Role: "assistant", Content: "Parcel 1 is in Lyon and "},
		},
		Tools: []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "track", Description: "Track a parcel",
			Parameters: json.RawMessage(`{"type":"object","properties":{"parcel":{"type":"integer"}},"required":["parcel"],"additionalProperties":false}`)}}},
		ToolChoice: "required", ParallelToolCalls: false,
	}
	p, trimmed, err := messageParams(req)
	require.NoError(t, err)
	require.Equal(t, " ", trimmed)
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	want := `{
		"max_tokens": 300, "model": "claude-x", "metadata": {"user_id": "u-7"}, "stop_sequences": ["END"],
		"system": [{"text": "You are a support agent.", "type": "text"}],
		"messages": [
			{"role": "user", "content": [
				{"type": "text", "text": "What is in the picture, and where are parcels 1 and 2?"},
				{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
			{"role": "assistant", "content": [
				{"type": "tool_use", "id": "t1", "name": "track", "input": {"parcel": 1}},
				{"type": "tool_use", "id": "t2", "name": "track", "input": {"parcel": 2}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "in Lyon"}], "is_error": false},
				{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "delivered"}], "is_error": false}]},
			{"role": "assistant", "content": [{"type": "text", "text": "Parcel 1 is in Lyon and"}]}],
		"tools": [{"name": "track", "description": "Track a parcel",
			"input_schema": {"type": "object", "properties": {"parcel": {"type": "integer"}}, "required": ["parcel"], "additionalProperties": false}}],
		"tool_choice": {"type": "any", "disable_parallel_tool_use": true}
	}`
	require.JSONEq(t, want, string(raw))
}

// TestARequestAnthropicCannotSayIsRefusedBeforeSending: a tool call whose
// arguments are not a JSON object has no tool_use input: the attempt is
// invalid_request, and the reason says why, before any request.
func TestARequestAnthropicCannotSayIsRefusedBeforeSending(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent++ }))
	defer srv.Close()
	up := anthropicUpstream{c: anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL), option.WithMaxRetries(0))}
	_, err := up.create(context.Background(), openai.ChatCompletionRequest{Model: "claude-x", Messages: []openai.ChatCompletionMessage{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "t1", Function: openai.FunctionCall{Name: "f", Arguments: `[1,2]`}}}},
	}})
	require.ErrorIs(t, err, classify.ErrNotTranslatable)
	require.Contains(t, err.Error(), `tool call "t1"'s arguments are not a JSON object`)
	v := classify.Classify(classify.Observation{Err: err})
	require.Equal(t, failure.InvalidRequest, v.Class, v.Reason)
	require.Zero(t, sent)
}

// anthropicEvent is one server-sent event as Anthropic writes it.
func anthropicEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// anthropicStreamOf is a Messages API stream of text pieces, then end
// (message_delta and message_stop) or an error event.
func anthropicStreamOf(pieces []string, end string) string {
	var b strings.Builder
	b.WriteString(anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}`))
	b.WriteString(anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	b.WriteString(anthropicEvent("ping", `{"type":"ping"}`))
	for _, p := range pieces {
		q, _ := json.Marshal(p)
		b.WriteString(anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(q)+`}}`))
	}
	b.WriteString(end)
	return b.String()
}

const anthropicEnd = `event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`

// TestAnthropicsSignalsAsAnthropicSendsThem: through Anthropic's SDK, a
// stream read whole, a tool_use streamed as a tool call, an
// overloaded_error event inside an HTTP 200 stream after text (a cut
// stream) and before any (backpressure), a 529 (backpressure) and a 429
// with retry-after.
func TestAnthropicsSignalsAsAnthropicSendsThem(t *testing.T) {
	overloaded := anthropicEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	toolStream := anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_2","model":"claude-x","content":[],"usage":{"input_tokens":5}}}`) +
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"track","input":{}}}`) +
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"parcel\":"}}`) +
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"9}"}}`) +
		anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}`) +
		anthropicEvent("message_stop", `{"type":"message_stop"}`)
	cases := []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		class   failure.Class
		content string
	}{
		{"a whole stream", 200, nil, anthropicStreamOf([]string{"Parcel ", "9 is ", "in Lyon."}, anthropicEnd), failure.None, "Parcel 9 is in Lyon."},
		{"a tool call", 200, nil, toolStream, failure.None, ""},
		{"overloaded_error after text", 200, nil, anthropicStreamOf([]string{"Parcel ", "9 "}, overloaded), failure.StreamBroken, "Parcel 9 "},
		{"overloaded_error before text", 200, nil, anthropicStreamOf(nil, overloaded), failure.QueueFull, ""},
		{"529 overloaded", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, failure.QueueFull, ""},
		{"429 with retry-after", 429, map[string]string{"retry-after": "7"}, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, failure.RateLimited, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				require.Equal(t, "/v1/messages", r.URL.Path)
				require.Equal(t, "Bearer sk-ant-test", r.Header.Get("Authorization"), "the SDK sends the key as a bearer token")
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", map[bool]string{true: "text/event-stream", false: "application/json"}[c.status == 200])
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.body)
			}))
			defer srv.Close()
			up := anthropicUpstream{c: anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL),
				option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(0))}
			var texts []string
			st := stream(context.Background(), up, openai.ChatCompletionRequest{Model: "claude-x", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Where is parcel 9?"}}},
				streamLimits{firstToken: 5 * time.Second, idle: 5 * time.Second}, func(int) {}, func(s string) { texts = append(texts, s) })
			h := http.Header{}
			for k, v := range c.header {
				h.Set(k, v)
			}
			obs := classify.Observation{Err: st.err, Status: c.status, Header: h, Body: []byte(c.body), Stream: st.obs, Now: time.Now()}
			if st.err == nil {
				obs.Response = &st.resp
			}
			v := classify.Classify(obs)
			require.Equal(t, c.class, v.Class, v.Reason)
			require.Equal(t, c.content, strings.Join(texts, ""))
			switch c.name {
			case "a whole stream":
				require.Equal(t, openai.FinishReasonStop, st.resp.Choices[0].FinishReason)
				require.Equal(t, openai.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}, st.resp.Usage)
			case "a tool call":
				require.Equal(t, openai.FinishReasonToolCalls, st.resp.Choices[0].FinishReason)
				require.Equal(t, []openai.ToolCall{{ID: "toolu_1", Type: "function", Function: openai.FunctionCall{Name: "track", Arguments: `{"parcel":9}`}}},
					st.resp.Choices[0].Message.ToolCalls)
			case "429 with retry-after":
				require.True(t, v.HasRetryAfter)
				require.Equal(t, 7*time.Second, v.RetryAfter)
			}
		})
	}
}

// TestAPrefillsTrimmedSpaceIsNotWrittenTwice: Anthropic refuses a
// prefill ending in whitespace, so it goes without it; the model writes
// it again, and the caller, who has it, does not get it twice.
func TestAPrefillsTrimmedSpaceIsNotWrittenTwice(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"messages"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		require.Equal(t, "Parcel 9 is", body.Messages[len(body.Messages)-1].Content[0].Text)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, anthropicStreamOf([]string{" ", " in Lyon."}, anthropicEnd))
	}))
	defer srv.Close()
	up := anthropicUpstream{c: anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL), option.WithMaxRetries(0))}
	st := stream(context.Background(), up, openai.ChatCompletionRequest{Model: "claude-x", Messages: []openai.ChatCompletionMessage{
		{Role: "user", Content: "Where is parcel 9?"}, {Role: "assistant", Content: "Parcel 9 is  "},
	}}, streamLimits{firstToken: 5 * time.Second, idle: 5 * time.Second}, func(int) {}, nil)
	require.NoError(t, st.err)
	require.Equal(t, "in Lyon.", st.resp.Choices[0].Message.Content, "the two trimmed spaces are dropped once each")
}

// TestAnthropicsRateLimitHeadersHold: anthropic-ratelimit-* headers are
// read as the x-ratelimit-* ones: a limit with nothing remaining holds
// until its reset time.
func TestAnthropicsRateLimitHeadersHold(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-remaining", "0")
	h.Set("anthropic-ratelimit-requests-reset", now.Add(1500*time.Millisecond).Format(time.RFC3339Nano))
	h.Set("anthropic-ratelimit-output-tokens-limit", "8000")
	h.Set("anthropic-ratelimit-output-tokens-remaining", "2000")
	h.Set("anthropic-ratelimit-output-tokens-reset", now.Add(time.Minute).Format(time.RFC3339))
	got := rateLimits(h, now)
	require.Equal(t, []rateLimit{
		{kind: "requests", limit: 50, remaining: 0, known: true, spent: true, reset: 1500 * time.Millisecond},
		{kind: "output-tokens", limit: 8000, remaining: 2000, known: true, reset: time.Minute},
	}, got)
}

// TestAnthropicToolsWithoutArguments: a tool with no parameters, called
// in a stream whose tool_use carries no input deltas, comes back with the
// arguments {} (as Anthropic's input was), not empty; and an empty tool
// result goes out without content, never as the empty text block
// Anthropic refuses.
func TestAnthropicToolsWithoutArguments(t *testing.T) {
	var sent []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_3","model":"claude-x","content":[],"usage":{"input_tokens":5}}}`)+
			anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"now","input":{}}}`)+
			anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`)+
			anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`)+
			anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":4}}`)+
			anthropicEvent("message_stop", `{"type":"message_stop"}`))
	}))
	defer srv.Close()
	up := anthropicUpstream{c: anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL), option.WithMaxRetries(0))}
	st := stream(context.Background(), up, openai.ChatCompletionRequest{Model: "claude-x", Messages: []openai.ChatCompletionMessage{
		{Role: "user", Content: "What time is it?"},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "toolu_8", Type: "function", Function: openai.FunctionCall{Name: "log", Arguments: `{}`}}}},
		{Role: "tool", ToolCallID: "toolu_8", Content: ""},
	}}, streamLimits{firstToken: 5 * time.Second, idle: 5 * time.Second}, func(int) {}, nil)
	require.NoError(t, st.err)
	require.NoError(t, st.obs.Err)
	require.Equal(t, []openai.ToolCall{{ID: "toolu_9", Type: "function", Function: openai.FunctionCall{Name: "now", Arguments: "{}"}}}, st.resp.Choices[0].Message.ToolCalls)
	var body struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(sent, &body))
	result := body.Messages[len(body.Messages)-1].Content[0]
	require.Equal(t, "tool_result", result["type"])
	require.NotContains(t, result, "content", "an empty result has no content: %v", result)
}

// TestAnAnthropicStreamIsBoundByItsDataOnly: the recorder bounds a
// stream's size; Anthropic's "event: …" line before each data line is not
// kept by its SDK, so a long answer is not cut for them (go-openai keeps
// such lines, and they count there).
func TestAnAnthropicStreamIsBoundByItsDataOnly(t *testing.T) {
	pieces := make([]string, 400)
	for i := range pieces {
		pieces[i] = "ab"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, anthropicStreamOf(pieces, anthropicEnd))
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &recordingTransport{base: http.DefaultTransport, maxBody: 8192}}
	up := anthropicUpstream{c: anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL), option.WithMaxRetries(0), option.WithHTTPClient(hc))}
	st := stream(context.Background(), up, openai.ChatCompletionRequest{Model: "claude-x", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}},
		streamLimits{firstToken: 5 * time.Second, idle: 5 * time.Second, maxBytes: 8192}, func(int) {}, nil)
	require.NoError(t, st.err)
	require.NoError(t, st.obs.Err, "400 events of 2 bytes each are far under 8 KiB of answer")
	require.Equal(t, strings.Repeat("ab", 400), st.resp.Choices[0].Message.Content)
}

// TestPingOnEitherWire: the doctor's ping reaches a rung on its own API,
// llmsim's chat completions and Messages API alike, and a refused one is
// an *openai.APIError with the status on both.
func TestPingOnEitherWire(t *testing.T) {
	srv, err := llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{Models: llmsim.InstantModels()}})
	require.NoError(t, err)
	defer srv.Close()
	for _, m := range []config.ModelConfig{
		{Name: llmsim.ModelQwen14B, BaseURL: srv.BaseURL},
		{Name: llmsim.ModelQwen14B, API: config.APIAnthropic, BaseURL: srv.URL},
	} {
		resp, err := Ping(context.Background(), m, "sk-test")
		require.NoError(t, err, "%s", m.Wire())
		require.Equal(t, 1, resp.Usage.CompletionTokens, "%s: one token", m.Wire())
		m.Name = "no-such-model"
		_, err = Ping(context.Background(), m, "sk-test")
		var api *openai.APIError
		require.ErrorAs(t, err, &api, "%s", m.Wire())
		require.Equal(t, http.StatusNotFound, api.HTTPStatusCode, "%s", m.Wire())
	}
}
