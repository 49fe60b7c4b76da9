package callstate

import (
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"strings"
	"testing"
	"time"
)

// fixedBudget allows a fixed number of retries.
type fixedBudget struct{ left, asked int }

func (b *fixedBudget) TryRetry(time.Time) bool {
	b.asked++
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

func TestPlan(t *testing.T) {
	cfg := config.DefaultConfig()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := PlanInput{
		Attempts: 1, ClassFailuresOnModel: 1, Model: "qwen-72b", NextModel: "qwen-14b",
		Elapsed: time.Second, Deadline: 60 * time.Second, ClassAllowed: true, U: 0.5,
	}
	tests := []struct {
		name     string
		in       func(p *PlanInput)
		budget   int
		kind     StepKind
		decision string
		delay    time.Duration
		model    string
		reason   string
		check    func(t *testing.T, s Step)
	}{
		{name: "timeout prunes one stage and waits full jitter", in: func(p *PlanInput) { p.Class = failure.ClassTimeout },
			budget: 1, kind: StepRetry, decision: "prune+retry", delay: 250 * time.Millisecond, model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.PruneStage != 1 || !s.ChargeBudget {
					t.Errorf("stage %d, charged %v", s.PruneStage, s.ChargeBudget)
				}
			}},
		{name: "full jitter grows with retries", in: func(p *PlanInput) { p.Class = failure.ClassBodyError; p.Retries = 3 },
			budget: 1, kind: StepRetry, decision: "retry", delay: 2 * time.Second, model: "qwen-72b"},
		{name: "full jitter is capped", in: func(p *PlanInput) { p.Class = failure.ClassBodyError; p.Retries = 10; p.U = 0.999 },
			budget: 1, kind: StepRetry, decision: "retry", delay: 7992 * time.Millisecond, model: "qwen-72b"},
		{name: "read timeout switches after one failure", in: func(p *PlanInput) { p.Class = failure.ClassReadTimeout },
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b"},
		{name: "server error retries once on the model", in: func(p *PlanInput) { p.Class = failure.ClassServerError },
			budget: 1, kind: StepRetry, decision: "retry", delay: 250 * time.Millisecond, model: "qwen-72b"},
		{name: "server error switches after the second failure", in: func(p *PlanInput) { p.Class = failure.ClassServerError; p.ClassFailuresOnModel = 2 },
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b"},
		{name: "queue full switches after 200 ms", in: func(p *PlanInput) { p.Class = failure.ClassQueueFull },
			budget: 1, kind: StepSwitch, decision: "switch_model", delay: 200 * time.Millisecond, model: "qwen-14b"},
		{name: "rate limited waits Retry-After exactly", in: func(p *PlanInput) {
			p.Class, p.RetryAfter, p.HasRetryAfter = failure.ClassRateLimited, 2300*time.Millisecond, true
		}, budget: 1, kind: StepRetry, decision: "wait retry-after", delay: 2300 * time.Millisecond, model: "qwen-72b"},
		{name: "rate limited beyond the cap switches at once", in: func(p *PlanInput) {
			p.Class, p.RetryAfter, p.HasRetryAfter = failure.ClassRateLimited, 61*time.Second, true
		}, budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b", reason: "beyond the"},
		{name: "rate limited beyond the deadline switches", in: func(p *PlanInput) {
			p.Class, p.RetryAfter, p.HasRetryAfter, p.Elapsed = failure.ClassRateLimited, 10*time.Second, true, 50*time.Second
		}, budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b", reason: "deadline"},
		{name: "context length keeps 3 rounds, no wait", in: func(p *PlanInput) { p.Class = failure.ClassContextLengthExceeded },
			budget: 1, kind: StepRetry, decision: "prune+resend", model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.KeepRounds != 3 {
					t.Errorf("KeepRounds = %d", s.KeepRounds)
				}
			}},
		{name: "pruning never grows back on a later retry", in: func(p *PlanInput) { p.Class = failure.ClassBodyError; p.KeepRounds = 3; p.PruneStage = 2 },
			budget: 1, kind: StepRetry, decision: "retry", delay: 250 * time.Millisecond, model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.KeepRounds != 3 || s.PruneStage != 2 {
					t.Errorf("KeepRounds %d, stage %d", s.KeepRounds, s.PruneStage)
				}
			}},
		{name: "output truncated raises max_tokens", in: func(p *PlanInput) { p.Class = failure.ClassOutputTruncated; p.MaxTokens = 512 },
			budget: 1, kind: StepRetry, decision: "more tokens+retry", delay: 500 * time.Millisecond, model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.MaxTokens != 768 || s.Temperature == nil || *s.Temperature != 0.3 {
					t.Errorf("max_tokens %d, temperature %v", s.MaxTokens, s.Temperature)
				}
			}},
		{name: "output truncated at the max_tokens limit switches", in: func(p *PlanInput) { p.Class = failure.ClassOutputTruncated; p.MaxTokens = 32768 },
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b", reason: "limit"},
		{name: "maintenance falls back", in: func(p *PlanInput) { p.Class = failure.ClassServiceUnavailable },
			budget: 1, kind: StepFallback, decision: "fallback"},
		{name: "content filter falls back", in: func(p *PlanInput) { p.Class = failure.ClassContentFilter },
			budget: 1, kind: StepFallback, decision: "fallback"},
		{name: "invalid request fails", in: func(p *PlanInput) { p.Class = failure.ClassInvalidRequest },
			budget: 1, kind: StepFail, decision: "fail"},
		{name: "auth switches", in: func(p *PlanInput) { p.Class = failure.ClassAuth },
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b"},
		{name: "model not found switches", in: func(p *PlanInput) { p.Class = failure.ClassModelNotFound },
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b"},
		{name: "connect switches", in: func(p *PlanInput) { p.Class = failure.ClassConnect },
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b"},
		{name: "worker lost resends, uncharged", in: func(p *PlanInput) { p.Class = failure.ClassWorkerLost },
			budget: 0, kind: StepResend, decision: "resend", model: "qwen-72b"},
		{name: "worker lost twice already switches", in: func(p *PlanInput) { p.Class = failure.ClassWorkerLost; p.ClassRetries = 2 },
			budget: 0, kind: StepSwitch, decision: "switch_model", model: "qwen-14b"},
		{name: "budget exhausted: next model at once", in: func(p *PlanInput) { p.Class = failure.ClassBodyError },
			budget: 0, kind: StepSwitch, decision: "switch_model", model: "qwen-14b", reason: "retry budget exhausted",
			check: func(t *testing.T, s Step) {
				if !s.BudgetRefused || s.ChargeBudget {
					t.Errorf("refused %v, charged %v", s.BudgetRefused, s.ChargeBudget)
				}
			}},
		{name: "budget exhausted and no model left: fallback", in: func(p *PlanInput) { p.Class = failure.ClassBodyError; p.NextModel = "" },
			budget: 0, kind: StepFallback, decision: "fallback", reason: "retry budget exhausted"},
		{name: "open breakers leave no model: fallback", in: func(p *PlanInput) { p.Class = failure.ClassQueueFull; p.NextModel = "" },
			budget: 1, kind: StepFallback, decision: "fallback", reason: "no other model"},
		{name: "attempts cap", in: func(p *PlanInput) { p.Class = failure.ClassBodyError; p.Attempts = 4 },
			budget: 1, kind: StepFallback, decision: "fallback", reason: "attempts cap reached (4/4)"},
		{name: "deadline reserve: no time for another attempt", in: func(p *PlanInput) { p.Class = failure.ClassBodyError; p.Elapsed = 57 * time.Second; p.NextModel = "" },
			budget: 1, kind: StepFallback, decision: "fallback", reason: "deadline"},
		{name: "class breaker open", in: func(p *PlanInput) { p.Class = failure.ClassTimeout; p.ClassAllowed = false },
			budget: 1, kind: StepFallback, decision: "fallback", reason: "class breaker"},
		{name: "business rule forbids retries", in: func(p *PlanInput) { p.Class = failure.ClassTimeout; p.NoRetry = true },
			budget: 1, kind: StepFallback, decision: "fallback", reason: "business rule"},
		{name: "class max reached switches", in: func(p *PlanInput) {
			p.Class = failure.ClassRateLimited
			p.ClassRetries = 1
			p.HasRetryAfter = true
			p.RetryAfter = time.Second
		},
			budget: 1, kind: StepSwitch, decision: "switch_model", model: "qwen-14b", reason: "max 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.in(&in)
			b := &fixedBudget{left: tc.budget}
			s := Plan(cfg, in, b, now)
			if s.Kind != tc.kind || s.Decision != tc.decision || s.Delay != tc.delay || s.Model != tc.model {
				t.Fatalf("got %s/%s delay %v model %q (%s); want %s/%s delay %v model %q",
					s.Kind, s.Decision, s.Delay, s.Model, s.Reason, tc.kind, tc.decision, tc.delay, tc.model)
			}
			if s.Reason == "" || !strings.Contains(s.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", s.Reason, tc.reason)
			}
			if s.Kind == StepResend && b.asked > 0 {
				t.Error("a resend asked the retry budget")
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}
