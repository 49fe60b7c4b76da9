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
			name: "partial: folded into the first user turn", msgs: conv, support: config.SystemPromptPartial,
			want: []request.Message{
				{Role: request.RoleUser, Content: sys + "\n\n合同违约怎么办？"},
				{Role: request.RoleAssistant, Content: "先固定证据。"},
				{Role: request.RoleUser, Content: "需要请律师吗？"},
			},
		},
		{
			name: "none: dropped into the current question", msgs: conv, support: config.SystemPromptNone,
			want: []request.Message{
				{Role: request.RoleUser, Content: "合同违约怎么办？"},
				{Role: request.RoleAssistant, Content: "先固定证据。"},
				{Role: request.RoleUser, Content: sys + "\n\n需要请律师吗？"},
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
			name:    "no user message: the system text becomes one",
			msgs:    []request.Message{{Role: request.RoleSystem, Content: "S"}, {Role: request.RoleAssistant, Content: "a"}},
			support: config.SystemPromptPartial,
			want:    []request.Message{{Role: request.RoleUser, Content: "S"}, {Role: request.RoleAssistant, Content: "a"}},
		},
		{
			name:    "empty user content",
			msgs:    []request.Message{{Role: request.RoleSystem, Content: "S"}, {Role: request.RoleUser, Content: ""}},
			support: config.SystemPromptNone,
			want:    []request.Message{{Role: request.RoleUser, Content: "S"}},
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
				{Role: request.RoleUser, Content: "S\n\nu1"}, ptCall("call_a"), ptTool("call_a", "t"),
				{Role: request.RoleUser, Content: "u2"},
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
