package llmsim

import (
	"strings"
	"testing"
	"time"
)

func TestTokenPieces(t *testing.T) {
	for _, s := range []string{"", "a", "abcd", "abcde", "[qwen-72b] Re: hello — The request.", "你好a", "ab你c", "数据库 is 很好 ok", AnswerTokens("m", "q", 123)} {
		pieces := tokenPieces(s)
		if strings.Join(pieces, "") != s {
			t.Errorf("%q: pieces %q do not concatenate back", s, pieces)
		}
		if len(pieces) != EstimateTokens(s) {
			t.Errorf("%q: %d pieces, want %d tokens", s, len(pieces), EstimateTokens(s))
		}
		prefix := ""
		for k, p := range pieces {
			prefix += p
			if want := truncateTokens(s, k+1); prefix != want {
				t.Errorf("%q: first %d pieces %q, want the %d-token prefix %q", s, k+1, prefix, k+1, want)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestRender(t *testing.T) {
	m := ModelSpec{Name: "m", Continuation: ContinuationPrefix}
	reasoner := ModelSpec{Name: "m", Continuation: ContinuationPrefix, Reasoning: true, ReasoningTokens: 10}
	q := "How long is a piece of string?"
	short := Answer("m", q)
	ns := EstimateTokens(short)
	full100 := AnswerTokens("m", q, 100)
	prefix40 := truncateTokens(full100, 40)
	req := func(maxTokens int, msgs ...Message) *chatRequest {
		r := &chatRequest{Model: "m", Messages: append([]Message{{Role: "user", Content: q}}, msgs...)}
		if maxTokens > 0 {
			r.MaxTokens = &maxTokens
		}
		return r
	}
	cont := func(prefix string) continuation { return continuation{asked: true, prefix: prefix} }
	cases := []struct {
		name          string
		model         ModelSpec
		req           *chatRequest
		dir           int
		cont          continuation
		fault         Fault
		content       string
		finish        string
		completion    int
		continuation  bool
		prefixMatched bool
	}{
		{name: "short answer", model: m, req: req(0), content: short, finish: "stop", completion: ns},
		{name: "tokens directive", model: m, req: req(0), dir: 100, content: full100, finish: "stop", completion: 100},
		{name: "tokens directive below the short answer", model: m, req: req(0), dir: 5, content: truncateTokens(short, 5), finish: "stop", completion: 5},
		{name: "max_tokens never lengthens the answer", model: m, req: req(100), content: short, finish: "stop", completion: ns},
		{name: "max_tokens below the short answer cuts", model: m, req: req(5), content: truncateTokens(short, 5), finish: "length", completion: 5},
		{name: "max_tokens below the directive cuts", model: m, req: req(60), dir: 100, content: truncateTokens(full100, 60), finish: "length", completion: 60},
		{name: "length fault halves", model: m, req: req(0), dir: 100, fault: FaultLength, content: truncateTokens(full100, 50), finish: "length", completion: 50},
		{name: "continuation of a cut answer", model: m, req: req(0), dir: 100, cont: cont(prefix40),
			content: full100[len(prefix40):], finish: "stop", completion: 60, continuation: true, prefixMatched: true},
		{name: "continuation: max_tokens counts new tokens", model: m, req: req(60), dir: 100, cont: cont(prefix40),
			content: full100[len(prefix40):], finish: "stop", completion: 60, continuation: true, prefixMatched: true},
		{name: "continuation: max_tokens caps new tokens", model: m, req: req(10), dir: 100, cont: cont(prefix40),
			content: truncateTokens(full100[len(prefix40):], 10), finish: "length", completion: 10, continuation: true, prefixMatched: true},
		{name: "continuation of the whole answer", model: m, req: req(0), dir: 100, cont: cont(full100 + " more"),
			content: "", finish: "stop", completion: 0, continuation: true, prefixMatched: true},
		{name: "continuation of foreign text goes on from its token position", model: m, req: req(0), dir: 100, cont: cont(strings.Repeat("x", 160)),
			content: full100[len(prefix40):], finish: "stop", completion: 60, continuation: true},
		{name: "continuation: none answers from scratch", model: ModelSpec{Name: "m", Continuation: ContinuationNone}, req: req(0), dir: 100, cont: cont(prefix40),
			content: full100, finish: "stop", completion: 100},
		{name: "reasoning model", model: reasoner, req: req(0), content: short, finish: "stop", completion: ns + 10},
		{name: "reasoning model continuation skips reasoning", model: reasoner, req: req(0), dir: 100, cont: cont(prefix40),
			content: full100[len(prefix40):], finish: "stop", completion: 60, continuation: true, prefixMatched: true},
		{name: "error body generates nothing", model: m, req: req(0), dir: 100, fault: FaultErrorBody, content: "", finish: "stop", completion: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd := render(c.model, c.req, c.dir, c.cont, c.fault, 10)
			if rd.content != c.content || rd.finish != c.finish || rd.completion != c.completion ||
				rd.continuation != c.continuation || rd.prefixMatched != c.prefixMatched {
				t.Errorf("got content %q finish %q completion %d continuation %v matched %v\nwant content %q finish %q completion %d continuation %v matched %v",
					rd.content, rd.finish, rd.completion, rd.continuation, rd.prefixMatched,
					c.content, c.finish, c.completion, c.continuation, c.prefixMatched)
			}
			if c.fault == FaultErrorBody && rd.tokens != 0 {
				t.Errorf("an error body generates %d tokens, want 0", rd.tokens)
			}
			if c.model.Reasoning && !c.continuation && EstimateTokens(rd.reasoning) != c.model.ReasoningTokens {
				t.Errorf("reasoning %q, want %d tokens", rd.reasoning, c.model.ReasoningTokens)
			}
		})
	}
}

func TestResolveGeneration(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name  string
		model ModelSpec
		ttft  Latency
		itl   time.Duration
		cont  string
	}{
		{"defaults", ModelSpec{Name: "m"}, DefaultTTFT(), 25 * ms, ContinuationPrefix},
		{"latency only keeps its old meaning", ModelSpec{Name: "m", Latency: Fixed(100 * ms)}, Fixed(100 * ms), 0, ContinuationPrefix},
		{"latency with tokens_per_second", ModelSpec{Name: "m", Latency: Fixed(100 * ms), TokensPerSecond: 50}, Fixed(100 * ms), 20 * ms, ContinuationPrefix},
		{"ttft only gets the default speed", ModelSpec{Name: "m", TTFT: ptr(Fixed(100 * ms))}, Fixed(100 * ms), 25 * ms, ContinuationPrefix},
		{"explicit zeros", ModelSpec{Name: "m", TTFT: &Latency{}, ITL: new(Duration)}, Latency{}, 0, ContinuationPrefix},
		{"itl", ModelSpec{Name: "m", ITL: ptr(Duration(5 * ms)), Continuation: ContinuationNone}, DefaultTTFT(), 5 * ms, ContinuationNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := &errList{}
			m := c.model
			m.resolveGeneration("models[0]", errs)
			if err := errs.err(); err != nil {
				t.Fatal(err)
			}
			if m.ttft() != c.ttft || m.itl() != c.itl || m.Continuation != c.cont {
				t.Errorf("ttft %v itl %v continuation %q, want %v %v %q", m.ttft(), m.itl(), m.Continuation, c.ttft, c.itl, c.cont)
			}
		})
	}
	if InstantModels()[0].TTFT == DefaultModels()[0].TTFT {
		t.Error("InstantModels shares state with DefaultModels")
	}
}

// TestScheduleStretchedByLoad checks the generation formula on the pool:
// TTFT + tokens × ITL, both stretched by 1 + load_factor × others/slots.
func TestScheduleStretchedByLoad(t *testing.T) {
	p := &pool{closed: make(chan struct{}), onGauge: func(int, int) {}, onDone: func() {}}
	p.configure(2, 0, 1)
	a := newJob(10*time.Millisecond, 2*time.Millisecond, 5, true)
	b := newJob(10*time.Millisecond, 2*time.Millisecond, 5, false)
	p.submit(a)
	p.submit(b)
	<-a.started
	<-b.started
	if a.factor != 1 || a.ttft != 10*time.Millisecond || a.itl != 2*time.Millisecond || a.service != 20*time.Millisecond {
		t.Errorf("first job: factor %v ttft %v itl %v service %v, want 1, 10ms, 2ms, 20ms", a.factor, a.ttft, a.itl, a.service)
	}
	if b.factor != 1.5 || b.ttft != 15*time.Millisecond || b.itl != 3*time.Millisecond || b.service != 30*time.Millisecond {
		t.Errorf("second job: factor %v ttft %v itl %v service %v, want 1.5, 15ms, 3ms, 30ms", b.factor, b.ttft, b.itl, b.service)
	}
	if a.at(0) != a.ttft || a.at(1) != a.ttft || a.at(3) != 14*time.Millisecond || a.at(6) != a.service {
		t.Errorf("token times %v %v %v %v", a.at(0), a.at(1), a.at(3), a.at(6))
	}
	<-a.done
	<-b.done
}
