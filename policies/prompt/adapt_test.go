package prompt

import (
	"reflect"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

func TestAdaptMessages(t *testing.T) {
	conv := []request.Message{
		{Role: request.RoleSystem, Content: "你是一位资深律师。"},
		{Role: request.RoleDeveloper, Content: "回答不超过三句话。"},
		{Role: request.RoleUser, Content: "合同违约怎么办？"},
		{Role: request.RoleAssistant, Content: "先固定证据。"},
		{Role: request.RoleUser, Content: "需要请律师吗？"},
	}
	const sys = "你是一位资深律师。\n\n回答不超过三句话。"
	tests := []struct {
		name    string
		msgs    []request.Message
		support config.SystemPromptSupport
		want    []request.Message
	}{
		{name: "full: unchanged", msgs: conv, support: config.SystemPromptFull, want: conv},
		{name: "unknown support is full", msgs: conv, support: "", want: conv},
		{
			name: "partial: the Chinese question is wrapped in the role", msgs: conv, support: config.SystemPromptPartial,
			want: []request.Message{
				{Role: request.RoleUser, Content: "合同违约怎么办？"},
				{Role: request.RoleAssistant, Content: "先固定证据。"},
				{Role: request.RoleUser, Content: "请以" + sys + "的身份回答：需要请律师吗？"},
			},
		},
		{
			name: "partial: an English question gets the English wrapper",
			msgs: []request.Message{
				{Role: request.RoleSystem, Content: "a senior lawyer"},
				{Role: request.RoleUser, Content: "What if the contract is breached?"},
			},
			support: config.SystemPromptPartial,
			want:    []request.Message{{Role: request.RoleUser, Content: "Answer as a senior lawyer: What if the contract is breached?"}},
		},
		{
			name: "partial: the question's language decides, not the role's",
			msgs: []request.Message{
				{Role: request.RoleSystem, Content: "你是一位资深律师。"},
				{Role: request.RoleUser, Content: "Is a verbal contract binding? 口头合同"},
			},
			support: config.SystemPromptPartial,
			want:    []request.Message{{Role: request.RoleUser, Content: "Answer as 你是一位资深律师。: Is a verbal contract binding? 口头合同"}},
		},
		{
			name: "none: user turns only, the role dropped", msgs: conv, support: config.SystemPromptNone,
			want: []request.Message{
				{Role: request.RoleUser, Content: "合同违约怎么办？"},
				{Role: request.RoleAssistant, Content: "先固定证据。"},
				{Role: request.RoleUser, Content: "需要请律师吗？"},
			},
		},
		{
			name:    "no system prompt: unchanged",
			msgs:    []request.Message{{Role: request.RoleUser, Content: "你好"}},
			support: config.SystemPromptNone,
			want:    []request.Message{{Role: request.RoleUser, Content: "你好"}},
		},
		{
			name:    "blank system prompt is dropped",
			msgs:    []request.Message{{Role: request.RoleSystem, Content: "  "}, {Role: request.RoleUser, Content: "你好"}},
			support: config.SystemPromptPartial,
			want:    []request.Message{{Role: request.RoleUser, Content: "你好"}},
		},
		{
			name:    "partial, no user message: the system text becomes one",
			msgs:    []request.Message{{Role: request.RoleSystem, Content: "S"}, {Role: request.RoleAssistant, Content: "a"}},
			support: config.SystemPromptPartial,
			want:    []request.Message{{Role: request.RoleUser, Content: "S"}, {Role: request.RoleAssistant, Content: "a"}},
		},
		{
			name:    "partial, empty question",
			msgs:    []request.Message{{Role: request.RoleSystem, Content: "S"}, {Role: request.RoleUser, Content: ""}},
			support: config.SystemPromptPartial,
			want:    []request.Message{{Role: request.RoleUser, Content: "Answer as S: "}},
		},
		{
			name: "partial: an image question gets the role as its first part",
			msgs: []request.Message{
				{Role: request.RoleSystem, Content: "S"},
				{Role: request.RoleUser, Parts: []request.Part{{Type: request.PartText, Text: "what is this?"}}},
			},
			support: config.SystemPromptPartial,
			want: []request.Message{{Role: request.RoleUser, Parts: []request.Part{
				{Type: request.PartText, Text: "Answer as S: "}, {Type: request.PartText, Text: "what is this?"}}}},
		},
		{
			name: "a context summary is not the role: sent as a user message",
			msgs: []request.Message{
				{Role: request.RoleSystem, Content: "S"},
				SummaryMessage("Order A-1 ships on 3 May.", 4, "llama-8b"),
				{Role: request.RoleUser, Content: "When does it ship?"},
			},
			support: config.SystemPromptNone,
			want: []request.Message{
				{Role: request.RoleUser, Content: SummaryMessage("Order A-1 ships on 3 May.", 4, "llama-8b").Content},
				{Role: request.RoleUser, Content: "When does it ship?"},
			},
		},
		{
			name: "tool calls are kept",
			msgs: []request.Message{
				{Role: request.RoleSystem, Content: "S"},
				{Role: request.RoleUser, Content: "u1"}, ptCall("call_a"), ptTool("call_a", "t"),
				{Role: request.RoleUser, Content: "u2"},
			},
			support: config.SystemPromptPartial,
			want: []request.Message{
				{Role: request.RoleUser, Content: "u1"}, ptCall("call_a"), ptTool("call_a", "t"),
				{Role: request.RoleUser, Content: "Answer as S: u2"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := ptDeepCopy(tt.msgs)
			got := AdaptMessages(tt.msgs, tt.support)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("AdaptMessages =\n%+v\nwant\n%+v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.msgs, orig) {
				t.Errorf("input mutated:\n%+v", tt.msgs)
			}
			for i := range got { // the result shares nothing with the input
				got[i].Content = "changed"
				for j := range got[i].ToolCalls {
					got[i].ToolCalls[j].ID = "changed"
				}
			}
			if !reflect.DeepEqual(tt.msgs, orig) {
				t.Errorf("changing the result changed the input:\n%+v", tt.msgs)
			}
		})
	}
}

func TestDropsSystem(t *testing.T) {
	withRole := []request.Message{{Role: request.RoleSystem, Content: "S"}, {Role: request.RoleUser, Content: "q"}}
	onlySummary := []request.Message{SummaryMessage("x", 1, "m"), {Role: request.RoleUser, Content: "q"}}
	for _, tt := range []struct {
		name    string
		msgs    []request.Message
		support config.SystemPromptSupport
		want    bool
	}{
		{"none with a role", withRole, config.SystemPromptNone, true},
		{"partial keeps it as a role", withRole, config.SystemPromptPartial, false},
		{"full", withRole, config.SystemPromptFull, false},
		{"a summary is not a role", onlySummary, config.SystemPromptNone, false},
	} {
		if got := DropsSystem(tt.msgs, tt.support); got != tt.want {
			t.Errorf("%s: DropsSystem = %v, want %v", tt.name, got, tt.want)
		}
	}
}
