package request

import (
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

func TestValidateRequestSizeLimitsOfTemporal(t *testing.T) {
	cfg := config.DefaultConfig()
	q := []Message{{Role: RoleUser, Content: "where is my order?"}}
	tests := []struct {
		name  string
		req   Request
		field string
		says  string
	}{
		{"long scenario (a search attribute)", Request{Scenario: strings.Repeat("s", 3000), Messages: q}, "scenario", "over the limit of 256"},
		{"long user id", Request{UserID: strings.Repeat("u", 300), Messages: q}, "user_id", "over the limit of 256"},
		{"prompt small in bytes, too big as JSON",
			Request{Messages: []Message{{Role: RoleUser, Content: strings.Repeat("<", 400_000)}}}, "messages", "once JSON-encoded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.req, cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not name %s (%s)", err, tc.field, tc.says)
			}
		})
	}
	if err := Validate(Request{Scenario: "customer_service", Messages: q}, cfg); err != nil {
		t.Fatalf("a normal request is refused: %v", err)
	}
}

// TestValidatePromptSizeFollowsTheContextWindow: the prompt size limit is
// tied to the ladder's largest context window (16 bytes a token), so a
// prompt no model could take is refused before it is recorded in history
// with every attempt; the error names the window and its model. A ladder
// of small models refuses sooner; a prompt within the limit, longer than
// the window, is accepted (pruning cuts it to fit).
func TestValidatePromptSizeFollowsTheContextWindow(t *testing.T) {
	cfg := config.DefaultConfig() // qwen-72b: 32768 tokens → 512 KiB
	ask := func(n int) Request {
		return Request{Messages: []Message{
			{Role: RoleUser, Content: strings.Repeat("an old round of the conversation. ", n/34)},
			{Role: RoleAssistant, Content: "noted"},
			{Role: RoleUser, Content: "where is my order?"},
		}}
	}
	err := Validate(ask(600_000), cfg)
	if err == nil || !strings.Contains(err.Error(), "over the limit of 512 KiB") || !strings.Contains(err.Error(), "qwen-72b's 32768 tokens") {
		t.Fatalf("a 600 KB prompt with a 32768-token window: %v", err)
	}
	if err := Validate(ask(400_000), cfg); err != nil {
		t.Fatalf("a 400 KB prompt (several windows long, pruned to fit) was refused: %v", err)
	}
	small := config.DefaultConfig()
	small.Models = small.Models[2:] // llama-8b alone: 4096 tokens → 64 KiB
	err = Validate(ask(100_000), small)
	if err == nil || !strings.Contains(err.Error(), "llama-8b's 4096 tokens") {
		t.Fatalf("a 100 KB prompt with a 4096-token ladder: %v", err)
	}
}
