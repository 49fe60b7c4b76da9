package prompt

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// exactPipeline is the old shaping: prune by stage or rounds, FitWindow
// with the tokenizer, AdaptMessages.
func exactPipeline(msgs []request.Message, s Shape, tc *TokenCounter) (sent []request.Message, fits bool) {
	switch {
	case s.KeepRounds > 0:
		msgs = PruneKeepRounds(msgs, s.KeepRounds).Messages
	case s.Stage > 0:
		msgs = PruneForAttempt(msgs, s.Stage, s.Factor).Messages
	}
	fit := FitWindow(msgs, s.Window, s.Reserve, tc)
	return AdaptMessages(fit.Messages, s.Support), fit.Fits
}

// fitCheck checks what must hold for every Fit: Keep is the system part
// plus a suffix, never splits a tool call from its result, and what is
// sent fits by the real count whenever Fits says so.
func fitCheck(t *testing.T, msgs []request.Message, s Shape, tc *TokenCounter, got Fitted) []request.Message {
	t.Helper()
	if got.Before != len(msgs) || !slices.IsSorted(got.Keep) {
		t.Fatalf("Before %d, Keep %v", got.Before, got.Keep)
	}
	sent := Build(msgs, got.Keep, s.Support)
	real := tc.CountMessages(sent)
	if got.Exact && got.Tokens != real {
		t.Errorf("Exact Tokens = %d, real %d", got.Tokens, real)
	}
	if got.Tokens < real {
		t.Errorf("Tokens = %d below the real count %d", got.Tokens, real)
	}
	if s.Window > 0 && got.Fits && real+s.Reserve > s.Window {
		t.Errorf("sent %d tokens + reserve %d > window %d", real, s.Reserve, s.Window)
	}
	var removed []request.Message
	kept := map[int]bool{}
	for _, i := range got.Keep {
		kept[i] = true
	}
	for i := range msgs {
		if !kept[i] {
			removed = append(removed, msgs[i])
		}
	}
	var keptMsgs []request.Message
	for _, i := range got.Keep {
		keptMsgs = append(keptMsgs, msgs[i])
	}
	ptCheckInvariants(t, msgs, PruneResult{Messages: keptMsgs, Removed: removed, Before: len(msgs), After: len(keptMsgs),
		Rounds: 1, RemovedRounds: b2i(len(removed) > 0)})
	return sent
}

func labelsOf(msgs []request.Message) []string { return ptLabels(msgs) }

func TestFit(t *testing.T) {
	tc := mustCounter(t, "")
	conv := ptConversation(10)
	const reserve = 256
	keepTokens := func(k int) int { return tc.CountMessages(PruneKeepRounds(conv, k).Messages) }
	agent := []request.Message{
		ptSystem("你是订单助手"),
		ptUser("我的订单到哪了？"), ptCall("call_a", "call_b"), ptTool("call_a", strings.Repeat("已发货，", 50)), ptTool("call_b", "顺丰 SF100"), ptAsst("您的订单已发货，顺丰单号 SF100。"),
		ptUser("什么时候到？"), ptAsst("预计明天送达。"),
		ptUser("可以改地址吗？"),
	}
	tests := []struct {
		name      string
		msgs      []request.Message
		shape     Shape
		wantKeep  int // rounds kept (conv) or -1: compare with the exact pipeline
		wantFits  bool
		wantExact bool
	}{
		{name: "no window: stage 0 keeps all", msgs: conv, shape: Shape{}, wantKeep: 10, wantFits: true},
		{name: "no window: stage 1 keeps half", msgs: conv, shape: Shape{Stage: 1, Factor: 0.5}, wantKeep: 5, wantFits: true},
		{name: "no window: keep rounds overrides stage", msgs: conv, shape: Shape{Stage: 1, KeepRounds: 3}, wantKeep: 3, wantFits: true},
		{name: "last stage", msgs: conv, shape: Shape{Stage: LastPruneStage}, wantKeep: 0, wantFits: true},
		{name: "default ladder 4096 fits everything", msgs: conv, shape: Shape{Window: 4096, Reserve: reserve}, wantKeep: 10, wantFits: true},
		{name: "far from the boundary: same as exact", msgs: conv, shape: Shape{Window: keepTokens(4) + reserve + 40, Reserve: reserve}, wantKeep: -1, wantFits: true},
		{name: "exactly three rounds fit: never over", msgs: conv, shape: Shape{Window: keepTokens(3) + reserve, Reserve: reserve}, wantKeep: -1, wantFits: true},
		{name: "one token short of three rounds", msgs: conv, shape: Shape{Window: keepTokens(3) + reserve - 1, Reserve: reserve}, wantKeep: -1, wantFits: true},
		{name: "only system and question fit", msgs: conv, shape: Shape{Window: keepTokens(0) + reserve, Reserve: reserve}, wantKeep: 0, wantFits: true, wantExact: true},
		{name: "not even the question fits", msgs: conv, shape: Shape{Window: keepTokens(0) + reserve - 1, Reserve: reserve}, wantKeep: 0, wantFits: false, wantExact: true},
		{name: "question far over the window", msgs: []request.Message{ptSystem("S"), ptUser(strings.Repeat("很长的问题。", 3000))}, shape: Shape{Window: 4096, Reserve: reserve}, wantKeep: 0, wantFits: false},
		{name: "tool-call rounds are kept whole", msgs: agent, shape: Shape{Window: tc.CountMessages(agent) - 20 + reserve, Reserve: reserve}, wantKeep: -1, wantFits: true},
		{name: "partial support folds the system prompt", msgs: conv, shape: Shape{Window: keepTokens(5) + reserve, Reserve: reserve, Support: config.SystemPromptPartial}, wantKeep: -1, wantFits: true},
		{name: "none support", msgs: conv, shape: Shape{Stage: 1, Window: 4096, Reserve: reserve, Support: config.SystemPromptNone}, wantKeep: 5, wantFits: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fit(tt.msgs, tt.shape, tc)
			sent := fitCheck(t, tt.msgs, tt.shape, tc, got)
			if got.Fits != tt.wantFits {
				t.Errorf("Fits = %v, want %v (Tokens %d)", got.Fits, tt.wantFits, got.Tokens)
			}
			if tt.wantExact && !got.Exact {
				t.Errorf("Exact = false, want true")
			}
			exact, _ := exactPipeline(tt.msgs, tt.shape, tc)
			switch {
			case tt.wantKeep >= 0:
				want := AdaptMessages(PruneKeepRounds(tt.msgs, tt.wantKeep).Messages, tt.shape.Support)
				if !slices.Equal(labelsOf(sent), labelsOf(want)) {
					t.Errorf("sent %q\nwant %q", labelsOf(sent), labelsOf(want))
				}
			case len(sent) > len(exact):
				t.Errorf("sent more than the exact pipeline: %q\nexact %q", labelsOf(sent), labelsOf(exact))
			case len(sent) < len(exact):
				// Near the boundary an estimate may prune a round more.
				t.Logf("pruned more than the exact pipeline: %d vs %d messages", len(sent), len(exact))
			}
		})
	}
}

// Near the boundary the upper bound decides: the window is never
// exceeded, and the exact pipeline keeps at most what Fit keeps plus
// what the estimate margin hides. Far from the boundary (by more than the
// margin) both keep the same messages.
func TestFitMatchesExactPipelineAwayFromBoundary(t *testing.T) {
	tc := mustCounter(t, "")
	conv := ptConversation(30)
	for k := 0; k <= 30; k++ {
		full := tc.CountMessages(PruneKeepRounds(conv, k).Messages)
		next := tc.CountMessages(PruneKeepRounds(conv, k+1).Messages)
		// A window whose upper bound is clear: room for the k-round prompt
		// with the estimate margin, and no room for k+1 rounds at all.
		w := full*3/2 + 256
		if k < 30 && next+256 <= w {
			continue
		}
		s := Shape{Window: w, Reserve: 256}
		got := Fit(conv, s, tc)
		sent := fitCheck(t, conv, s, tc, got)
		exact, _ := exactPipeline(conv, s, tc)
		if !slices.Equal(labelsOf(sent), labelsOf(exact)) {
			t.Errorf("k=%d: Fit sent %d messages, exact %d", k, len(sent), len(exact))
		}
	}
}

// fitRandomConversation builds a realistic conversation of about
// tokens tokens: a system prompt, rounds of English and Chinese questions
// and answers, some with tool calls and JSON results, and a question.
func fitRandomConversation(rng *rand.Rand, tokens int) []request.Message {
	paras := append(append(append([]string{}, estEnglish...), estChinese...), estMixed...)
	para := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(paras[rng.IntN(len(paras))])
			b.WriteString("\n")
		}
		return b.String()
	}
	msgs := []request.Message{ptSystem("你是一个电商客服助手，回答要简洁、礼貌。You are a helpful support agent; answer in the user's language.")}
	total := 0
	for id := 0; total < tokens; id++ {
		q := ptUser(para(1 + rng.IntN(2)))
		msgs = append(msgs, q)
		total += EstimateTokens(q.Content)
		if rng.IntN(4) == 0 {
			call := fmt.Sprintf("call_%d", id)
			msgs = append(msgs, ptCall(call), ptTool(call, estCode[rng.IntN(len(estCode))]))
		}
		a := ptAsst(para(1 + rng.IntN(4)))
		msgs = append(msgs, a)
		total += EstimateTokens(a.Content) * 9 / 10
	}
	return append(msgs, ptUser("当前问题：可以帮我改一下收货地址吗？Can you change my shipping address?"))
}

// Random conversations against the exact pipeline: Fit never sends more
// than the window by the real count, never keeps more than the exact
// pipeline, and keeps at least what fits the window shrunk by the
// estimate margin (the bound: real(kept by Fit) ≥ real(kept by the exact
// pipeline) − window·(1 − 1/1.6) − one round; the test logs the measured
// share of the exact pipeline's tokens that Fit keeps).
func TestFitRandomAgainstExactPipeline(t *testing.T) {
	tc := mustCounter(t, "")
	rng := rand.New(rand.NewPCG(11, 12))
	var sumShare float64
	worst, runs, sameKeep := 1.0, 0, 0
	for iter := range 60 {
		msgs := fitRandomConversation(rng, 200+rng.IntN(12000))
		if iter%5 == 0 {
			msgs = ptRandomHistory(rng)
		}
		full := tc.CountMessages(msgs)
		for _, w := range []int{32768, 8192, 4096, full/2 + 256, full/3 + 256} {
			s := Shape{Window: w, Reserve: 256, Stage: rng.IntN(3), Factor: 0.5,
				Support: []config.SystemPromptSupport{config.SystemPromptFull, config.SystemPromptPartial, config.SystemPromptNone}[rng.IntN(3)]}
			got := Fit(msgs, s, tc)
			sent := fitCheck(t, msgs, s, tc, got)
			exact, exactFits := exactPipeline(msgs, s, tc)
			if got.Fits != exactFits && exactFits {
				t.Errorf("iter %d window %d: Fits = %v, exact pipeline %v", iter, w, got.Fits, exactFits)
			}
			if len(sent) > len(exact) {
				t.Errorf("iter %d window %d: Fit kept %d messages, exact pipeline %d", iter, w, len(sent), len(exact))
			}
			if !got.Fits {
				continue
			}
			runs++
			if len(sent) == len(exact) {
				sameKeep++
			}
			share := float64(tc.CountMessages(sent)) / float64(tc.CountMessages(exact))
			sumShare += share
			worst = min(worst, share)
			if lost := tc.CountMessages(exact) - tc.CountMessages(sent); lost > (w-256)*3/8+fitMaxRound(msgs, tc) {
				t.Errorf("iter %d window %d: Fit kept %d fewer tokens than the exact pipeline", iter, w, lost)
			}
		}
	}
	t.Logf("%d fitted prompts: same messages as the exact pipeline in %d; Fit keeps %.1f%% of its tokens on average, %.1f%% at worst",
		runs, sameKeep, 100*sumShare/float64(runs), 100*worst)
}

// fitMaxRound is the largest round of msgs, in tokens.
func fitMaxRound(msgs []request.Message, tc *TokenCounter) int {
	l := pruneParse(msgs)
	m := 0
	for i := range l.starts {
		a, b := l.round(i)
		m = max(m, tc.CountMessages(msgs[a:b]))
	}
	return m
}

var fitBenchSizes = []struct {
	name   string
	tokens int
}{{"1k", 1000}, {"10k", 10_000}, {"100k", 100_000}}

// fitBenchConversation returns a conversation of about tokens real
// tokens.
func fitBenchConversation(tc *TokenCounter, tokens int) []request.Message {
	rng := rand.New(rand.NewPCG(5, uint64(tokens)))
	msgs := fitRandomConversation(rng, tokens)
	for tc.CountMessages(msgs) > tokens && len(msgs) > 4 {
		msgs = append(msgs[:1], msgs[3:]...)
	}
	return msgs
}

// BenchmarkFit shapes the first attempt of a call (stage 0, nothing
// cached) for each default ladder window in turn.
func BenchmarkFit(b *testing.B) {
	tc := mustCounter(b, "")
	for _, size := range fitBenchSizes {
		msgs := fitBenchConversation(tc, size.tokens)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, w := range []int{32768, 8192, 4096} {
					Fit(msgs, Shape{Window: w, Reserve: 256, Factor: 0.5}, tc)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/3, "ns/attempt")
		})
	}
}

// BenchmarkFitExactPipeline is the old shaping, for the ratio.
func BenchmarkFitExactPipeline(b *testing.B) {
	tc := mustCounter(b, "")
	for _, size := range fitBenchSizes {
		msgs := fitBenchConversation(tc, size.tokens)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, w := range []int{32768, 8192, 4096} {
					sent, _ := exactPipeline(msgs, Shape{Window: w, Reserve: 256, Factor: 0.5}, tc)
					tc.CountMessages(sent)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/3, "ns/attempt")
		})
	}
}
