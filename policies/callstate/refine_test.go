package callstate

import (
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestNextRefines: output_truncated continues the partial answer where the
// model can (its continuation) and regenerates it where it cannot or there
// is none; context_length_exceeded with summarize asks for a summary of the
// dropped rounds. Both flags last one attempt.
func TestNextRefines(t *testing.T) {
	withAction := func(a config.Action) *config.Config {
		cfg := config.DefaultConfig() // qwen-72b: vllm, llama-8b: none
		cp := cfg.Classes[failure.OutputTruncated]
		cp.Action = a
		cfg.Classes[failure.OutputTruncated] = cp
		cl := cfg.Classes[failure.ContextLengthExceeded]
		cl.Summarize = true
		cfg.Classes[failure.ContextLengthExceeded] = cl
		return cfg
	}
	tests := []struct {
		name      string
		action    config.Action
		model     string
		class     failure.Class
		partial   int
		maxTokens int
		decision  string
		reason    string
		cont, sum bool
		tokens    int
	}{
		{"continue on a model that can", config.ActionContinue, "qwen-72b", failure.OutputTruncated, 300, 300, "continue", "qwen-72b continues the 300 token(s) it wrote, up to 556 new token(s)", true, false, 556},
		{"continue without a max_tokens: the default sent + 256", config.ActionContinue, "qwen-72b", failure.OutputTruncated, 128, 0, "continue", "up to 4352 new token(s)", true, false, 4352},
		{"continue on a model that cannot: regenerate", config.ActionContinue, "llama-8b", failure.OutputTruncated, 300, 300, "more tokens+retry", "llama-8b cannot continue the 300 token(s) it wrote", false, false, 556},
		{"continue with no text (reasoning only): regenerate", config.ActionContinue, "qwen-72b", failure.OutputTruncated, 0, 300, "more tokens+retry", "max_tokens 300→556", false, false, 556},
		{"bump_tokens still regenerates", config.ActionBumpTokens, "qwen-72b", failure.OutputTruncated, 300, 300, "more tokens+retry", "max_tokens 300→556", false, false, 556},
		{"context too long: prune, summarize, resend", config.ActionContinue, "qwen-72b", failure.ContextLengthExceeded, 0, 0, "prune+summary+resend", "replaced by their summary", false, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New("", Shape{MaxTokens: tc.maxTokens}, 60*time.Second, false)
			s.Model = tc.model
			st := Next(withAction(tc.action), s, Outcome{Class: tc.class, Elapsed: time.Second, Partial: tc.partial}, Verdicts{ClassAllowed: true, U: 0.5})
			sh := st.Next.Shape
			if st.Kind != Retry || st.Decision != tc.decision || !strings.Contains(st.Reason, tc.reason) || sh.Continue != tc.cont || sh.Summarize != tc.sum || sh.MaxTokens != tc.tokens {
				t.Fatalf("got %s %q (%s), shape %+v; want retry %q with %q, continue %v, summarize %v, max_tokens %d",
					st.Kind, st.Decision, st.Reason, sh, tc.decision, tc.reason, tc.cont, tc.sum, tc.tokens)
			}
			// The next failure forgets them.
			after := Next(withAction(tc.action), st.Next, Outcome{Class: failure.ServerError, Elapsed: 2 * time.Second}, Verdicts{ClassAllowed: true, U: 0.5})
			if after.Next.Shape.Continue || after.Next.Shape.Summarize {
				t.Errorf("a server_error retry still asks for %+v", after.Next.Shape)
			}
		})
	}
}

// TestNextNeverRaisesTheCallersLimit: an unusable answer (empty, reasoning
// only) at the caller's own max_tokens is not retried with a larger limit:
// another model may answer within it, and no step ever asks for more.
func TestNextNeverRaisesTheCallersLimit(t *testing.T) {
	withAction := func(a config.Action) *config.Config {
		cfg := config.DefaultConfig()
		cp := cfg.Classes[failure.OutputTruncated]
		cp.Action = a
		cfg.Classes[failure.OutputTruncated] = cp
		return cfg
	}
	for _, action := range []config.Action{config.ActionBumpTokens, config.ActionContinue} {
		s := New("", Shape{MaxTokens: 300}, 60*time.Second, false)
		s.Model = "qwen-72b"
		st := Next(withAction(action), s, Outcome{Class: failure.OutputTruncated, Elapsed: time.Second, CallerLimit: true}, Verdicts{ClassAllowed: true, U: 0.5})
		if st.Kind != Switch || st.Next.Shape.MaxTokens != 300 {
			t.Fatalf("%s: got %s %q (%s), max_tokens %d; want a switch within the caller's 300", action, st.Kind, st.Decision, st.Reason, st.Next.Shape.MaxTokens)
		}
		if !strings.Contains(st.Reason, "max_tokens is already at the 300 limit") {
			t.Errorf("%s: reason %q does not say the limit is the caller's to keep", action, st.Reason)
		}
	}
}
