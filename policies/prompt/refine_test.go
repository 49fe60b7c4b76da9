package prompt

import (
	"reflect"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// TestRefine: the rounds keeping the newest 2 drops are replaced by one
// summary message in the system part, which later pruning never cuts and
// which a model without a system role gets as a user message.
func TestRefine(t *testing.T) {
	msgs := []request.Message{
		{Role: request.RoleSystem, Content: "S"},
		{Role: request.RoleUser, Content: "u1 order ZX-1"}, {Role: request.RoleAssistant, Content: "a1"},
		{Role: request.RoleUser, Content: "u2"}, {Role: request.RoleAssistant, Content: "a2"},
		{Role: request.RoleUser, Content: "u3"}, {Role: request.RoleAssistant, Content: "a3"},
		{Role: request.RoleUser, Content: "q"},
	}
	d := DroppedRounds(msgs, 2)
	if d != (Dropped{From: 1, To: 3, Rounds: 1}) {
		t.Fatalf("DroppedRounds = %+v", d)
	}
	if got := Transcript(msgs[d.From:d.To]); got != "user: u1 order ZX-1\n\nassistant: a1" {
		t.Errorf("Transcript = %q", got)
	}
	sum := SummaryMessage("The order is ZX-1.", d.Rounds, "llama-8b")
	refined := Refine(msgs, d, sum)
	want := append([]request.Message{msgs[0], sum}, msgs[3:]...)
	if !reflect.DeepEqual(refined, want) {
		t.Fatalf("Refine =\n%+v\nwant\n%+v", refined, want)
	}
	if !IsSummary(sum) || !strings.HasPrefix(sum.Content, SummaryMark) {
		t.Errorf("not a summary message: %+v", sum)
	}
	// Pruning everything keeps it.
	if got := PruneKeepRounds(refined, 0).Messages; len(got) != 3 || !IsSummary(got[1]) {
		t.Errorf("PruneKeepRounds(refined, 0) = %+v", got)
	}
	// Fit counts it as the user message a none model is sent.
	tc := mustCounter(t, "cl100k_base")
	f := Fit(refined, Shape{Window: 8192, Support: config.SystemPromptNone}, tc)
	sent := Build(refined, f.Keep, config.SystemPromptNone)
	if sent[0].Role != request.RoleUser || !IsSummary(sent[0]) || f.Tokens < tc.CountMessages(sent) {
		t.Errorf("Fit = %+v for %+v (%d tokens)", f, sent, tc.CountMessages(sent))
	}
}
