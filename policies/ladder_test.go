package policies

import (
	"reflect"
	"slices"
	"testing"
)

func TestNextModel(t *testing.T) {
	ladder := []ModelConfig{
		{Name: "qwen-72b", SystemPrompt: SystemPromptFull},
		{Name: "qwen-14b", SystemPrompt: SystemPromptPartial},
		{Name: "qwen-1.8b", SystemPrompt: SystemPromptNone},
	}
	refuse := func(names ...string) func(string) bool {
		return func(m string) bool { return !slices.Contains(names, m) }
	}
	tests := []struct {
		name      string
		preferred string
		tried     []string
		allowed   func(string) bool
		want      string
		wantOK    bool
		wantAsked []string // models allowed was asked about, in order
	}{
		{name: "first rung by default", want: "qwen-72b", wantOK: true, wantAsked: []string{"qwen-72b"}},
		{name: "preferred model first", preferred: "qwen-14b", want: "qwen-14b", wantOK: true, wantAsked: []string{"qwen-14b"}},
		{name: "preferred model tried: ladder order", preferred: "qwen-14b", tried: []string{"qwen-14b"}, want: "qwen-72b", wantOK: true, wantAsked: []string{"qwen-72b"}},
		{name: "preferred model's breaker open: ladder order, not asked twice", preferred: "qwen-14b", allowed: refuse("qwen-14b"), want: "qwen-72b", wantOK: true, wantAsked: []string{"qwen-14b", "qwen-72b"}},
		{name: "preferred model not on the ladder is ignored", preferred: "gpt-9", want: "qwen-72b", wantOK: true, wantAsked: []string{"qwen-72b"}},
		{name: "skips tried models", tried: []string{"qwen-72b"}, want: "qwen-14b", wantOK: true, wantAsked: []string{"qwen-14b"}},
		{name: "skips open breakers", allowed: refuse("qwen-72b", "qwen-14b"), want: "qwen-1.8b", wantOK: true, wantAsked: []string{"qwen-72b", "qwen-14b", "qwen-1.8b"}},
		{name: "tried and refused together", tried: []string{"qwen-72b"}, allowed: refuse("qwen-14b"), want: "qwen-1.8b", wantOK: true, wantAsked: []string{"qwen-14b", "qwen-1.8b"}},
		{name: "all tried", tried: []string{"qwen-72b", "qwen-14b", "qwen-1.8b"}, wantOK: false},
		{name: "all refused", allowed: refuse("qwen-72b", "qwen-14b", "qwen-1.8b"), wantOK: false, wantAsked: []string{"qwen-72b", "qwen-14b", "qwen-1.8b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			allowed := func(m string) bool {
				asked = append(asked, m)
				return tt.allowed == nil || tt.allowed(m)
			}
			got, ok := NextModel(ladder, tt.preferred, tt.tried, allowed)
			if ok != tt.wantOK || got.Name != tt.want {
				t.Errorf("NextModel = %q, %v; want %q, %v", got.Name, ok, tt.want, tt.wantOK)
			}
			if !slices.Equal(asked, tt.wantAsked) {
				t.Errorf("allowed asked about %q, want %q", asked, tt.wantAsked)
			}
		})
	}
	t.Run("nil allowed allows all", func(t *testing.T) {
		got, ok := NextModel(ladder, "", []string{"qwen-72b"}, nil)
		if !ok || got.Name != "qwen-14b" {
			t.Errorf("NextModel = %q, %v; want qwen-14b, true", got.Name, ok)
		}
	})
	t.Run("empty ladder", func(t *testing.T) {
		if _, ok := NextModel(nil, "qwen-72b", nil, nil); ok {
			t.Error("NextModel on an empty ladder reported a model")
		}
	})
}

func TestAdaptMessages(t *testing.T) {
	conv := []Message{
		{Role: RoleSystem, Content: "你是一位资深律师。"},
		{Role: RoleDeveloper, Content: "回答不超过三句话。"},
		{Role: RoleUser, Content: "合同违约怎么办？"},
		{Role: RoleAssistant, Content: "先固定证据。"},
		{Role: RoleUser, Content: "需要请律师吗？"},
	}
	const sys = "你是一位资深律师。\n\n回答不超过三句话。"
	tests := []struct {
		name    string
		msgs    []Message
		support SystemPromptSupport
		want    []Message
	}{
		{name: "full: unchanged", msgs: conv, support: SystemPromptFull, want: conv},
		{name: "unknown support is full", msgs: conv, support: "", want: conv},
		{
			name: "partial: folded into the first user turn", msgs: conv, support: SystemPromptPartial,
			want: []Message{
				{Role: RoleUser, Content: sys + "\n\n合同违约怎么办？"},
				{Role: RoleAssistant, Content: "先固定证据。"},
				{Role: RoleUser, Content: "需要请律师吗？"},
			},
		},
		{
			name: "none: dropped into the current question", msgs: conv, support: SystemPromptNone,
			want: []Message{
				{Role: RoleUser, Content: "合同违约怎么办？"},
				{Role: RoleAssistant, Content: "先固定证据。"},
				{Role: RoleUser, Content: sys + "\n\n需要请律师吗？"},
			},
		},
		{
			name:    "no system prompt: unchanged",
			msgs:    []Message{{Role: RoleUser, Content: "你好"}},
			support: SystemPromptNone,
			want:    []Message{{Role: RoleUser, Content: "你好"}},
		},
		{
			name:    "blank system prompt is dropped",
			msgs:    []Message{{Role: RoleSystem, Content: "  "}, {Role: RoleUser, Content: "你好"}},
			support: SystemPromptPartial,
			want:    []Message{{Role: RoleUser, Content: "你好"}},
		},
		{
			name:    "no user message: the system text becomes one",
			msgs:    []Message{{Role: RoleSystem, Content: "S"}, {Role: RoleAssistant, Content: "a"}},
			support: SystemPromptPartial,
			want:    []Message{{Role: RoleUser, Content: "S"}, {Role: RoleAssistant, Content: "a"}},
		},
		{
			name:    "empty user content",
			msgs:    []Message{{Role: RoleSystem, Content: "S"}, {Role: RoleUser, Content: ""}},
			support: SystemPromptNone,
			want:    []Message{{Role: RoleUser, Content: "S"}},
		},
		{
			name: "tool calls are kept",
			msgs: []Message{
				{Role: RoleSystem, Content: "S"},
				{Role: RoleUser, Content: "u1"}, ptCall("call_a"), ptTool("call_a", "t"),
				{Role: RoleUser, Content: "u2"},
			},
			support: SystemPromptPartial,
			want: []Message{
				{Role: RoleUser, Content: "S\n\nu1"}, ptCall("call_a"), ptTool("call_a", "t"),
				{Role: RoleUser, Content: "u2"},
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
