package llmsim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/llmsim"
)

// genScenario has models that generate on a real schedule, fast enough
// for tests: 5 ms to the first token, then 2000 tokens per second.
const genScenario = `
models:
  - {name: m, ttft: 5ms, tokens_per_second: 2000}
  - {name: none, ttft: 5ms, tokens_per_second: 2000, continuation: none}
  - {name: strict, ttft: 5ms, tokens_per_second: 2000, continuation: reject}
  - {name: r1, ttft: 5ms, tokens_per_second: 2000, reasoning: true, reasoning_tokens: 12}
  - {name: cutter, ttft: 5ms, tokens_per_second: 2000}
phases:
  - faults:
      - {kind: cut_stream, model: cutter, after: 7}
`

// records collects Options.OnRequest records.
type records struct {
	mu  sync.Mutex
	all []llmsim.Record
}

func (r *records) add(rec llmsim.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec)
}

// wait returns the record of the request with the Idempotency-Key key.
func (r *records) wait(t *testing.T, key string) llmsim.Record {
	t.Helper()
	var out llmsim.Record
	eventually(t, "the record of "+key, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rec := range r.all {
			if rec.IdempotencyKey == key {
				out = rec
				return true
			}
		}
		return false
	})
	return out
}

// generation waits for the one generation of conversation conv.
func generation(t *testing.T, srv *llmsim.Server, conv string, n int) llmsim.Generation {
	t.Helper()
	var g llmsim.Generation
	eventually(t, "generation "+fmt.Sprint(n)+" of "+conv, func() bool {
		gs := srv.Generations(conv)
		if len(gs) < n {
			return false
		}
		g = gs[n-1]
		return true
	})
	return g
}

// openStream starts a streamed request on cl; the stream is closed when
// the test ends.
func openStream(t *testing.T, ctx context.Context, cl *openai.Client, req openai.ChatCompletionRequest) *openai.ChatCompletionStream {
	t.Helper()
	s, err := cl.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// eachChunk hands every chunk of s to fn until the stream ends properly
// ([DONE]); any other error fails the test.
func eachChunk(t *testing.T, s *openai.ChatCompletionStream, fn func(openai.ChatCompletionStreamResponse)) {
	t.Helper()
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(r)
	}
}

func TestAnswerTokens(t *testing.T) {
	for _, q := range []string{"Where is my parcel?", "我的包裹在哪里？请告诉我。", ""} {
		longest := llmsim.AnswerTokens("qwen-72b", q, 5000)
		short := llmsim.Answer("qwen-72b", q)
		if llmsim.AnswerTokens("qwen-72b", q, 0) != short || !strings.HasPrefix(longest, short) {
			t.Errorf("%q: the short answer is not the start of the long one", q)
		}
		for _, n := range []int{1, 5, llmsim.EstimateTokens(short) - 1, llmsim.EstimateTokens(short), llmsim.EstimateTokens(short) + 1, 100, 800, 5000} {
			a := llmsim.AnswerTokens("qwen-72b", q, n)
			if got := llmsim.EstimateTokens(a); got != n {
				t.Errorf("%q: AnswerTokens(%d) has %d tokens", q, n, got)
			}
			if !strings.HasPrefix(longest, a) {
				t.Errorf("%q: AnswerTokens(%d) is not a prefix of AnswerTokens(5000)", q, n)
			}
			if a != llmsim.AnswerTokens("qwen-72b", q+" [[sim tokens=3]]", n) {
				t.Errorf("%q: directives change the text", q)
			}
		}
	}
	if llmsim.AnswerTokens("m", "one", 300)[len("[m]"):] == llmsim.AnswerTokens("m", "two", 300)[len("[m]"):] {
		t.Error("two questions, one text")
	}
	if r := llmsim.ReasoningTokens("q", 40); llmsim.EstimateTokens(r) != 40 || !strings.HasPrefix(r, "Let me think") {
		t.Errorf("reasoning %q", r)
	}
}

// TestAnswerLength checks the length rules through go-openai, non-streamed
// and streamed: the tokens directive, max_tokens, max_completion_tokens.
func TestAnswerLength(t *testing.T) {
	srv := startScenario(t, genScenario, llmsim.Options{})
	cl, _ := goClient(srv, 10*time.Second)
	const q = "Tell me about retries."
	short := llmsim.Answer("m", q)
	ns := llmsim.EstimateTokens(short)
	cases := []struct {
		name           string
		directive      string
		maxTokens      int
		maxCompletion  int
		content        string
		finish         openai.FinishReason
		completionToks int
	}{
		{"short answer without a length", "", 0, 0, short, openai.FinishReasonStop, ns},
		{"tokens directive", "[[sim tokens=300]]", 0, 0, llmsim.AnswerTokens("m", q, 300), openai.FinishReasonStop, 300},
		{"max_tokens never lengthens the answer", "", 250, 0, short, openai.FinishReasonStop, ns},
		{"max_completion_tokens neither", "", 0, 120, short, openai.FinishReasonStop, ns},
		{"max_tokens below the short answer cuts", "", 4, 0, llmsim.AnswerTokens("m", q, 4), openai.FinishReasonLength, 4},
		{"max_tokens below the directive cuts", "[[sim tokens=300]]", 100, 0, llmsim.AnswerTokens("m", q, 100), openai.FinishReasonLength, 100},
		{"the server's own limit cuts a request that sets none", "[[sim tokens=600]]", 0, 0, llmsim.AnswerTokens("m", q, llmsim.DefaultServerMaxTokens), openai.FinishReasonLength, llmsim.DefaultServerMaxTokens},
		{"a request's own limit lifts the server's", "[[sim tokens=600]]", 1000, 0, llmsim.AnswerTokens("m", q, 600), openai.FinishReasonStop, 600},
	}
	for _, c := range cases {
		req := ask("m", q+" "+c.directive)
		req.MaxTokens, req.MaxCompletionTokens = c.maxTokens, c.maxCompletion
		t.Run(c.name+"/complete", func(t *testing.T) {
			resp, err := cl.CreateChatCompletion(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			ch := resp.Choices[0]
			if ch.Message.Content != c.content || ch.FinishReason != c.finish || resp.Usage.CompletionTokens != c.completionToks {
				t.Errorf("finish %q completion_tokens %d content %q\nwant finish %q completion_tokens %d content %q",
					ch.FinishReason, resp.Usage.CompletionTokens, ch.Message.Content, c.finish, c.completionToks, c.content)
			}
		})
		t.Run(c.name+"/stream", func(t *testing.T) {
			req := req
			req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
			s := openStream(t, context.Background(), cl, req)
			var content, finish string
			var u *openai.Usage
			chunks := 0
			eachChunk(t, s, func(r openai.ChatCompletionStreamResponse) {
				if r.Usage != nil {
					u = r.Usage
					if len(r.Choices) != 0 {
						t.Errorf("usage chunk with %d choices, want none", len(r.Choices))
					}
				}
				for _, ch := range r.Choices {
					if ch.Delta.Content != "" {
						chunks++
					}
					content += ch.Delta.Content
					if ch.FinishReason != "" {
						finish = string(ch.FinishReason)
					}
				}
			})
			if content != c.content || finish != string(c.finish) || u == nil || u.CompletionTokens != c.completionToks {
				t.Errorf("finish %q usage %+v content %q", finish, u, content)
			}
			if chunks != c.completionToks {
				t.Errorf("%d content chunks, want one per token (%d)", chunks, c.completionToks)
			}
		})
	}
}

// TestGenerationSchedule checks TTFT + tokens × ITL on a profile fast
// enough to wait for: non-streamed answers arrive whole at the end,
// streamed ones start at the first token.
func TestGenerationSchedule(t *testing.T) {
	var recs records
	srv := startScenario(t, `
models:
  - {name: slow, ttft: 50ms, tokens_per_second: 1000}
`, llmsim.Options{OnRequest: recs.add})

	t.Run("complete", func(t *testing.T) {
		cl, _ := goClient(srv, 10*time.Second, "Idempotency-Key", "sched-complete/1")
		begin := time.Now()
		resp, err := cl.CreateChatCompletion(context.Background(), ask("slow", "three hundred [[sim tokens=300]]"))
		took := time.Since(begin)
		if err != nil || resp.Usage.CompletionTokens != 300 {
			t.Fatalf("%v %+v", err, resp.Usage)
		}
		r := recs.wait(t, "sched-complete/1")
		if r.FirstToken != 50*time.Millisecond || r.PerToken != time.Millisecond || r.CompletionTokens != 300 ||
			r.Service != 350*time.Millisecond {
			t.Errorf("schedule: first token %v, per token %v, %d tokens, service %v; want 50ms + 300 × 1ms = 350ms",
				r.FirstToken, r.PerToken, r.CompletionTokens, r.Service)
		}
		if took < 350*time.Millisecond {
			t.Errorf("the answer came after %v, before the end of its generation (350ms)", took)
		}
	})
	t.Run("stream", func(t *testing.T) {
		cl, _ := goClient(srv, 10*time.Second, "Idempotency-Key", "sched-stream/1")
		begin := time.Now()
		s := openStream(t, context.Background(), cl, ask("slow", "five hundred [[sim tokens=500]]"))
		var first time.Duration
		var content string
		eachChunk(t, s, func(r openai.ChatCompletionStreamResponse) {
			for _, ch := range r.Choices {
				if ch.Delta.Content != "" && first == 0 {
					first = time.Since(begin)
				}
				content += ch.Delta.Content
			}
		})
		took := time.Since(begin)
		r := recs.wait(t, "sched-stream/1")
		if r.Service != 550*time.Millisecond || content != llmsim.AnswerTokens("slow", "five hundred", 500) {
			t.Errorf("service %v, content of %d tokens", r.Service, llmsim.EstimateTokens(content))
		}
		// Generous bounds: the first token is due at 50 ms, the last at 549 ms.
		if first > 400*time.Millisecond || took < 550*time.Millisecond {
			t.Errorf("first token after %v (due at 50ms), stream ended after %v (due at 550ms)", first, took)
		}
	})
}

// TestDefaultGenerationTime checks the default profile on a 500-token
// answer without waiting for it: the recorded schedule says over 12 s,
// and a stream delivers its first token long before.
func TestDefaultGenerationTime(t *testing.T) {
	var recs records
	srv := startRealistic(t, llmsim.Options{OnRequest: recs.add})
	const q = "Write me a long essay on retries. [[sim tokens=500]]"
	check := func(t *testing.T, r llmsim.Record) {
		t.Helper()
		if r.PerToken != 25*time.Millisecond || r.FirstToken <= 0 || r.FirstToken > time.Second || r.CompletionTokens != 500 ||
			r.Service != r.FirstToken+500*r.PerToken || r.Service <= 12*time.Second {
			t.Errorf("schedule: first token %v, per token %v, %d tokens, service %v; want about 300ms + 500 × 25ms > 12s",
				r.FirstToken, r.PerToken, r.CompletionTokens, r.Service)
		}
	}
	t.Run("complete", func(t *testing.T) {
		cl, cap := goClient(srv, 10*time.Second, "Idempotency-Key", "default-complete/1")
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := cl.CreateChatCompletion(ctx, ask(llmsim.ModelQwen72B, q))
		if st, _ := cap.last(); err == nil || st != 0 {
			t.Errorf("err %v, status %d: want no headers before the generation ends", err, st)
		}
		r := recs.wait(t, "default-complete/1")
		check(t, r)
		if r.Outcome != llmsim.OutcomeClientGone {
			t.Errorf("outcome %q", r.Outcome)
		}
	})
	t.Run("stream", func(t *testing.T) {
		cl, _ := goClient(srv, 10*time.Second, "Idempotency-Key", "default-stream/1")
		begin := time.Now()
		s := openStream(t, context.Background(), cl, ask(llmsim.ModelQwen72B, q))
		var got string
		for got == "" {
			r, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Choices) > 0 {
				got = r.Choices[0].Delta.Content
			}
		}
		if took := time.Since(begin); took > 5*time.Second || got != llmsim.AnswerTokens(llmsim.ModelQwen72B, q, 1) {
			t.Errorf("first content chunk %q after %v, want the first token after the TTFT", got, took)
		}
		s.Close()
		g := generation(t, srv, "default-stream", 1)
		if g.End != llmsim.EndClientGone || g.SentTokens < 1 || g.SentTokens > 400 || g.ITL.D() != 25*time.Millisecond {
			t.Errorf("generation %+v", g)
		}
		check(t, recs.wait(t, "default-stream/1"))
	})
}

// TestStreamFaults streams each stream fault to go-openai and compares
// what the client received with what llmsim says it generated and sent.
func TestStreamFaults(t *testing.T) {
	srv := startScenario(t, genScenario, llmsim.Options{MaxHang: 20 * time.Second})
	const q = "Stream me forty tokens."
	full := llmsim.AnswerTokens("m", q, 40)
	cases := []struct {
		name      string
		model     string
		directive string
		timeout   time.Duration // of the client's context
		sent      int           // content tokens received
		end       string
		check     func(t *testing.T, err error, took time.Duration)
	}{
		{"cut_stream", "m", "fault=cut_stream after=10", 0, 10, llmsim.EndCutStream, func(t *testing.T, err error, _ time.Duration) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("err %v, want unexpected EOF", err)
			}
		}},
		{"cut_stream after half by default", "m", "fault=cut_stream", 0, 20, llmsim.EndCutStream, nil},
		{"cut_stream before any content", "m", "fault=cut_stream after=0", 0, 0, llmsim.EndCutStream, nil},
		{"cut_stream after everything", "m", "fault=cut_stream after=99", 0, 40, llmsim.EndCutStream, nil},
		{"cut_stream from a scenario rule", "cutter", "", 0, 7, llmsim.EndCutStream, nil},
		{"stream_error", "m", "fault=stream_error after=10", 0, 10, llmsim.EndStreamError, func(t *testing.T, err error, _ time.Duration) {
			var e *openai.APIError
			if !errors.As(err, &e) || e.Code != "internal_error" {
				t.Errorf("err %T %v, want the error object of the stream", err, err)
			}
		}},
		{"stall cut after its duration", "m", "fault=stall after=10 duration=200ms", 0, 10, llmsim.EndStall, func(t *testing.T, err error, took time.Duration) {
			if !errors.Is(err, io.ErrUnexpectedEOF) || took < 200*time.Millisecond {
				t.Errorf("err %v after %v, want unexpected EOF after 200ms of silence", err, took)
			}
		}},
		{"stall until the client gives up", "m", "fault=stall after=10", 400 * time.Millisecond, 10, llmsim.EndStall, func(t *testing.T, err error, _ time.Duration) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err %v, want the client's deadline", err)
			}
		}},
		{"legacy stream_break counts chunks", "m", "fault=stream_break chunks=3", 0, 2, llmsim.EndStreamBreak, nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			key := fmt.Sprintf("sf-%d", i)
			cl, _ := goClient(srv, 10*time.Second, "Idempotency-Key", key+"/1")
			ctx := context.Background()
			if c.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.timeout)
				defer cancel()
			}
			req := ask(c.model, q+" [[sim tokens=40]]")
			if c.directive != "" {
				req = ask(c.model, q+" [[sim tokens=40 "+c.directive+"]]")
			}
			req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
			begin := time.Now()
			s := openStream(t, ctx, cl, req)
			content, _, finish, _, err := recvAll(s)
			took := time.Since(begin)
			want := llmsim.AnswerTokens(c.model, q, 40)
			wantSent := ""
			if c.sent > 0 {
				wantSent = llmsim.AnswerTokens(c.model, q, c.sent) // the first c.sent tokens of want
			}
			if content != wantSent || finish != "" {
				t.Errorf("received %q (finish %q), want the first %d tokens of %q and no finish_reason", content, finish, c.sent, want)
			}
			if errors.Is(err, io.EOF) {
				t.Errorf("the stream ended properly ([DONE])")
			}
			if c.check != nil {
				c.check(t, err, took)
			}
			g := generation(t, srv, key, 1)
			if g.Text != want || g.Sent() != content || g.SentTokens != c.sent || g.End != c.end || g.CompletionTokens != 40 || g.FinishReason != "stop" {
				t.Errorf("generation %+v\nwant text %q, sent %q (%d tokens), end %s", g, want, content, c.sent, c.end)
			}
		})
	}
	if full != llmsim.AnswerTokens("m", q, 40) {
		t.Error("not deterministic")
	}
}

// chat posts a raw chat-completions body and returns the status, the
// content (and reasoning) received, finish_reason, usage and the body.
type chatResult struct {
	status             int
	content, reasoning string
	finish             string
	usage              struct{ PromptTokens, CompletionTokens int }
	body               string
	done               bool
}

func chat(t *testing.T, srv *llmsim.Server, key string, body map[string]any) chatResult {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", srv.BaseURL+"/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r chatResult
	r.status = resp.StatusCode
	type msg struct {
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
	}
	type chunk struct {
		Choices []struct {
			Message      msg    `json:"message"`
			Delta        msg    `json:"delta"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	add := func(c chunk) {
		for _, ch := range c.Choices {
			r.content += ch.Message.Content + ch.Delta.Content
			r.reasoning += ch.Message.ReasoningContent + ch.Delta.ReasoningContent
			if ch.FinishReason != "" {
				r.finish = ch.FinishReason
			}
		}
		if c.Usage != nil {
			r.usage.PromptTokens, r.usage.CompletionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				r.done = true
				continue
			}
			var c chunk
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("chunk %q: %v", data, err)
			}
			add(c)
		}
		return r
	}
	all, _ := io.ReadAll(resp.Body)
	r.body = string(all)
	var c chunk
	if r.status == 200 {
		if err := json.Unmarshal(all, &c); err != nil {
			t.Fatalf("body %q: %v", all, err)
		}
		add(c)
	}
	return r
}

// TestContinuation cuts a streamed answer (go-openai), then asks the model
// to continue it: partial + continuation must be exactly the full answer.
func TestContinuation(t *testing.T) {
	srv := startScenario(t, genScenario, llmsim.Options{})
	const q = "Explain continuation in detail."
	// The question of the first request cuts its stream after 25 of its 60
	// tokens; the continuation repeats it (the directive's fault is used
	// up: times=1).
	withTokens := map[string]any{"role": "user", "content": q + " [[sim tokens=60 fault=cut_stream after=25]]"}
	// cut streams the question and returns the part the client received
	// before the cut.
	cut := func(t *testing.T, model, key string, user map[string]any, maxTokens int) string {
		t.Helper()
		cl, _ := goClient(srv, 10*time.Second, "Idempotency-Key", key+"/1")
		req := ask(model, user["content"].(string))
		req.MaxTokens = maxTokens
		s := openStream(t, context.Background(), cl, req)
		content, _, _, _, err := recvAll(s)
		if !errors.Is(err, io.ErrUnexpectedEOF) || llmsim.EstimateTokens(content) != 25 {
			t.Fatalf("cut: %v after %q", err, content)
		}
		return content
	}
	vllm := func(user map[string]any, partial string) map[string]any {
		return map[string]any{"messages": []any{user, map[string]any{"role": "assistant", "content": partial}},
			"continue_final_message": true, "add_generation_prompt": false}
	}
	deepseek := func(user map[string]any, partial string) map[string]any {
		return map[string]any{"messages": []any{user, map[string]any{"role": "assistant", "content": partial, "prefix": true}}}
	}
	rest := func(full, partial string) string { return full[len(partial):] }
	cases := []struct {
		name   string
		model  string
		body   func(user map[string]any, partial string) map[string]any
		stream bool
		// want is the continuation; status and errHas a refusal.
		want   func(full, partial string) string
		status int
		errHas string
	}{
		{name: "vllm continue_final_message", model: "m", body: vllm, want: rest},
		{name: "vllm streamed", model: "m", body: vllm, stream: true, want: rest},
		{name: "deepseek prefix", model: "m", body: deepseek, want: rest},
		{name: "deepseek prefix streamed", model: "m", body: deepseek, stream: true, want: rest},
		{name: "max_tokens: the rest of the budget", model: "m", body: func(user map[string]any, p string) map[string]any {
			b := vllm(user, p)
			b["max_tokens"] = 60 - 25
			return b
		}, want: rest},
		{name: "reasoning model does not reason again", model: "r1", body: vllm, stream: true, want: rest},
		{name: "continuation none answers from scratch", model: "none", body: vllm,
			want: func(full, partial string) string { return full }},
		{name: "continuation reject refuses", model: "strict", body: vllm,
			status: 400, errHas: "Unrecognized request argument supplied: continue_final_message"},
		{name: "add_generation_prompt must be false", model: "m", body: func(user map[string]any, p string) map[string]any {
			b := vllm(user, p)
			delete(b, "add_generation_prompt")
			return b
		}, status: 400, errHas: "Cannot set both `continue_final_message` and `add_generation_prompt` to True"},
		{name: "the last message must be the assistant's", model: "m", body: func(user map[string]any, p string) map[string]any {
			return map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": p}, user},
				"continue_final_message": true, "add_generation_prompt": false}
		}, status: 400, errHas: "the last message must be an assistant message"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			key := fmt.Sprintf("cont-%d", i)
			user := withTokens
			partial := cut(t, c.model, key, user, 0)
			full := llmsim.AnswerTokens(c.model, q, 60)
			body := c.body(user, partial)
			body["model"], body["stream"] = c.model, c.stream
			if c.stream {
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			r := chat(t, srv, key+"/2", body)
			if c.status != 0 {
				if r.status != c.status || !strings.Contains(r.body, c.errHas) {
					t.Errorf("status %d body %s, want %d with %q", r.status, r.body, c.status, c.errHas)
				}
				return
			}
			want := c.want(full, partial)
			if r.status != 200 || r.content != want || r.finish != "stop" || r.reasoning != "" ||
				r.usage.CompletionTokens != llmsim.EstimateTokens(want) || (c.stream && !r.done) {
				t.Fatalf("status %d finish %q usage %+v reasoning %q done %v content %q\nwant %q",
					r.status, r.finish, r.usage, r.reasoning, r.done, r.content, want)
			}
			if c.model != "none" && partial+r.content != full {
				t.Errorf("partial + continuation != the full answer:\n%q\n%q", partial+r.content, full)
			}
			first, second := generation(t, srv, key, 1), generation(t, srv, key, 2)
			if first.Text != full || first.Sent() != partial || first.Continuation {
				t.Errorf("first generation %+v", first)
			}
			cont := c.model != "none"
			if second.Continuation != cont || second.PrefixMatched != cont || second.Text != want || second.Sent() != want ||
				second.End != llmsim.EndDone || second.Attempt != 2 || (cont && second.Prefix != partial) {
				t.Errorf("second generation %+v", second)
			}
			if got := srv.Generated(key); got != full {
				t.Errorf("Generated(%s) = %q, want the full answer %q", key, got, full)
			}
		})
	}
}

func TestReasoningModelStreamsReasoningFirst(t *testing.T) {
	srv := startScenario(t, genScenario, llmsim.Options{})
	cl, _ := goClient(srv, 10*time.Second)
	s := openStream(t, context.Background(), cl, ask("r1", "Think first."))
	var order []string
	var content, reasoning string
	eachChunk(t, s, func(r openai.ChatCompletionStreamResponse) {
		for _, ch := range r.Choices {
			if ch.Delta.ReasoningContent != "" && (len(order) == 0 || order[len(order)-1] != "reasoning") {
				order = append(order, "reasoning")
			}
			if ch.Delta.Content != "" && (len(order) == 0 || order[len(order)-1] != "content") {
				order = append(order, "content")
			}
			content += ch.Delta.Content
			reasoning += ch.Delta.ReasoningContent
		}
	})
	if strings.Join(order, ",") != "reasoning,content" || reasoning != llmsim.ReasoningTokens("Think first.", 12) || content != llmsim.Answer("r1", "Think first.") {
		t.Errorf("order %v reasoning %q content %q", order, reasoning, content)
	}
	resp, err := cl.CreateChatCompletion(context.Background(), ask("r1", "Think first."))
	if err != nil || resp.Choices[0].Message.ReasoningContent != reasoning ||
		resp.Usage.CompletionTokens != 12+llmsim.EstimateTokens(content) {
		t.Errorf("non-streamed: %v %+v usage %+v", err, resp.Choices, resp.Usage)
	}
}

func TestStatsGenerations(t *testing.T) {
	ask3 := func(srv *llmsim.Server) {
		for i := range 3 {
			cl, _ := goClient(srv, 5*time.Second, "Idempotency-Key", fmt.Sprintf("g%d/1", i))
			if _, err := cl.CreateChatCompletion(context.Background(), ask("qwen-14b", fmt.Sprintf("q%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("kept, only on request", func(t *testing.T) {
		srv := start(t, llmsim.Options{Scenario: &llmsim.Scenario{Models: llmsim.InstantModels()}, KeepGenerations: 2})
		ask3(srv)
		eventually(t, "two generations", func() bool { return len(srv.Generations("")) == 2 })
		var plain map[string]any
		getJSON(t, srv.URL+"/stats", &plain)
		if _, ok := plain["generations"]; ok {
			t.Error("plain /stats lists generations")
		}
		var st llmsim.Stats
		getJSON(t, srv.URL+"/stats?generations=1", &st)
		if len(st.Generations) != 2 || st.Generations[0].Conversation != "g1" || st.Generations[1].Conversation != "g2" {
			t.Fatalf("generations %+v, want the last two", st.Generations)
		}
		g := st.Generations[1]
		if g.Text != llmsim.Answer("qwen-14b", "q2") || g.Sent() != g.Text || g.End != llmsim.EndDone || g.Model != "qwen-14b" ||
			g.Attempt != 1 || g.CompletionTokens != llmsim.EstimateTokens(g.Text) || g.FinishReason != "stop" {
			t.Errorf("generation %+v", g)
		}
		getJSON(t, srv.URL+"/stats?generations=1&conversation=g1", &st)
		if len(st.Generations) != 1 || st.Generations[0].Conversation != "g1" {
			t.Errorf("filtered %+v", st.Generations)
		}
		getJSON(t, srv.URL+"/stats?generations=1&conversation=nope", &plain)
		if gs, ok := plain["generations"].([]any); !ok || len(gs) != 0 {
			t.Errorf("unknown conversation: %v", plain["generations"])
		}
		srv.ResetStats()
		if len(srv.Generations("")) != 0 {
			t.Error("ResetStats kept the generations")
		}
	})
	t.Run("off", func(t *testing.T) {
		srv := start(t, llmsim.Options{KeepGenerations: -1})
		ask3(srv)
		if gs := srv.Generations(""); len(gs) != 0 {
			t.Errorf("generations %+v", gs)
		}
	})
}
