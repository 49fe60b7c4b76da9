package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// TestStepCallsPayFromTheRetryBudget: a step of a step-by-step answer is
// an extra request of its call, so even its first request is a retry:
// with the budget spent, no step reaches the upstream.
func TestStepCallsPayFromTheRetryBudget(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cfg := config.DefaultConfig()
	cfg.Budget.Floor, cfg.Budget.Ratio = 1, 0 // one retry a minute on each endpoint
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	step := func(n int) Prepared {
		in := firstPrepare()
		in.Request.Step = n
		p, err := a.PrepareAttempt(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := step(1); p.Model != "qwen-72b" {
		t.Fatalf("step 1 took the one retry: want qwen-72b, got %q (%+v)", p.Model, p.Skipped)
	}
	// Step 2 sends nothing: it waits for the budget, which says so.
	p := step(2)
	if p.Hold <= 0 || !p.Recheck || !strings.Contains(p.HoldReason, "retry budget of") {
		t.Fatalf("step 2 after the budget was spent: model %q, hold %s (%q), skipped %+v", p.Model, p.Hold, p.HoldReason, p.Skipped)
	}
	// A call a caller starts still counts its first request as a request.
	if p := step(0); p.Model != "qwen-72b" {
		t.Fatalf("a plain call's first request was refused: %+v", p.Skipped)
	}
}

// TestSplitByRule: a question of three sentences or more is cut into three
// groups of its own sentences in order; a shorter one gets three
// questions about it in its language.
func TestSplitByRule(t *testing.T) {
	got := SplitByRule("A train leaves at 3 pm at 80 km/h. Its town is 240 km away. When does it arrive? Show the working.")
	if len(got) != 3 || got[0] != "A train leaves at 3 pm at 80 km/h." || !strings.HasPrefix(got[2], "When does it arrive?") && !strings.HasPrefix(got[2], "Show") {
		t.Fatalf("sentences: %q", got)
	}
	if strings.Join(got, " ") != "A train leaves at 3 pm at 80 km/h. Its town is 240 km away. When does it arrive? Show the working." {
		t.Fatalf("the groups lose or reorder text: %q", got)
	}
	zh := SplitByRule("这道作业题怎么做")
	if len(zh) != 3 || !strings.HasPrefix(zh[0], "这道题问的是什么") || !strings.HasSuffix(zh[2], "这道作业题怎么做") {
		t.Fatalf("Chinese: %q", zh)
	}
	en := SplitByRule("Solve x+2=5 for my homework")
	if len(en) != 3 || !strings.HasPrefix(en[1], "Which method") {
		t.Fatalf("English: %q", en)
	}
}
