package prompt

import (
	"strings"
	"sync"
	"testing"

	"github.com/durable-llm/durable-llm/policies/request"
)

func mustCounter(t testing.TB, encoding string) *TokenCounter {
	t.Helper()
	tc, err := NewTokenCounter(encoding)
	if err != nil {
		t.Fatalf("NewTokenCounter(%q): %v", encoding, err)
	}
	return tc
}

func TestNewTokenCounter(t *testing.T) {
	tests := []struct {
		name     string
		encoding string
		want     string
		wantErr  bool
	}{
		{name: "empty means cl100k_base", encoding: "", want: "cl100k_base"},
		{name: "cl100k_base", encoding: "cl100k_base", want: "cl100k_base"},
		{name: "o200k_base", encoding: "o200k_base", want: "o200k_base"},
		{name: "unknown encoding", encoding: "gpt-17", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := NewTokenCounter(tt.encoding)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.encoding) {
					t.Fatalf("err = %v, want an error naming %q", err, tt.encoding)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.Encoding(); got != tt.want {
				t.Errorf("Encoding() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTokenCounterCount(t *testing.T) {
	cl := mustCounter(t, "cl100k_base")
	o200 := mustCounter(t, "o200k_base")
	tests := []struct {
		name string
		tc   *TokenCounter
		s    string
		want int
	}{
		{name: "empty", tc: cl, s: "", want: 0},
		{name: "english", tc: cl, s: "hello world", want: 2},
		{name: "english sentence", tc: cl, s: "The quick brown fox jumps over the lazy dog.", want: 10},
		{name: "chinese", tc: cl, s: "你好，世界", want: 6},
		{name: "chinese with an order number", tc: cl, s: "请帮我查询订单 A-12345 的物流状态。", want: 15},
		{name: "chinese o200k is denser", tc: o200, s: "你好，世界", want: 3},
		{name: "invalid utf-8 does not fail", tc: cl, s: "\xff\xfe bad", want: 2},
		{name: "nil counter estimates", tc: nil, s: "你好，世界", want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tc.Count(tt.s); got != tt.want {
				t.Errorf("Count(%q) = %d, want %d", tt.s, got, tt.want)
			}
		})
	}
}

func TestTokenCounterCountMessages(t *testing.T) {
	tc := mustCounter(t, "")
	toolCall := request.Message{Role: request.RoleAssistant, ToolCalls: []request.ToolCall{{
		ID: "call_1", Type: "function",
		Function: request.FunctionCall{Name: "get_order_status", Arguments: `{"order_id":"A-12345"}`},
	}}}
	tests := []struct {
		name string
		msgs []request.Message
		want int
	}{
		{name: "no messages", msgs: nil, want: 0},
		// OpenAI's recipe: 3 per message + role "user" (1) + "hello world" (2) + 3 priming.
		{name: "one user message", msgs: []request.Message{{Role: request.RoleUser, Content: "hello world"}}, want: 3 + 1 + 2 + 3},
		{name: "name costs one more", msgs: []request.Message{{Role: request.RoleUser, Content: "hello world", Name: "tool"}}, want: 3 + 1 + 2 + 1 + 1 + 3},
		{name: "chinese system and question", msgs: []request.Message{
			{Role: request.RoleSystem, Content: "你好，世界"},
			{Role: request.RoleUser, Content: "请帮我查询订单 A-12345 的物流状态。"},
		}, want: (3 + 1 + 6) + (3 + 1 + 15) + 3},
		// tool call: 3 + name "get_order_status" (3) + arguments (9); role "assistant" (1).
		{name: "tool call name and arguments count", msgs: []request.Message{toolCall}, want: 3 + 1 + (3 + 3 + 9) + 3},
		{name: "tool result", msgs: []request.Message{{Role: request.RoleTool, ToolCallID: "call_1", Content: "hello world"}}, want: 3 + 1 + 2 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tc.CountMessages(tt.msgs); got != tt.want {
				t.Errorf("CountMessages = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTokenCounterConcurrent(t *testing.T) {
	tc := mustCounter(t, "")
	msgs := []request.Message{
		{Role: request.RoleSystem, Content: "你是一个客服助手。"},
		{Role: request.RoleUser, Content: "请帮我查询订单 A-12345 的物流状态。"},
	}
	want := tc.CountMessages(msgs)
	var wg sync.WaitGroup
	errs := make(chan int, 64)
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if got := tc.CountMessages(msgs); got != want {
					errs <- got
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("concurrent CountMessages = %d, want %d", got, want)
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want int
	}{
		{name: "empty", s: "", want: 0},
		{name: "short word", s: "the", want: 2}, // 17/16, rounded up once per text
		{name: "five letters", s: "hello", want: 2},
		{name: "long word", s: "internationalization", want: 6},
		{name: "camel case splits", s: "getOrderStatus", want: 4},
		{name: "words and punctuation", s: "Hello, world!", want: 5},
		{name: "digits: one token per three", s: "1234567", want: 3},
		{name: "a space before a number is its own piece", s: "a 123", want: 3},
		{name: "run of one punctuation mark", s: strings.Repeat("=", 64), want: 4},
		{name: "chinese: per character table", s: "你好世界", want: 5},
		{name: "chinese punctuation", s: "你好，世界。", want: 7},
		{name: "ideographic space", s: "你好\u3000世界", want: 6},
		{name: "emoji", s: "👍", want: 3},
		{name: "invalid utf-8: a token per byte", s: "\xff\xfe", want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateTokens(tt.s); got != tt.want {
				t.Errorf("EstimateTokens(%q) = %d, want %d", tt.s, got, tt.want)
			}
		})
	}
}

// The estimate must stay close to the real tokenizer on the kinds of text
// the worker sees, so code that uses it (the simulator) reports sensible
// token counts.
func TestEstimateTokensTracksTokenizer(t *testing.T) {
	tc := mustCounter(t, "cl100k_base")
	samples := []struct {
		name string
		s    string
	}{
		{name: "english prose", s: strings.Repeat("Exponential backoff with full jitter spreads retries over time, so the upstream gateway is not hit by a synchronized wave. ", 5)},
		{name: "chinese prose", s: strings.Repeat("上游模型供应商因为节点切换出现了持续 5 秒的响应延迟毛刺，客户端立刻发起第二次重试。", 5)},
		{name: "json arguments", s: strings.Repeat(`{"order_id":"A-12345","include_items":true,"currency":"CNY"}`, 5)},
		{name: "go code", s: "func (c *Codec) Count(input string) (int, error) {\n\tvar count int\n\terr := c.tokenize(input, func(_ uint, _ string) {\n\t\tcount++\n\t})\n\treturn count, err\n}"},
	}
	for _, tt := range samples {
		t.Run(tt.name, func(t *testing.T) {
			exact, est := tc.Count(tt.s), EstimateTokens(tt.s)
			if ratio := float64(est) / float64(exact); ratio < 0.9 || ratio > 1.35 {
				t.Errorf("estimate %d vs cl100k_base %d: ratio %.2f outside [0.9, 1.35]", est, exact, ratio)
			}
		})
	}
}

func TestEstimateMessages(t *testing.T) {
	msgs := []request.Message{{Role: request.RoleUser, Content: "你好世界"}}
	if got, want := EstimateMessages(msgs), 3+2+5+3; got != want {
		t.Errorf("EstimateMessages = %d, want %d", got, want)
	}
	var nilCounter *TokenCounter
	if got := nilCounter.CountMessages(msgs); got != EstimateMessages(msgs) {
		t.Errorf("nil counter CountMessages = %d, want the estimate %d", got, EstimateMessages(msgs))
	}
}

func BenchmarkTokenCounterCountMessages(b *testing.B) {
	tc := mustCounter(b, "")
	msgs := ptConversation(10)
	b.ResetTimer()
	for b.Loop() {
		tc.CountMessages(msgs)
	}
}
