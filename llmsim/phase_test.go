package llmsim_test

import (
	"context"
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

func status(err error) int {
	if err == nil {
		return 200
	}
	var a *openai.APIError
	if errors.As(err, &a) {
		return a.HTTPStatusCode
	}
	var r *openai.RequestError
	if errors.As(err, &r) {
		return r.HTTPStatusCode
	}
	return -1
}

func TestPhasesChangeOnTime(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	var last llmsim.Record
	srv := startScenario(t, `
name: timeline
models: [{name: qwen-72b, ttft: 0s, itl: 0s}, {name: qwen-14b, ttft: 0s, itl: 0s}]
phases:
  - {name: healthy, duration: 10s}
  - name: spike
    duration: 5s
    model_latency: {qwen-72b: 150ms}
    faults:
      - {kind: rate_limited, model: qwen-72b, first: 1, retry_after: 2s}
  - {name: recovered}
`, llmsim.Options{Clock: clk.Now, OnRequest: func(r llmsim.Record) {
		mu.Lock()
		last = r
		mu.Unlock()
	}})
	cl, _ := goClient(srv, 5*time.Second)
	call := func(model string) (int, time.Duration) {
		_, err := cl.CreateChatCompletion(context.Background(), ask(model, "phase"))
		mu.Lock()
		defer mu.Unlock()
		return status(err), last.Service
	}
	steps := []struct {
		advance time.Duration
		phase   string
		model   string
		status  int
		slow    bool
	}{
		{0, "healthy", "qwen-72b", 200, false},
		{9999 * time.Millisecond, "healthy", "qwen-72b", 200, false},
		{time.Millisecond, "spike", "qwen-72b", 429, false}, // first: 1
		{0, "spike", "qwen-72b", 200, true},                 // latency override
		{0, "spike", "qwen-14b", 200, false},                // other model untouched
		{4 * time.Second, "spike", "qwen-72b", 200, true},
		{time.Second, "recovered", "qwen-72b", 200, false},
		{time.Hour, "recovered", "qwen-72b", 200, false},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		if got := srv.Phase(); got != s.phase {
			t.Errorf("step %d: phase %q, want %q", i, got, s.phase)
		}
		begin := time.Now()
		st, service := call(s.model)
		took := time.Since(begin)
		if st != s.status {
			t.Errorf("step %d (%s): status %d, want %d", i, s.phase, st, s.status)
		}
		want := time.Duration(0)
		if s.slow {
			want = 150 * time.Millisecond
		}
		if service != want || took < want {
			t.Errorf("step %d (%s): service %v, took %v, want %v", i, s.phase, service, took, want)
		}
	}
	if got := srv.Stats().Phase; got != "recovered" {
		t.Errorf("stats phase %q", got)
	}
	srv.Reset()
	if got := srv.Phase(); got != "healthy" {
		t.Errorf("after Reset: phase %q", got)
	}
	clk.Advance(10 * time.Second)
	if st, _ := call("qwen-72b"); st != 429 {
		t.Errorf("after Reset the first-1 rule fires again: status %d", st)
	}
}

func TestPhaseStartsAndLoop(t *testing.T) {
	clk := newFakeClock()
	srv := startScenario(t, `
phases:
  - {name: a, start: 2s, duration: 1s}
  - {name: b, start: 5s}
`, llmsim.Options{Clock: clk.Now})
	for _, s := range []struct {
		at    time.Duration
		phase string
	}{{0, ""}, {2 * time.Second, "a"}, {3 * time.Second, ""}, {5 * time.Second, "b"}, {time.Hour, "b"}} {
		srv.Reset()
		clk.Advance(s.at)
		if got := srv.Phase(); got != s.phase {
			t.Errorf("at %v: phase %q, want %q", s.at, got, s.phase)
		}
	}
	loop, err := llmsim.ParseScenario([]byte(`
loop: true
phases: [{name: a, duration: 1s}, {name: b, duration: 1s}]
`), "loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetScenario(loop); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 5 {
		got = append(got, srv.Phase())
		clk.Advance(700 * time.Millisecond)
	}
	// 0, 0.7, 1.4, 2.1 (=0.1), 2.8 (=0.8)
	if strings.Join(got, ",") != "a,a,b,a,a" {
		t.Errorf("loop phases %v", got)
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	run := func(seed int) (string, int) {
		srv := startScenario(t, fmt.Sprintf(`
seed: %d
phases: [{faults: [{kind: server_error, probability: 0.3}]}]
`, seed), llmsim.Options{})
		cl, _ := goClient(srv, 5*time.Second)
		var b strings.Builder
		n := 0
		for range 60 {
			_, err := cl.CreateChatCompletion(context.Background(), ask("qwen-14b", "p"))
			if status(err) == 500 {
				b.WriteByte('x')
				n++
			} else {
				b.WriteByte('.')
			}
		}
		return b.String(), n
	}
	a, n := run(42)
	b, _ := run(42)
	c, _ := run(43)
	if a != b {
		t.Errorf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("different seeds, same faults: %s", a)
	}
	if n < 8 || n > 28 {
		t.Errorf("%d of 60 faulted at p=0.3", n)
	}
}

func TestFirstNAndModelFilter(t *testing.T) {
	srv := startScenario(t, `
phases:
  - faults:
      - {kind: bad_gateway, model: qwen-72b, first: 3}
      - {kind: latency, model: qwen-14b, latency: 50ms}
      - {kind: length, model: qwen-14b, probability: 1}
`, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	var got []int
	for range 5 {
		_, err := cl.CreateChatCompletion(context.Background(), ask("qwen-72b", "n"))
		got = append(got, status(err))
	}
	if fmt.Sprint(got) != "[502 502 502 200 200]" {
		t.Errorf("qwen-72b statuses %v", got)
	}
	begin := time.Now()
	resp, err := cl.CreateChatCompletion(context.Background(), ask("qwen-14b", "n"))
	if err != nil || resp.Choices[0].FinishReason != openai.FinishReasonLength || time.Since(begin) < 50*time.Millisecond {
		t.Errorf("qwen-14b: latency then length expected: %v %+v after %v", err, resp.Choices, time.Since(begin))
	}
	st := srv.Stats()
	if st.Faults["bad_gateway"] != 3 || st.Faults["length"] != 1 || st.Models["qwen-72b"].Responses["502"] != 3 {
		t.Errorf("faults %v models %v", st.Faults, st.Models)
	}
}

func TestDirectivesCountPerConversation(t *testing.T) {
	srv := start(t, llmsim.Options{})
	ctx := context.Background()
	callKey := func(key, model, q string) int {
		cl, _ := goClient(srv, 5*time.Second, "Idempotency-Key", key)
		_, err := cl.CreateChatCompletion(ctx, ask(model, q))
		return status(err)
	}
	q := "Where is my order? [[sim fault=rate_limited times=2]]"
	t.Run("idempotency key prefix", func(t *testing.T) {
		var got []int
		for i := 1; i <= 4; i++ {
			got = append(got, callKey(fmt.Sprintf("llm-c1/%d", i), "qwen-72b", q))
		}
		if fmt.Sprint(got) != "[429 429 200 200]" {
			t.Errorf("c1: %v", got)
		}
		// Another conversation with the same text counts on its own.
		if s := callKey("llm-c2/1", "qwen-72b", q); s != 429 {
			t.Errorf("c2 first attempt %d", s)
		}
		if cv := srv.Stats().Conversations["llm-c1"]; cv.Attempts != 4 {
			t.Errorf("c1 attempts %d", cv.Attempts)
		}
	})
	t.Run("hash of the question survives pruning", func(t *testing.T) {
		cl, _ := goClient(srv, 5*time.Second)
		q := "Pruned question [[sim fault=server_error times=1]]"
		long := openai.ChatCompletionRequest{Model: "qwen-72b", Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: "sys"}, {Role: "user", Content: "old"}, {Role: "assistant", Content: "old answer"},
			{Role: "user", Content: q}}}
		_, err := cl.CreateChatCompletion(ctx, long)
		if status(err) != 500 {
			t.Errorf("first attempt %v", err)
		}
		short := long
		short.Messages = []openai.ChatCompletionMessage{long.Messages[0], long.Messages[3]}
		resp, err := cl.CreateChatCompletion(ctx, short)
		if err != nil {
			t.Fatalf("pruned retry: %v", err)
		}
		if c := resp.Choices[0].Message.Content; c != llmsim.Answer("qwen-72b", "Pruned question") || strings.Contains(c, "[[sim") {
			t.Errorf("content %q", c)
		}
	})
	t.Run("model filter and sequence", func(t *testing.T) {
		q := "Seq [[sim fault=server_error times=1 model=qwen-72b]] [[sim fault=queue_full times=1]]"
		steps := []struct {
			model  string
			status int
		}{{"qwen-14b", 429}, {"qwen-72b", 500}, {"qwen-72b", 200}, {"qwen-14b", 200}}
		for i, s := range steps {
			if got := callKey(fmt.Sprintf("llm-seq/%d", i+1), s.model, q); got != s.status {
				t.Errorf("step %d on %s: %d, want %d", i, s.model, got, s.status)
			}
		}
	})
	t.Run("always", func(t *testing.T) {
		for i := range 3 {
			if got := callKey(fmt.Sprintf("llm-al/%d", i), "qwen-14b", "x [[sim fault=forbidden times=always]]"); got != 403 {
				t.Errorf("attempt %d: %d", i, got)
			}
		}
	})
	t.Run("parallel conversations", func(t *testing.T) {
		var wg sync.WaitGroup
		for c := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for a := 1; a <= 3; a++ {
					callKey(fmt.Sprintf("llm-par%d/%d", c, a), "qwen-72b", "Parallel [[sim fault=bad_gateway times=2]]")
				}
			}()
		}
		wg.Wait()
		st := srv.Stats()
		for c := range 20 {
			cv := st.Conversations[fmt.Sprintf("llm-par%d", c)]
			var outs []string
			for _, r := range cv.Requests {
				outs = append(outs, r.Outcome)
			}
			if strings.Join(outs, ",") != "502,502,200" {
				t.Errorf("conversation %d: %v", c, outs)
			}
		}
	})
	t.Run("reset restarts counts, ResetStats does not", func(t *testing.T) {
		q := "Once [[sim fault=unavailable]]"
		if got := callKey("llm-once/1", "qwen-72b", q); got != 503 {
			t.Fatalf("first %d", got)
		}
		srv.ResetStats()
		if got := callKey("llm-once/2", "qwen-72b", q); got != 200 {
			t.Errorf("after ResetStats: %d, want 200 (directive used up)", got)
		}
		srv.Reset()
		if got := callKey("llm-once/3", "qwen-72b", q); got != 503 {
			t.Errorf("after Reset: %d, want 503", got)
		}
	})
}

func TestContextWindowIsComputed(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	ctx := context.Background()
	history := strings.Repeat("This is a long turn of an old conversation. ", 400) // ~4,400 tokens
	long := openai.ChatCompletionRequest{Model: "llama-8b", Messages: []openai.ChatCompletionMessage{
		{Role: "system", Content: "sys"}, {Role: "user", Content: history}, {Role: "assistant", Content: "ok"},
		{Role: "user", Content: "And now?"}}}
	msgs := []llmsim.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: history}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "And now?"}}
	tokens := llmsim.EstimatePromptTokens(msgs)
	_, err := cl.CreateChatCompletion(ctx, long)
	e := apiError(t, err, 400, "context_length_exceeded")
	want := fmt.Sprintf("This model's maximum context length is 4096 tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", tokens)
	if e.Message != want || e.Param == nil || *e.Param != "messages" {
		t.Errorf("message %q\nwant    %q", e.Message, want)
	}
	// The same prompt fits qwen-72b; pruned, it fits llama-8b.
	long.Model = "qwen-72b"
	if _, err := cl.CreateChatCompletion(ctx, long); err != nil {
		t.Errorf("qwen-72b: %v", err)
	}
	long.Model = "llama-8b"
	long.Messages = []openai.ChatCompletionMessage{long.Messages[0], long.Messages[3]}
	if _, err := cl.CreateChatCompletion(ctx, long); err != nil {
		t.Errorf("pruned: %v", err)
	}

	// The fault with a window: fires while the prompt is over it.
	q := "Window [[sim fault=context_length_exceeded window=60 times=always]]"
	big := ask("qwen-72b", q)
	big.Messages = append([]openai.ChatCompletionMessage{{Role: "user", Content: strings.Repeat("word ", 80)}, {Role: "assistant", Content: "ok"}}, big.Messages...)
	_, err = cl.CreateChatCompletion(ctx, big)
	e = apiError(t, err, 400, "context_length_exceeded")
	if !strings.HasPrefix(e.Message, "This model's maximum context length is 60 tokens.") {
		t.Errorf("message %q", e.Message)
	}
	if _, err := cl.CreateChatCompletion(ctx, ask("qwen-72b", q)); err != nil {
		t.Errorf("pruned below the window: %v", err)
	}
}

// TestServerBusyPhaseEnds: a phase of server_busy for every model refuses
// each request with Ollama's 503 body, byte for byte, while it lasts; then
// the models answer again.
func TestServerBusyPhaseEnds(t *testing.T) {
	clk := newFakeClock()
	srv := startScenario(t, `
name: busy-then-healthy
models: [{name: primary, ttft: 0s, itl: 0s}, {name: other, ttft: 0s, itl: 0s}]
phases:
  - name: busy
    duration: 12s
    faults: [{kind: server_busy}]
  - {name: recovered}
`, llmsim.Options{Clock: clk.Now})
	post := func(model string) (int, string, http.Header) {
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"busy?"}]}`
		resp, err := http.Post(srv.BaseURL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	const ollama = `{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error","param":null,"code":null}}`
	for _, model := range []string{"primary", "other"} {
		st, body, h := post(model)
		if st != 503 || body != ollama || h.Get("Retry-After") != "" || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s during the busy phase: %d %q %v, want 503 with Ollama's body and no Retry-After", model, st, body, h)
		}
	}
	clk.Advance(11999 * time.Millisecond)
	if st, _, _ := post("primary"); st != 503 {
		t.Errorf("just before the phase ends: %d, want 503", st)
	}
	clk.Advance(time.Millisecond)
	for _, model := range []string{"primary", "other"} {
		if st, body, _ := post(model); st != 200 {
			t.Errorf("%s after the phase: %d %q, want 200", model, st, body)
		}
	}
	if got := srv.Stats().Faults["server_busy"]; got != 3 {
		t.Errorf("server_busy faults %d, want 3", got)
	}
}
