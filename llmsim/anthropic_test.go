package llmsim_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/durable-llm/durable-llm/llmsim"
)

// anthClient is Anthropic's official SDK on s: base URL s.URL (the SDK
// appends /v1/messages), no retries, nothing from the environment.
func anthClient(s *llmsim.Server, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.URL),
		option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(0),
	}, opts...)...)
}

func anthAsk(model, q string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: anthropic.Model(model), MaxTokens: 1024,
		System:   []anthropic.TextBlockParam{{Text: "You are a helpful assistant."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
	}
}

// anthStream reads a stream to its end: the accumulated message, the text
// received and the error that ended it (nil after message_stop).
func anthStream(t *testing.T, s interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
	Close() error
}) (anthropic.Message, string, []string, error) {
	t.Helper()
	defer s.Close()
	var msg anthropic.Message
	var text strings.Builder
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate(%s): %v", ev.Type, err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			text.WriteString(ev.Delta.Text)
		}
	}
	return msg, text.String(), types, s.Err()
}

// anthError asserts err is the SDK's API error with status and type.
func anthError(t *testing.T, err error, status int, typ string) *anthropic.Error {
	t.Helper()
	var e *anthropic.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *anthropic.Error", err, err)
	}
	if e.StatusCode != status || string(e.Type()) != typ {
		t.Fatalf("status %d type %q, want %d %q (%s)", e.StatusCode, e.Type(), status, typ, e.RawJSON())
	}
	return e
}

func textOf(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func TestAnthropicMessage(t *testing.T) {
	var mu sync.Mutex
	var recs []llmsim.Record
	srv := start(t, llmsim.Options{OnRequest: func(r llmsim.Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	}})
	cl := anthClient(srv)
	ctx := context.Background()
	q := "Explain jitter in one paragraph. [[sim tokens=60]]"
	want := llmsim.AnswerTokens("qwen-72b", q, 60)

	var resp *http.Response
	m, err := cl.Messages.New(ctx, anthAsk("qwen-72b", q), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(m); got != want || m.StopReason != anthropic.StopReasonEndTurn || m.StopSequence != "" {
		t.Errorf("text %q stop %q %q, want %q end_turn", got, m.StopReason, m.StopSequence, want)
	}
	if !strings.HasPrefix(m.ID, "msg_llmsim") || m.Role != "assistant" || string(m.Model) != "qwen-72b" {
		t.Errorf("id %q role %q model %q", m.ID, m.Role, m.Model)
	}
	if m.Usage.InputTokens <= 0 || m.Usage.OutputTokens != int64(llmsim.EstimateTokens(want)) {
		t.Errorf("usage %+v, want output %d", m.Usage, llmsim.EstimateTokens(want))
	}
	if resp.Header.Get("request-id") == "" {
		t.Error("no request-id header")
	}

	sm, text, types, err := anthStream(t, cl.Messages.NewStreaming(ctx, anthAsk("qwen-72b", q)))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text != want || textOf(&sm) != want || sm.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("streamed %q (accumulated %q) stop %q, want %q", text, textOf(&sm), sm.StopReason, want)
	}
	if sm.Usage.InputTokens != m.Usage.InputTokens || sm.Usage.OutputTokens != m.Usage.OutputTokens {
		t.Errorf("streamed usage %+v, non-streamed %+v", sm.Usage, m.Usage)
	}
	if types[0] != "message_start" || types[1] != "content_block_start" || types[len(types)-2] != "message_delta" || types[len(types)-1] != "message_stop" {
		t.Errorf("events %v", types)
	}

	// The same answer as the chat wire's.
	cc, _ := goClient(srv, 5*time.Second)
	c, err := cc.CreateChatCompletion(ctx, ask("qwen-72b", q))
	if err != nil || c.Choices[0].Message.Content != want {
		t.Errorf("chat wire: %v %+v", err, c.Choices)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 3 || recs[0].Wire != llmsim.WireAnthropic || recs[1].Wire != llmsim.WireAnthropic || !recs[1].Stream || recs[2].Wire != llmsim.WireOpenAI {
		t.Errorf("records %+v", recs)
	}
}

// TestAnthropicStreamWire checks the raw SSE: event names, the ping, the
// data's types, and tokens over time (ITL 20 ms).
func TestAnthropicStreamWire(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, ttft: 0s, itl: 20ms}]`, llmsim.Options{})
	body := `{"model":"m","max_tokens":100,"stream":true,"metadata":{"user_id":"u1"},"top_p":0.9,
		"messages":[{"role":"user","content":[{"type":"text","text":"hello [[sim tokens=15]]"}]}]}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	begin := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var names []string
	var firstDelta time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
			if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: {") {
				t.Fatalf("event %s without data: %q", name, sc.Text())
			}
			var d struct{ Type string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &d); err != nil || d.Type != name {
				t.Errorf("event %s data type %q (%v)", name, d.Type, err)
			}
			if name == "content_block_delta" && firstDelta == 0 {
				firstDelta = time.Since(begin)
			}
		} else if line != "" {
			t.Errorf("unexpected line %q", line)
		}
	}
	total := time.Since(begin)
	got := strings.Join(names, ",")
	want := "message_start,ping,content_block_start" + strings.Repeat(",content_block_delta", 15) + ",content_block_stop,message_delta,message_stop"
	if got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	if total < 14*20*time.Millisecond || firstDelta > total/2 {
		t.Errorf("first delta at %v, end at %v: tokens should arrive over ~300ms", firstDelta, total)
	}
}

func TestAnthropicToolUse(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	params := anthAsk("qwen-72b", "What is the weather in Paris?")
	params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "get_weather", Description: anthropic.String("Current weather of a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string", "enum": []string{"Paris", "Rome"}}}, Required: []string{"city"}},
	}}}
	check := func(t *testing.T, m *anthropic.Message) anthropic.ContentBlockUnion {
		t.Helper()
		if m.StopReason != anthropic.StopReasonToolUse || len(m.Content) != 1 || m.Content[0].Type != "tool_use" {
			t.Fatalf("stop %q content %+v", m.StopReason, m.Content)
		}
		c := m.Content[0]
		var in map[string]string
		if err := json.Unmarshal(c.Input, &in); err != nil || in["city"] != "Paris" || c.Name != "get_weather" || !strings.HasPrefix(c.ID, "toolu_") {
			t.Errorf("tool_use %s %s %s (%v)", c.ID, c.Name, c.Input, err)
		}
		return c
	}
	m, err := cl.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	call := check(t, m)
	sm, _, _, err := anthStream(t, cl.Messages.NewStreaming(ctx, params))
	if err != nil {
		t.Fatal(err)
	}
	if sc := check(t, &sm); sc.ID != call.ID || string(sc.Input) != string(call.Input) {
		t.Errorf("streamed call %s %s, non-streamed %s %s", sc.ID, sc.Input, call.ID, call.Input)
	}

	// The tool's result: the model answers from it.
	params.Messages = append(params.Messages, m.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "18°C and sunny", false)))
	m, err = cl.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(m); m.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(got, "get_weather says 18°C and sunny") {
		t.Errorf("answer %q stop %q", got, m.StopReason)
	}

	// bad_tool_args: cut JSON streamed; non-streamed, an object with the
	// cut JSON under INVALID_JSON.
	params = anthAsk("qwen-72b", "What is the weather in Rome? [[sim fault=bad_tool_args times=always]]")
	params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	m, err = cl.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]string
	if err := json.Unmarshal(m.Content[0].Input, &in); err != nil || in["INVALID_JSON"] == "" || json.Valid([]byte(in["INVALID_JSON"])) {
		t.Errorf("bad_tool_args input %s", m.Content[0].Input)
	}
	st := cl.Messages.NewStreaming(ctx, params)
	var partial strings.Builder
	for st.Next() {
		if ev := st.Current(); ev.Delta.Type == "input_json_delta" {
			partial.WriteString(ev.Delta.PartialJSON)
		}
	}
	if st.Err() != nil || partial.String() != in["INVALID_JSON"] {
		t.Errorf("streamed partial_json %q (%v), want %q", partial.String(), st.Err(), in["INVALID_JSON"])
	}
}

func TestAnthropicOverloaded(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, slots: 1, queue: -1, ttft: 400ms, itl: 0s}]`, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	for _, f := range []string{"queue_full", "overloaded", "server_busy"} {
		_, err := cl.Messages.New(ctx, anthAsk("m", "busy? [[sim fault="+f+"]]"))
		e := anthError(t, err, 529, "overloaded_error")
		if e.Message != "Overloaded" {
			t.Errorf("%s: message %q", f, e.Message)
		}
	}
	// The capacity model's refusal: one slot, no queue.
	done := make(chan error, 1)
	go func() {
		_, err := cl.Messages.New(ctx, anthAsk("m", "the slow one"))
		done <- err
	}()
	eventually(t, "the slot taken", func() bool { n, _ := srv.InFlight("m"); return n == 1 })
	_, err := cl.Messages.New(ctx, anthAsk("m", "no room"))
	anthError(t, err, 529, "overloaded_error")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Totals.Rejected != 1 || st.Totals.Responses["529"] != 4 || st.Faults["queue_full"] != 2 {
		t.Errorf("stats %+v faults %v", st.Totals, st.Faults)
	}
}

func TestAnthropicRateLimited(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, rate_limit: 1, burst: 1, ttft: 0s, itl: 0s}]`, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	checkHeaders := func(t *testing.T, h http.Header, remaining string) {
		t.Helper()
		reset, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-requests-reset"))
		if h.Get("anthropic-ratelimit-requests-limit") != "60" || h.Get("anthropic-ratelimit-requests-remaining") != remaining ||
			err != nil || reset.Before(time.Now().Add(-time.Second)) || h.Get("x-ratelimit-limit-requests") != "" {
			t.Errorf("headers %v", h)
		}
	}
	var resp *http.Response
	if _, err := cl.Messages.New(ctx, anthAsk("m", "first"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	checkHeaders(t, resp.Header, "0")
	_, err := cl.Messages.New(ctx, anthAsk("m", "second"))
	e := anthError(t, err, 429, "rate_limit_error")
	if e.Response.Header.Get("retry-after") == "" {
		t.Errorf("no retry-after: %v", e.Response.Header)
	}
	checkHeaders(t, e.Response.Header, "0")

	// The fault, on a model without a limiter.
	srv2 := start(t, llmsim.Options{})
	cl2 := anthClient(srv2)
	_, err = cl2.Messages.New(ctx, anthAsk("qwen-72b", "hi [[sim fault=rate_limited retry_after=2s]]"))
	e = anthError(t, err, 429, "rate_limit_error")
	if e.Response.Header.Get("retry-after") != "2" {
		t.Errorf("retry-after %q", e.Response.Header.Get("retry-after"))
	}
	checkHeaders(t, e.Response.Header, "0")
}

// TestAnthropicRateLimitPerKey: x-api-key is the key of per-key limits.
func TestAnthropicRateLimitPerKey(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, rate_limit: 1, burst: 1, rate_limit_per_key: true, ttft: 0s, itl: 0s}]`, llmsim.Options{})
	ctx := context.Background()
	a, b := anthClient(srv, option.WithAPIKey("key-a")), anthClient(srv, option.WithAPIKey("key-b"))
	if _, err := a.Messages.New(ctx, anthAsk("m", "a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Messages.New(ctx, anthAsk("m", "b1")); err != nil {
		t.Fatalf("key b limited by key a: %v", err)
	}
	_, err := a.Messages.New(ctx, anthAsk("m", "a2"))
	anthError(t, err, 429, "rate_limit_error")
}

func TestAnthropicStreamError(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	q := "Tell me a long story [[sim tokens=40 fault=stream_error after=10]]"
	_, text, _, err := anthStream(t, cl.Messages.NewStreaming(ctx, anthAsk("qwen-72b", q)))
	var e *anthropic.Error
	if !errors.As(err, &e) || !strings.Contains(e.RawJSON(), `"overloaded_error"`) || e.Type() != "overloaded_error" {
		t.Fatalf("stream error %v, want an *anthropic.Error saying overloaded_error", err)
	}
	full := llmsim.AnswerTokens("qwen-72b", q, 40)
	if text == "" || llmsim.EstimateTokens(text) != 10 || !strings.HasPrefix(full, text) {
		t.Errorf("text before the error %q", text)
	}
	gens := srv.Generations("")
	if g := gens[len(gens)-1]; g.End != llmsim.EndStreamError || g.Sent() != text || g.Wire != llmsim.WireAnthropic {
		t.Errorf("generation end %q sent %q wire %q", g.End, g.Sent(), g.Wire)
	}
	// Non-streamed: Anthropic answers an overload 529.
	_, err = cl.Messages.New(ctx, anthAsk("qwen-72b", "again [[sim fault=stream_error]]"))
	anthError(t, err, 529, "overloaded_error")
}

func TestAnthropicInvalidRequest(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	_, err := cl.Messages.New(ctx, anthAsk("qwen-72b", "hi"), option.WithJSONDel("max_tokens"))
	e := anthError(t, err, 400, "invalid_request_error")
	if !strings.Contains(e.Message, "max_tokens") {
		t.Errorf("message %q does not name max_tokens", e.Message)
	}
	_, err = cl.Messages.New(ctx, anthAsk("qwen-72b", "hi [[sim fault=context_length_exceeded]]"))
	e = anthError(t, err, 400, "invalid_request_error")
	if !strings.HasPrefix(e.Message, "prompt is too long: ") || !strings.HasSuffix(e.Message, " maximum") {
		t.Errorf("context message %q", e.Message)
	}
	_, err = cl.Messages.New(ctx, anthAsk("no-such-model", "hi"))
	anthError(t, err, 404, "not_found_error")
}

// TestAnthropicFaultEnvelopes checks each error fault's status and type,
// and that the HTML pages stay HTML.
func TestAnthropicFaultEnvelopes(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cases := []struct {
		directive, typ string
		status         int
	}{
		{"fault=invalid_api_key", "authentication_error", 401},
		{"fault=forbidden", "permission_error", 403},
		{"fault=model_not_found", "not_found_error", 404},
		{"fault=bad_request", "invalid_request_error", 400},
		{"fault=bad_request status=413", "request_too_large", 413},
		{"fault=quota_exceeded", "billing_error", 402},
		{"fault=unknown_error", "api_error", 500},
		{"fault=maintenance", "api_error", 503},
		{"fault=unavailable", "api_error", 503},
		{"fault=queue_full status=503", "overloaded_error", 529},
		{"fault=error_body", "api_error", 200},
		{"fault=bad_gateway", "", 502},
		{"fault=server_error", "", 500},
		{"fault=gateway_timeout", "", 504},
	}
	for _, c := range cases {
		body := `{"model":"qwen-72b","max_tokens":64,"messages":[{"role":"user","content":"q [[sim ` + c.directive + `]]"}]}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		decErr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		switch {
		case resp.StatusCode != c.status:
			t.Errorf("%s: status %d, want %d", c.directive, resp.StatusCode, c.status)
		case c.typ == "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"):
			t.Errorf("%s: Content-Type %q, want HTML", c.directive, resp.Header.Get("Content-Type"))
		case c.typ != "" && (decErr != nil || e.Type != "error" || e.Error.Type != c.typ || e.Error.Message == ""):
			t.Errorf("%s: body %+v (%v), want type %s", c.directive, e, decErr, c.typ)
		}
	}
}

// TestAnthropicAnswerFaults: the faults that shape a 200 answer.
func TestAnthropicAnswerFaults(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	ask := func(directive string) *anthropic.Message {
		t.Helper()
		m, err := cl.Messages.New(ctx, anthAsk("qwen-72b", "answer me [[sim tokens=20 "+directive+"]]"))
		if err != nil {
			t.Fatalf("%s: %v", directive, err)
		}
		return m
	}
	if m := ask("fault=length"); m.StopReason != anthropic.StopReasonMaxTokens || textOf(m) == "" {
		t.Errorf("length: %q %q", m.StopReason, textOf(m))
	}
	if m := ask("fault=content_filter"); m.StopReason != anthropic.StopReasonRefusal || len(m.Content) != 0 {
		t.Errorf("content_filter: %q %+v", m.StopReason, m.Content)
	}
	if m := ask("fault=no_choices"); len(m.Content) != 0 || m.StopReason != "" {
		t.Errorf("no_choices: %q %+v", m.StopReason, m.Content)
	}
	if m := ask("fault=empty_content"); len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != "" || m.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("empty_content: %q %+v", m.StopReason, m.Content)
	}
	if m := ask("fault=reasoning_only"); len(m.Content) != 1 || m.Content[0].Type != "thinking" || m.Content[0].Thinking == "" {
		t.Errorf("reasoning_only: %+v", m.Content)
	}
	_, err := cl.Messages.New(ctx, anthAsk("qwen-72b", "cut [[sim fault=malformed_json]]"))
	if err == nil {
		t.Error("malformed_json: no error")
	}
}

// TestAnthropicPrefillAndStop: a last assistant message is continued, and
// stop_sequences end the answer.
func TestAnthropicPrefillAndStop(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	q := "Why retry with jitter?"
	full := llmsim.Answer("qwen-72b", q)
	prefix := full[:20]
	p := anthAsk("qwen-72b", q)
	p.Messages = append(p.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock(prefix)))
	m, err := cl.Messages.New(ctx, p)
	if err != nil || prefix+textOf(m) != full {
		t.Errorf("prefill: %q + %q, want %q (%v)", prefix, textOf(m), full, err)
	}
	p = anthAsk("qwen-72b", q)
	p.StopSequences = []string{"Re:"}
	m, err = cl.Messages.New(ctx, p)
	if err != nil || textOf(m) != "[qwen-72b] " || m.StopReason != anthropic.StopReasonStopSequence || m.StopSequence != "Re:" {
		t.Errorf("stop sequence: %q %q %q (%v)", textOf(m), m.StopReason, m.StopSequence, err)
	}
}

// TestAnthropicStats: both wires count alike, in one conversation when
// they share an Idempotency-Key.
func TestAnthropicStats(t *testing.T) {
	srv := start(t, llmsim.Options{})
	ctx := context.Background()
	key := "wf-anthropic-stats/1"
	cl := anthClient(srv)
	_, err := cl.Messages.New(ctx, anthAsk("qwen-14b", "hi [[sim fault=overloaded]]"), option.WithHeader("Idempotency-Key", key))
	anthError(t, err, 529, "overloaded_error")
	if _, err := cl.Messages.New(ctx, anthAsk("qwen-14b", "hi"), option.WithHeader("Idempotency-Key", "wf-anthropic-stats/2")); err != nil {
		t.Fatal(err)
	}
	cc, _ := goClient(srv, 5*time.Second, "Idempotency-Key", "wf-anthropic-stats/3")
	if _, err := cc.CreateChatCompletion(ctx, ask("qwen-14b", "hi")); err != nil {
		t.Fatal(err)
	}
	st := srv.Stats()
	cv := st.Conversations["wf-anthropic-stats"]
	if st.Totals.Arrivals != 3 || st.Totals.Responses["200"] != 2 || st.Totals.Responses["529"] != 1 || st.Faults["overloaded"] != 1 || cv.Attempts != 3 {
		t.Fatalf("totals %+v faults %v conversation %+v", st.Totals, st.Faults, cv)
	}
	if w := []llmsim.Wire{cv.Requests[0].Wire, cv.Requests[1].Wire, cv.Requests[2].Wire}; w[0] != llmsim.WireAnthropic || w[1] != llmsim.WireAnthropic || w[2] != llmsim.WireOpenAI {
		t.Errorf("wires %v", w)
	}
}

// TestAnthropicThinking: a reasoning model's reasoning is a thinking
// block, streamed as thinking_delta and signature_delta.
func TestAnthropicThinking(t *testing.T) {
	srv := startScenario(t, `models: [{name: r1, reasoning: true, reasoning_tokens: 12, ttft: 0s, itl: 0s}]`, llmsim.Options{})
	cl := anthClient(srv)
	ctx := context.Background()
	q := "Think about backoff."
	m, err := cl.Messages.New(ctx, anthAsk("r1", q))
	if err != nil {
		t.Fatal(err)
	}
	want := llmsim.ReasoningTokens(q, 12)
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != want || m.Content[0].Signature == "" ||
		textOf(m) != llmsim.Answer("r1", q) {
		t.Fatalf("content %+v", m.Content)
	}
	sm, _, _, err := anthStream(t, cl.Messages.NewStreaming(ctx, anthAsk("r1", q)))
	if err != nil || len(sm.Content) != 2 || sm.Content[0].Thinking != want || sm.Content[0].Signature != m.Content[0].Signature || textOf(&sm) != textOf(m) {
		t.Errorf("streamed %+v (%v)", sm.Content, err)
	}
	if sm.Usage.OutputTokens != m.Usage.OutputTokens {
		t.Errorf("usage %d, want %d", sm.Usage.OutputTokens, m.Usage.OutputTokens)
	}
}
