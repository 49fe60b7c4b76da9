package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// sse is a scripted streamed reply: before the headers, then each event
// after its delay; cut ends the body without [DONE] (a panic aborts the
// connection, as a dying upstream does).
type sse struct {
	headerDelay time.Duration
	events      []sseEvent
	done        bool
	abort       bool
}

type sseEvent struct {
	after time.Duration
	data  string
}

func delta(text string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":%q}}]}`, text)
}

func finish(reason string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, reason)
}

const usageChunk = `{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`

func (s sse) serve(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(s.headerDelay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for _, e := range s.events {
		select {
		case <-time.After(e.after):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "data: %s\n\n", e.data)
		w.(http.Flusher).Flush()
	}
	if s.abort {
		panic(http.ErrAbortHandler)
	}
	if s.done {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// TestStreamClassified runs scripted streams through go-openai, the
// stream reader with its watchdog, and the classifier.
func TestStreamClassified(t *testing.T) {
	timeouts := streamLimits{firstToken: 300 * time.Millisecond, idle: 300 * time.Millisecond}
	cases := []struct {
		name    string
		reply   sse
		class   failure.Class
		content string
		tokens  int
	}{
		{"answer with usage", sse{events: []sseEvent{{0, delta("Hel")}, {0, delta("lo")}, {0, delta("!")}, {0, finish("stop")}, {0, usageChunk}}, done: true},
			failure.None, "Hello!", 3},
		{"slow generation is not a failure while tokens flow", sse{events: []sseEvent{
			{100 * time.Millisecond, delta("a")}, {200 * time.Millisecond, delta("b")}, {200 * time.Millisecond, delta("c")},
			{200 * time.Millisecond, delta("d")}, {0, finish("stop")}}, done: true},
			failure.None, "abcd", 4},
		{"no first token: headers but silence", sse{events: []sseEvent{{2 * time.Second, delta("late")}}, done: true},
			failure.ReadTimeout, "", 0},
		{"no first token: no headers either", sse{headerDelay: 2 * time.Second},
			failure.ReadTimeout, "", 0},
		{"stall after text", sse{events: []sseEvent{{0, delta("par")}, {0, delta("tial")}, {2 * time.Second, delta("x")}}, done: true},
			failure.StreamBroken, "partial", 2},
		{"connection cut after text", sse{events: []sseEvent{{0, delta("cut ")}, {0, delta("here")}}, abort: true},
			failure.StreamBroken, "cut here", 2},
		{"error object inside the stream", sse{events: []sseEvent{{0, delta("some")}, {0, `{"error":{"message":"engine died","type":"server_error","code":"internal"}}`}}},
			failure.StreamBroken, "some", 1},
		{"ends without finish_reason or [DONE]", sse{events: []sseEvent{{0, delta("no end")}}},
			failure.StreamBroken, "no end", 1},
		{"malformed chunk", sse{events: []sseEvent{{0, delta("ok ")}, {0, `{"choices":[{"delta":`}}, done: true},
			failure.StreamBroken, "ok ", 1},
		{"truncated answer", sse{events: []sseEvent{{0, delta("long")}, {0, finish("length")}}, done: true},
			failure.OutputTruncated, "long", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(c.reply.serve))
			defer srv.Close()
			oc := openai.DefaultConfig("")
			oc.BaseURL = srv.URL + "/v1"
			client := openai.NewClientWithConfig(oc)
			var progressed int
			var texts []string
			start := time.Now()
			st := stream(context.Background(), openaiUpstream{client}, openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}},
				timeouts, func(n int) { progressed = n }, func(text string) { texts = append(texts, text) })
			took := time.Since(start)
			obs := classify.Observation{Err: st.err, Status: 200, Stream: st.obs}
			if st.err == nil {
				obs.Response = &st.resp
			}
			v := classify.Classify(obs)
			if v.Class != c.class {
				t.Fatalf("class %q (%s), want %q", v.Class, v.Reason, c.class)
			}
			if got := content(st.resp); got != c.content || strings.Join(texts, "") != c.content {
				t.Errorf("content %q, streamed %q, want %q", got, texts, c.content)
			}
			if st.obs.Tokens != c.tokens || (c.tokens > 0 && progressed == 0) {
				t.Errorf("tokens %d (progress %d), want %d", st.obs.Tokens, progressed, c.tokens)
			}
			if took > time.Second {
				t.Errorf("took %v: a timeout did not end the wait", took)
			}
			if c.class == failure.StreamBroken && !strings.Contains(v.Reason, "chunk") {
				t.Errorf("reason %q does not say how far the stream got", v.Reason)
			}
		})
	}
}

// TestStreamDueByItsDeadline: a request whose first token is due by its
// deadline (byDeadline), with no headers and no first token before it, is
// judged read_timeout however the first-token watch and the context's
// deadline fall on the machine's timers: the watch ends at the deadline
// itself, not at a moment computed a little later.
func TestStreamDueByItsDeadline(t *testing.T) {
	for _, reply := range []sse{{headerDelay: 2 * time.Second}, {events: []sseEvent{{2 * time.Second, delta("late")}}, done: true}} {
		srv := httptest.NewServer(http.HandlerFunc(reply.serve))
		oc := openai.DefaultConfig("")
		oc.BaseURL = srv.URL + "/v1"
		client := openai.NewClientWithConfig(oc)
		for range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			st := stream(ctx, openaiUpstream{client}, openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}},
				streamLimits{firstToken: 5 * time.Second, idle: 5 * time.Second, byDeadline: true}, func(int) {}, nil)
			cancel()
			v := classify.Classify(classify.Observation{Err: st.err, Status: 200, Stream: st.obs})
			if v.Class != failure.ReadTimeout {
				t.Fatalf("headers after %v: class %q (%s), want %q", reply.headerDelay, v.Class, v.Reason, failure.ReadTimeout)
			}
			if strings.Contains(v.Reason, "5s") {
				t.Fatalf("reason %q names the 5 s first-token timeout, not the deadline's 30 ms it was given", v.Reason)
			}
		}
		srv.Close()
	}
}

func content(r openai.ChatCompletionResponse) string {
	if len(r.Choices) == 0 {
		return ""
	}
	return r.Choices[0].Message.Content
}

func toolDelta(index int, id, name, args string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}}]}`, index, id, name, args)
}

// TestStreamToolCalls: streamed tool calls are put together by index
// (the id and name first, the arguments in pieces) into a successful
// answer; an index no server sends breaks the stream instead of growing
// the calls without bound.
func TestStreamToolCalls(t *testing.T) {
	timeouts := streamLimits{firstToken: time.Second, idle: time.Second}
	run := func(events ...string) (streamed, classify.Verdict) {
		t.Helper()
		s := sse{done: true}
		for _, e := range events {
			s.events = append(s.events, sseEvent{0, e})
		}
		srv := httptest.NewServer(http.HandlerFunc(s.serve))
		defer srv.Close()
		oc := openai.DefaultConfig("")
		oc.BaseURL = srv.URL + "/v1"
		st := stream(context.Background(), openaiUpstream{openai.NewClientWithConfig(oc)}, openai.ChatCompletionRequest{Model: "m",
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}, timeouts, func(int) {}, nil)
		obs := classify.Observation{Err: st.err, Status: 200, Stream: st.obs}
		if st.err == nil {
			obs.Response = &st.resp
		}
		return st, classify.Classify(obs)
	}
	st, v := run(toolDelta(0, "call_a", "lookup_order", ""), toolDelta(0, "", "", `{"order_`), toolDelta(0, "", "", `id":"42"}`),
		toolDelta(1, "call_b", "cancel_order", `{}`), finish("tool_calls"))
	calls := toolCalls(st.resp.Choices[0].Message.ToolCalls, "wf/1")
	if v.Class != failure.None || len(calls) != 2 || calls[0].ID != "call_a" || calls[0].Function.Arguments != `{"order_id":"42"}` ||
		calls[1].Function.Name != "cancel_order" || st.resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("class %q (%s), calls %+v", v.Class, v.Reason, calls)
	}
	for _, bad := range []int{-1, 1000000} {
		_, v := run(toolDelta(0, "call_a", "f", "{}"), toolDelta(bad, "call_x", "f", "{}"), finish("tool_calls"))
		if v.Class != failure.StreamBroken || !strings.Contains(v.Reason, "tool call index") {
			t.Errorf("index %d: class %q (%s), want stream_broken naming the index", bad, v.Class, v.Reason)
		}
	}
	// A server that sends no ids: the calls get ids the agent can answer,
	// the same for a resend of the attempt.
	a := toolCalls([]openai.ToolCall{{Function: openai.FunctionCall{Name: "f"}}, {Function: openai.FunctionCall{Name: "g"}}}, "wf/2")
	b := toolCalls([]openai.ToolCall{{Function: openai.FunctionCall{Name: "f"}}}, "wf/2")
	if a[0].ID == "" || a[0].ID == a[1].ID || a[0].ID != b[0].ID || a[0].Type != "function" {
		t.Errorf("made-up ids %q %q %q", a[0].ID, a[1].ID, b[0].ID)
	}
}
