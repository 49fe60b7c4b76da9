package prompt

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/request"
)

func ptSystem(s string) request.Message { return request.Message{Role: request.RoleSystem, Content: s} }
func ptDev(s string) request.Message    { return request.Message{Role: request.RoleDeveloper, Content: s} }
func ptUser(s string) request.Message   { return request.Message{Role: request.RoleUser, Content: s} }
func ptAsst(s string) request.Message {
	return request.Message{Role: request.RoleAssistant, Content: s}
}

// ptCall is an assistant message asking for tool calls with the given ids.
func ptCall(ids ...string) request.Message {
	m := request.Message{Role: request.RoleAssistant}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, request.ToolCall{ID: id, Type: "function",
			Function: request.FunctionCall{Name: "get_order_status", Arguments: `{"order_id":"A-12345","备注":"加急"}`}})
	}
	return m
}

func ptTool(id, content string) request.Message {
	return request.Message{Role: request.RoleTool, ToolCallID: id, Content: content}
}

// ptLabel names a message for assertions: its content, or its tool calls.
func ptLabel(m request.Message) string {
	if m.Content != "" {
		return m.Content
	}
	var ids []string
	for _, c := range m.ToolCalls {
		ids = append(ids, c.ID)
	}
	return "call:" + strings.Join(ids, ",")
}

func ptLabels(msgs ...[]request.Message) []string {
	out := []string{}
	for _, part := range msgs {
		for _, m := range part {
			out = append(out, ptLabel(m))
		}
	}
	return out
}

// ptConversation is a Chinese customer-service chat: a system prompt, n
// rounds of one question and one answer, and the current question. Round r
// (1-based) is at indexes 2r-1 and 2r.
func ptConversation(n int) []request.Message {
	msgs := []request.Message{ptSystem("你是一个电商客服助手，回答要简洁、礼貌。")}
	for r := 1; r <= n; r++ {
		msgs = append(msgs,
			ptUser(fmt.Sprintf("第%d轮：我的订单 A-%d 现在到哪里了？", r, r)),
			ptAsst(fmt.Sprintf("第%d轮回答：订单 A-%d 已从上海发出，预计两天内送达。", r, r)))
	}
	return append(msgs, ptUser("当前问题：可以帮我改一下收货地址吗？"))
}

// ptKeep is the expected prompt of ptConversation(n) keeping k rounds.
func ptKeep(msgs []request.Message, n, k int) []string {
	return ptLabels(msgs[:1], msgs[1+2*(n-k):])
}

func ptDeepCopy(msgs []request.Message) []request.Message {
	out := make([]request.Message, len(msgs))
	for i, m := range msgs {
		out[i] = pruneCopy(m)
	}
	return out
}

func TestPruneForAttempt(t *testing.T) {
	conv := ptConversation(10)
	tests := []struct {
		name        string
		stage       int
		factor      float64
		wantRounds  int // rounds kept
		wantRemoved int
	}{
		{name: "stage 0 sends the full history", stage: 0, factor: 0.5, wantRounds: 10},
		{name: "negative stage is stage 0", stage: -1, factor: 0.5, wantRounds: 10},
		{name: "stage 1 keeps half (drop the oldest 5 of 10)", stage: 1, factor: 0.5, wantRounds: 5, wantRemoved: 5},
		{name: "stage 2 keeps ceil(2.5)", stage: 2, factor: 0.5, wantRounds: 3, wantRemoved: 7},
		{name: "last stage keeps system and question only", stage: LastPruneStage, factor: 0.5, wantRounds: 0, wantRemoved: 10},
		{name: "beyond the last stage", stage: 9, factor: 0.5, wantRounds: 0, wantRemoved: 10},
		{name: "zero factor means the default", stage: 1, factor: 0, wantRounds: 5, wantRemoved: 5},
		{name: "factor above 1 means the default", stage: 1, factor: 2, wantRounds: 5, wantRemoved: 5},
		{name: "small factor: 0.09 of 10 rounds keeps 1", stage: 2, factor: 0.3, wantRounds: 1, wantRemoved: 9},
		{name: "tiny factor rounds to 0: only system and question", stage: 2, factor: 0.1, wantRounds: 0, wantRemoved: 10},
		{name: "factor 1 keeps everything before the last stage", stage: 2, factor: 1, wantRounds: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PruneForAttempt(conv, tt.stage, tt.factor)
			if got, want := ptLabels(res.Messages), ptKeep(conv, 10, tt.wantRounds); !slices.Equal(got, want) {
				t.Fatalf("Messages =\n%q\nwant\n%q", got, want)
			}
			if res.Rounds != 10 || res.RemovedRounds != tt.wantRemoved {
				t.Errorf("Rounds, RemovedRounds = %d, %d; want 10, %d", res.Rounds, res.RemovedRounds, tt.wantRemoved)
			}
			if res.Before != len(conv) || res.After != len(res.Messages) || len(res.Removed) != 2*tt.wantRemoved {
				t.Errorf("Before, After, len(Removed) = %d, %d, %d; want %d, %d, %d",
					res.Before, res.After, len(res.Removed), len(conv), len(res.Messages), 2*tt.wantRemoved)
			}
			if got, want := ptLabels(res.Removed), ptLabels(conv[1:1+2*tt.wantRemoved]); !slices.Equal(got, want) {
				t.Errorf("Removed = %q, want the oldest rounds %q", got, want)
			}
			if res.Changed() != (tt.wantRemoved > 0) || !res.Fits {
				t.Errorf("Changed, Fits = %v, %v", res.Changed(), res.Fits)
			}
		})
	}
}

func TestPruneKeepRounds(t *testing.T) {
	conv := ptConversation(10)
	tests := []struct {
		name string
		n    int
		want int
	}{
		{name: "context length exceeded keeps the last 3 rounds", n: 3, want: 3},
		{name: "more rounds than exist keeps all", n: 20, want: 10},
		{name: "zero keeps only system and question", n: 0, want: 0},
		{name: "negative is zero", n: -2, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PruneKeepRounds(conv, tt.n)
			if got, want := ptLabels(res.Messages), ptKeep(conv, 10, tt.want); !slices.Equal(got, want) {
				t.Errorf("Messages =\n%q\nwant\n%q", got, want)
			}
			if res.RemovedRounds != 10-tt.want {
				t.Errorf("RemovedRounds = %d, want %d", res.RemovedRounds, 10-tt.want)
			}
		})
	}
}

// Hand-written histories with tool calls, odd shapes and Chinese text.
func TestPruneShapes(t *testing.T) {
	tests := []struct {
		name       string
		msgs       []request.Message
		keep       int // PruneKeepRounds(msgs, keep)
		wantRounds int
		want       []string
	}{
		{
			name: "an agent round with tool calls is removed whole",
			msgs: []request.Message{
				ptSystem("你是订单助手"),
				ptUser("我的订单到哪了？"), ptCall("call_a", "call_b"), ptTool("call_a", "已发货"), ptTool("call_b", "顺丰 SF100"), ptAsst("您的订单已发货，顺丰单号 SF100。"),
				ptUser("什么时候到？"), ptAsst("预计明天送达。"),
				ptUser("可以改地址吗？"),
			},
			keep: 1, wantRounds: 2,
			want: []string{"你是订单助手", "什么时候到？", "预计明天送达。", "可以改地址吗？"},
		},
		{
			name: "a kept agent round keeps its calls and results",
			msgs: []request.Message{
				ptSystem("你是订单助手"),
				ptUser("你好"), ptAsst("您好！"),
				ptUser("我的订单到哪了？"), ptCall("call_a"), ptTool("call_a", "已发货"), ptAsst("已发货。"),
				ptUser("谢谢"),
			},
			keep: 1, wantRounds: 2,
			want: []string{"你是订单助手", "我的订单到哪了？", "call:call_a", "已发货", "已发货。", "谢谢"},
		},
		{
			name: "malformed: a tool result after a later user message merges the rounds",
			msgs: []request.Message{
				ptSystem("S"),
				ptUser("u1"), ptCall("call_a"),
				ptUser("u2"), ptTool("call_a", "t1"), ptAsst("a2"),
				ptUser("u3"), ptAsst("a3"),
				ptUser("u4"),
			},
			keep: 1, wantRounds: 2, // [u1 call u2 t1 a2] is one round
			want: []string{"S", "u3", "a3", "u4"},
		},
		{
			name: "malformed: merged rounds are kept whole too",
			msgs: []request.Message{
				ptSystem("S"),
				ptUser("u1"), ptAsst("a1"),
				ptUser("u2"), ptCall("call_a"),
				ptUser("u3"), ptTool("call_a", "t3"),
				ptUser("u4"),
			},
			keep: 1, wantRounds: 2,
			want: []string{"S", "u2", "call:call_a", "u3", "t3", "u4"},
		},
		{
			name: "a tool result after the question pins its call to the question",
			msgs: []request.Message{
				ptSystem("S"),
				ptUser("u1"), ptAsst("a1"),
				ptUser("u2"), ptCall("call_b"),
				ptUser("u3"), ptTool("call_b", "t2"),
			},
			keep: 0, wantRounds: 1,
			want: []string{"S", "u2", "call:call_b", "u3", "t2"},
		},
		{
			name: "an orphan tool message is removed with its round",
			msgs: []request.Message{
				ptSystem("S"),
				ptTool("call_x", "orphan"), ptAsst("a0"),
				ptUser("u1"), ptAsst("a1"),
				ptUser("u2"),
			},
			keep: 1, wantRounds: 2,
			want: []string{"S", "u1", "a1", "u2"},
		},
		{
			name: "system and developer messages at the start are all kept",
			msgs: []request.Message{
				ptSystem("S"), ptDev("D"),
				ptUser("u1"), ptAsst("a1"),
				ptUser("u2"),
			},
			keep: 0, wantRounds: 1,
			want: []string{"S", "D", "u2"},
		},
		{
			name: "a system message in the middle belongs to its round",
			msgs: []request.Message{
				ptSystem("S"),
				ptUser("u1"), ptSystem("S1"), ptAsst("a1"),
				ptUser("u2"), ptAsst("a2"),
				ptUser("u3"),
			},
			keep: 1, wantRounds: 2,
			want: []string{"S", "u2", "a2", "u3"},
		},
		{
			name: "no system prompt",
			msgs: []request.Message{ptUser("u1"), ptAsst("a1"), ptUser("u2")},
			keep: 0, wantRounds: 1,
			want: []string{"u2"},
		},
		{
			name: "only the question",
			msgs: []request.Message{ptUser("只有一个问题")},
			keep: 0, wantRounds: 0,
			want: []string{"只有一个问题"},
		},
		{
			name: "no user message: everything after the system part is history",
			msgs: []request.Message{ptSystem("S"), ptAsst("a0")},
			keep: 0, wantRounds: 1,
			want: []string{"S"},
		},
		{
			name: "empty",
			msgs: nil,
			keep: 0, wantRounds: 0,
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PruneKeepRounds(tt.msgs, tt.keep)
			if got := ptLabels(res.Messages); !slices.Equal(got, tt.want) {
				t.Errorf("Messages = %q, want %q", got, tt.want)
			}
			if res.Rounds != tt.wantRounds {
				t.Errorf("Rounds = %d, want %d", res.Rounds, tt.wantRounds)
			}
			if len(res.Messages)+len(res.Removed) != len(tt.msgs) {
				t.Errorf("kept %d + removed %d != %d messages", len(res.Messages), len(res.Removed), len(tt.msgs))
			}
			ptCheckInvariants(t, tt.msgs, res)
		})
	}
}

func TestPruneDoesNotMutateInput(t *testing.T) {
	msgs := []request.Message{
		ptSystem("S"),
		ptUser("u1"), ptCall("call_a"), ptTool("call_a", "t1"), ptAsst("a1"),
		ptUser("u2"), ptCall("call_b"), ptTool("call_b", "t2"), ptAsst("a2"),
		ptUser("u3"),
	}
	orig := ptDeepCopy(msgs)
	results := map[string]PruneResult{
		"PruneForAttempt": PruneForAttempt(msgs, 1, 0.5),
		"PruneKeepRounds": PruneKeepRounds(msgs, 1),
		"FitWindow":       FitWindow(msgs, 1_000_000, 0, nil),
	}
	for name, res := range results {
		t.Run(name, func(t *testing.T) {
			for i := range res.Messages {
				res.Messages[i].Content = "changed"
				for j := range res.Messages[i].ToolCalls {
					res.Messages[i].ToolCalls[j].ID = "changed"
				}
			}
			for i := range res.Removed {
				res.Removed[i].Content = "changed"
			}
			if !reflect.DeepEqual(msgs, orig) {
				t.Errorf("changing the result changed the input:\n%+v", msgs)
			}
		})
	}
}

func TestFitWindow(t *testing.T) {
	tc := mustCounter(t, "")
	conv := ptConversation(10)
	const reserve = 256
	keepTokens := func(k int) int { // prompt tokens when k rounds are kept
		return tc.CountMessages(PruneKeepRounds(conv, k).Messages)
	}
	full := tc.CountMessages(conv)
	tests := []struct {
		name       string
		window     int
		tc         *TokenCounter
		wantRounds int
		wantFits   bool
	}{
		{name: "everything fits", window: full + reserve, tc: tc, wantRounds: 10, wantFits: true},
		{name: "unknown window removes nothing", window: 0, tc: tc, wantRounds: 10, wantFits: true},
		{name: "exactly three rounds fit", window: keepTokens(3) + reserve, tc: tc, wantRounds: 3, wantFits: true},
		{name: "one token short of three rounds keeps two", window: keepTokens(3) + reserve - 1, tc: tc, wantRounds: 2, wantFits: true},
		{name: "only system and question fit", window: keepTokens(0) + reserve, tc: tc, wantRounds: 0, wantFits: true},
		{name: "not even the question fits: say so, do not cut it", window: keepTokens(0) + reserve - 1, tc: tc, wantRounds: 0, wantFits: false},
		{name: "nil counter estimates", window: EstimateMessages(PruneKeepRounds(conv, 4).Messages) + reserve, tc: nil, wantRounds: 4, wantFits: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := FitWindow(conv, tt.window, reserve, tt.tc)
			if got, want := ptLabels(res.Messages), ptKeep(conv, 10, tt.wantRounds); !slices.Equal(got, want) {
				t.Fatalf("Messages =\n%q\nwant\n%q", got, want)
			}
			if res.Fits != tt.wantFits {
				t.Errorf("Fits = %v, want %v", res.Fits, tt.wantFits)
			}
			if want := tt.tc.CountMessages(res.Messages); res.Tokens != want {
				t.Errorf("Tokens = %d, want %d", res.Tokens, want)
			}
			if tt.wantFits && tt.window > 0 && res.Tokens+reserve > tt.window {
				t.Errorf("Tokens %d + reserve %d > window %d", res.Tokens, reserve, tt.window)
			}
		})
	}
}

// Random histories, including malformed ones, must never lose the system
// part or the question, never split a tool call from its results, and
// only ever remove one contiguous block of whole rounds.
func TestPruneInvariantsRandom(t *testing.T) {
	tc := mustCounter(t, "")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		msgs := ptRandomHistory(rng)
		t.Run(fmt.Sprintf("history %d", i), func(t *testing.T) {
			for stage := range LastPruneStage + 2 {
				ptCheckInvariants(t, msgs, PruneForAttempt(msgs, stage, 0.5))
			}
			for k := range 5 {
				res := PruneKeepRounds(msgs, k)
				ptCheckInvariants(t, msgs, res)
				if kept := res.Rounds - res.RemovedRounds; kept != min(k, res.Rounds) {
					t.Errorf("PruneKeepRounds(%d) kept %d of %d rounds", k, kept, res.Rounds)
				}
			}
			full := tc.CountMessages(msgs)
			for _, w := range []int{full, full / 2, full / 4, 1} {
				res := FitWindow(msgs, w, 0, tc)
				ptCheckInvariants(t, msgs, res)
				if res.Fits != (res.Tokens <= w) {
					t.Errorf("FitWindow(%d): Fits = %v with %d tokens", w, res.Fits, res.Tokens)
				}
			}
		})
	}
}

// ptRandomHistory builds a history of up to 8 rounds with tool calls,
// parallel calls, results delayed past a user message, missing results
// and orphan results, mostly ending with a user question.
func ptRandomHistory(rng *rand.Rand) []request.Message {
	var msgs []request.Message
	for range rng.IntN(3) {
		msgs = append(msgs, ptSystem(fmt.Sprintf("系统提示 %d", len(msgs))))
	}
	next := 0
	newID := func() string { next++; return fmt.Sprintf("call_%d", next) }
	var pending []string // results not yet given
	label := func(kind string) string { return fmt.Sprintf("%s%d", kind, len(msgs)) }
	for range rng.IntN(9) {
		msgs = append(msgs, ptUser(label("问")))
		for _, id := range pending { // a delayed result (malformed history)
			msgs = append(msgs, ptTool(id, label("迟到结果")))
		}
		pending = nil
		switch rng.IntN(5) {
		case 0:
			msgs = append(msgs, ptAsst(label("答")))
		case 1, 2:
			ids := []string{newID()}
			if rng.IntN(2) == 0 {
				ids = append(ids, newID())
			}
			msgs = append(msgs, ptCall(ids...))
			for _, id := range ids {
				switch rng.IntN(6) {
				case 0:
					pending = append(pending, id) // answered after the next user message
				case 1: // never answered
				default:
					msgs = append(msgs, ptTool(id, label("结果")))
				}
			}
			msgs = append(msgs, ptAsst(label("答")))
		case 3:
			msgs = append(msgs, ptTool("call_orphan", label("孤儿")), ptAsst(label("答")))
		}
	}
	if rng.IntN(8) > 0 {
		msgs = append(msgs, ptUser(label("当前问题")))
	}
	for _, id := range pending {
		msgs = append(msgs, ptTool(id, label("迟到结果")))
	}
	return msgs
}

func ptCheckInvariants(t *testing.T, in []request.Message, res PruneResult) {
	t.Helper()
	sysEnd := 0
	for sysEnd < len(in) && in[sysEnd].Instructs() {
		sysEnd++
	}
	// One contiguous block [sysEnd, sysEnd+len(Removed)) is removed.
	cut := sysEnd + len(res.Removed)
	want := ptLabels(in[:sysEnd], in[min(cut, len(in)):])
	if got := ptLabels(res.Messages); !slices.Equal(got, want) {
		t.Fatalf("Messages = %q, want the input minus one block after the system part: %q", got, want)
	}
	if got, want := ptLabels(res.Removed), ptLabels(in[sysEnd:cut]); !slices.Equal(got, want) {
		t.Fatalf("Removed = %q, want %q", got, want)
	}
	if res.Before != len(in) || res.After != len(res.Messages) {
		t.Errorf("Before, After = %d, %d; want %d, %d", res.Before, res.After, len(in), len(res.Messages))
	}
	if res.RemovedRounds < 0 || res.RemovedRounds > res.Rounds || (res.RemovedRounds > 0) != (len(res.Removed) > 0) {
		t.Errorf("RemovedRounds %d of %d with %d removed messages", res.RemovedRounds, res.Rounds, len(res.Removed))
	}
	// The question survives.
	for i := len(in) - 1; i >= 0; i-- {
		if in[i].Role == request.RoleUser {
			if i < sysEnd || i >= cut {
				break
			}
			t.Fatalf("the current question %q was removed", in[i].Content)
		}
	}
	// A tool call and its results are kept or removed together.
	keptAt := func(i int) bool { return i < sysEnd || i >= cut }
	callAt := map[string]int{}
	for i, m := range in {
		for _, c := range m.ToolCalls {
			if m.Role == request.RoleAssistant {
				callAt[c.ID] = i
			}
		}
		if m.Role == request.RoleTool {
			if c, ok := callAt[m.ToolCallID]; ok && keptAt(c) != keptAt(i) {
				t.Fatalf("tool call %s (message %d, kept %v) split from its result (message %d, kept %v)",
					m.ToolCallID, c, keptAt(c), i, keptAt(i))
			}
		}
	}
}

func BenchmarkFitWindow(b *testing.B) {
	tc := mustCounter(b, "")
	conv := ptConversation(50)
	window := tc.CountMessages(conv) / 2
	b.ResetTimer()
	for b.Loop() {
		FitWindow(conv, window, 256, tc)
	}
}

// TestPruneKeepsTheAgentsLatestToolExchange: an agent's turn ends with
// tool results (the model's calls and their answers after the question);
// every stage, and fitting a small window, keeps that exchange whole with
// the question, and drops older exchanges only whole.
func TestPruneKeepsTheAgentsLatestToolExchange(t *testing.T) {
	call := func(id, name string) request.Message {
		return request.Message{Role: request.RoleAssistant, ToolCalls: []request.ToolCall{{ID: id, Type: "function",
			Function: request.FunctionCall{Name: name, Arguments: `{"order_id":"` + id + `"}`}}}}
	}
	result := func(id string) request.Message {
		return request.Message{Role: request.RoleTool, ToolCallID: id, Content: strings.Repeat("order "+id+" details ", 40)}
	}
	msgs := []request.Message{
		{Role: request.RoleSystem, Content: "You are a support agent."},
		{Role: request.RoleUser, Content: "Where is order 1?"}, call("1", "lookup_order"), result("1"),
		{Role: request.RoleAssistant, Content: "Order 1 shipped."},
		{Role: request.RoleUser, Content: "And order 2, and can you cancel 3?"},
		call("2", "lookup_order"), result("2"), call("3", "cancel_order"), result("3"),
	}
	latest := msgs[5:]
	for stage := 0; stage <= LastPruneStage; stage++ {
		got := PruneForAttempt(msgs, stage, 0.5).Messages
		if !slices.EqualFunc(got[len(got)-len(latest):], latest, func(a, b request.Message) bool { return reflect.DeepEqual(a, b) }) {
			t.Errorf("stage %d dropped part of the latest tool exchange: %d messages kept", stage, len(got))
		}
	}
	var tc *TokenCounter
	fit := FitWindow(msgs, tc.CountMessages(append([]request.Message{msgs[0]}, latest...))+10, 0, nil)
	if len(fit.Messages) != 1+len(latest) || !fit.Fits {
		t.Errorf("FitWindow kept %d messages (fits %v), want the system prompt and the latest exchange (%d)", len(fit.Messages), fit.Fits, 1+len(latest))
	}
}
