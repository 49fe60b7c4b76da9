package llmsim

import "testing"

func TestSummarizeKeepsFacts(t *testing.T) {
	text := "user: Hello there. My order number is ZX-4711 and it was paid on 3 May.\n\n" +
		"assistant: Thanks, noted. I will ask Maria in the warehouse.\n\n" +
		"user: ok thanks. ok thanks."
	tests := []struct {
		name string
		max  int
		want string
	}{
		{"all facts, in order, without labels", 0, "My order number is ZX-4711 and it was paid on 3 May. I will ask Maria in the warehouse."},
		{"cut at a sentence within max_tokens", 15, "My order number is ZX-4711 and it was paid on 3 May."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(text, tt.max); got != tt.want {
				t.Errorf("Summarize = %q, want %q", got, tt.want)
			}
		})
	}
	if got := Summarize("hello there. fine.", 0); got != "hello there." {
		t.Errorf("no facts: Summarize = %q, want the first sentence", got)
	}
}

func TestRecallDirective(t *testing.T) {
	dirs, err := ParseDirectives("[[sim recall=ZX-4711]] what was my order number?")
	if err != nil || recallDirective(dirs) != "ZX-4711" {
		t.Fatalf("ParseDirectives = %+v, %v", dirs, err)
	}
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "order ZX-4711"}, {Role: "user", Content: "ZX-4711?"}}
	if !recalled(msgs, "ZX-4711") {
		t.Error("a fact in an earlier message is recalled")
	}
	if recalled(msgs[:1:1], "ZX-4711") || recalled([]Message{msgs[0], msgs[2]}, "ZX-4711") {
		t.Error("a fact only in the question is not recalled")
	}
}

func TestIsSummaryRequest(t *testing.T) {
	for content, want := range map[string]bool{
		"Summarize the conversation below for another assistant that will not see it.": true,
		"summarise the dialogue so far":                      true,
		"请总结以下对话，保留所有事实":                                     true,
		"You summarize documents for lawyers.":               false,
		"You are a support agent. Never summarize policies.": false,
	} {
		req := &chatRequest{Messages: []Message{{Role: "system", Content: content}}}
		if got := isSummaryRequest(req); got != want {
			t.Errorf("isSummaryRequest(%q) = %v, want %v", content, got, want)
		}
	}
}
