package callstate

import (
	"slices"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

func TestNextModel(t *testing.T) {
	ladder := []config.ModelConfig{
		{Name: "qwen-72b", SystemPrompt: config.SystemPromptFull},
		{Name: "qwen-14b", SystemPrompt: config.SystemPromptPartial},
		{Name: "qwen-1.8b", SystemPrompt: config.SystemPromptNone},
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
