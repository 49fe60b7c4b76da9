package callstate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestNext decides one failed attempt of a call on qwen-72b (the first
// rung) one second into a 60 s deadline, with the default policy.
func TestNext(t *testing.T) {
	cfg := config.DefaultConfig() // every rung on one endpoint, with one key
	// two: qwen-14b on an endpoint of its own, with a key of its own.
	two := config.DefaultConfig()
	two.Models[1].BaseURL, two.Models[1].APIKeyEnv = "http://10.0.0.2:8000/v1", "OTHER_KEY"
	first := cfg.Models[0].Endpoint()
	others := []string{"qwen-14b", "llama-8b"} // tried: qwen-72b is the ladder's last model left
	tests := []struct {
		name     string
		cfg      *config.Config // nil: cfg
		in       func(s *State, o *Outcome, v *Verdicts)
		noBudget bool // the first rung's endpoint has no retry left
		kind     Kind
		decision string
		delay    time.Duration
		model    string
		reason   string
		check    func(t *testing.T, s Step)
	}{
		{name: "timeout prunes one stage and waits full jitter", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Timeout },
			kind: Retry, decision: "prune+retry", delay: 250 * time.Millisecond, model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.Next.Shape.PruneStage != 1 || s.BudgetRefused {
					t.Errorf("stage %d, budget refused %v", s.Next.Shape.PruneStage, s.BudgetRefused)
				}
			}},
		{name: "full jitter grows with retries", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.BodyError; s.Backoffs = 3 },
			kind: Retry, decision: "retry", delay: 2 * time.Second, model: "qwen-72b"},
		{name: "full jitter is capped", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.BodyError; s.Backoffs = 10; v.U = 0.999 },
			kind: Retry, decision: "retry", delay: 7992 * time.Millisecond, model: "qwen-72b"},
		{name: "bad tool call: repair on the model at once, cooler, told what was wrong", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.Detail = failure.BadToolCall, `tool_calls[0] calls "delete_db", which was not offered (offered: lookup_order)`
			hot := 0.9
			s.Shape.Temperature = &hot
		},
			kind: Retry, decision: "repair", model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				sh := s.Next.Shape
				if sh.Temperature == nil || *sh.Temperature != 0.3 || !strings.Contains(sh.Repair, `calls "delete_db", which was not offered`) || !strings.Contains(sh.Repair, "Call only the tools offered") {
					t.Errorf("shape %+v (temperature %v)", sh, sh.Temperature)
				}
			}},
		{name: "schema mismatch: a cooler request keeps its temperature", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.Detail = failure.SchemaMismatch, "at /order_id: got number, want string"
			cold := 0.1
			s.Shape.Temperature = &cold
		},
			kind: Retry, decision: "repair", model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if sh := s.Next.Shape; *sh.Temperature != 0.1 || !strings.Contains(sh.Repair, "at /order_id: got number, want string. Reply with only JSON") {
					t.Errorf("shape %+v", sh)
				}
			}},
		{name: "schema mismatch after its repair: switch, the instruction dropped", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.Detail = failure.SchemaMismatch, "the answer is not valid JSON"
			s.ClassRetries = map[failure.Class]int{failure.SchemaMismatch: 1}
			s.Shape.Repair = "Your previous reply could not be used: …"
		},
			kind: Switch, decision: "switch_model", model: "qwen-14b",
			check: func(t *testing.T, s Step) {
				if s.Next.Shape.Repair != "" {
					t.Errorf("the switch keeps the repair instruction %q", s.Next.Shape.Repair)
				}
			}},
		{name: "a switch skips the rungs that cannot serve the request", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.ModelNotFound
			v.Unable = []string{"qwen-14b"}
		},
			kind: Switch, decision: "switch_model", model: "llama-8b"},
		{name: "no rung can serve it after the failed one: fall back, no switch named", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.ModelNotFound
			v.Unable = []string{"qwen-14b", "llama-8b"}
		},
			kind: Fallback, decision: "fallback", reason: "no other model available (qwen-14b, llama-8b cannot serve the request: it lacks a capability the request needs)"},
		{name: "429 on one key of a pool: another key at once, no wait", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.RetryAfter, o.HasRetryAfter = failure.RateLimited, 5*time.Second, true
			s.Key, v.OtherKey = "KEY_A", "KEY_B"
		},
			kind: Retry, decision: "retry (another key)", model: "qwen-72b", reason: "rate_limited on key KEY_A of qwen-72b: key KEY_B at once, no wait"},
		{name: "auth on one key of a pool: a model that shares the pool may take the call on another key", cfg: func() *config.Config {
			c := config.DefaultConfig()
			c.Models[0].APIKeyEnvs = []string{"KEY_A", "KEY_B"}
			c.Models[1].APIKeyEnvs = []string{"KEY_A", "KEY_B"}
			return c
		}(), in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Auth; s.Key = "KEY_A" },
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "auth on a pooled key: a model with only that key on the endpoint is passed by", cfg: func() *config.Config {
			c := config.DefaultConfig()
			c.Models[0].APIKeyEnvs = []string{"KEY_A", "KEY_B"}
			c.Models[1].APIKeyEnv = "KEY_A"
			return c
		}(), in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Auth; s.Key = "KEY_A" },
			kind: Switch, decision: "switch_model", model: "llama-8b"},
		{name: "read timeout switches after one failure", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ReadTimeout },
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "server error retries once on the model", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ServerError },
			kind: Retry, decision: "retry", delay: 250 * time.Millisecond, model: "qwen-72b"},
		{name: "server error switches after the second failure", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.ServerError
			s.Failures = map[string]map[failure.Class]int{"qwen-72b": {failure.ServerError: 1}}
		},
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "queue full: the ladder's next model at once, its queue its own", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, v.MaxWait = failure.QueueFull, 10*time.Second
		},
			kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "queue_full on qwen-72b: its queue is full: switch to qwen-14b"},
		{name: "queue full on the last model: the same request after the 1 s hold, released with jitter", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, v.MaxWait = failure.QueueFull, 10*time.Second
			s.Tried = others
		},
			kind: Resend, decision: "hold+resend", delay: 1250 * time.Millisecond, model: "qwen-72b",
			reason: "queue_full on qwen-72b: backpressure, held for 1.00 s (rate_limit.hold); resend 1/6 after 1.25 s, released with jitter",
			check: func(t *testing.T, s Step) {
				n := s.Next
				if s.Wait.Reason != HoldWait || n.Held != 1 || n.Refused != 1 || n.Waited != 1250*time.Millisecond || n.N != 1 || !n.From.Resend || n.Shape != (Shape{}) {
					t.Errorf("wait %s, held %d, refused %d, waited %v, n %d, from %+v, shape %+v; want hold, 1, 1, 1.25 s, 1, a resend, unpruned",
						s.Wait.Reason, n.Held, n.Refused, n.Waited, n.N, n.From, n.Shape)
				}
			}},
		{name: "queue full with Retry-After: the hold is the Retry-After", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.RetryAfter, o.HasRetryAfter, v.MaxWait, v.U = failure.QueueFull, 2*time.Second, true, 10*time.Second, 0
			s.Tried = others
		},
			kind: Resend, decision: "hold+resend", delay: 2 * time.Second, model: "qwen-72b", reason: "held for 2.00 s (Retry-After)"},
		{name: "queue full is no attempt against the cap", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, v.MaxWait = failure.QueueFull, 10*time.Second
			s.Requests = 4 // three attempts and this refusal
			s.Tried = others
		},
			kind: Resend, decision: "hold+resend", delay: 1250 * time.Millisecond, model: "qwen-72b"},
		{name: "queue full after six resends on the last model: fallback", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, v.MaxWait = failure.QueueFull, 10*time.Second
			s.Held = 6
			s.Tried = others
		},
			kind: Fallback, decision: "fallback", reason: "resent 6 time(s) after a hold already (max 6); no other model"},
		{name: "queue full on the last model: a hold past call.max_wait, the fallback", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, v.MaxWait = failure.QueueFull, 3*time.Second
			s.Waited = 2 * time.Second
			s.Tried = others
		},
			kind: Fallback, decision: "fallback", reason: "would pass call.max_wait (3.00 s, 2.00 s waited)"},
		{name: "queue full on the last model: no call.max_wait, the deadline bounds the hold", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.QueueFull
			s.Tried = others
		},
			kind: Resend, decision: "hold+resend", model: "qwen-72b", delay: 1250 * time.Millisecond, reason: "resend 1/6 after 1.25 s"},
		{name: "queue full on the last model: a hold past the deadline, the fallback", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.Elapsed, v.MaxWait = failure.QueueFull, 56*time.Second, 10*time.Second
			s.Tried = others
		},
			kind: Fallback, decision: "fallback", reason: "would not leave time for an attempt before the deadline"},
		{name: "queue full on the last model: Retry-After beyond the cap, the fallback", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.RetryAfter, o.HasRetryAfter, v.MaxWait = failure.QueueFull, 2*time.Minute, true, 10*time.Minute
			s.Tried = others
		},
			kind: Fallback, decision: "fallback", reason: "beyond the 60.00 s cap"},
		{name: "queue full on the last model, its endpoint's budget spent: no resend", cfg: two, noBudget: true, in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, v.MaxWait = failure.QueueFull, 10*time.Second
			s.Tried = others
		},
			kind: Fallback, decision: "fallback", reason: "the retry budget of the endpoint of qwen-72b is spent and no other model may take the call",
			check: func(t *testing.T, s Step) {
				if !s.BudgetRefused || s.Next.Held != 0 {
					t.Errorf("budget refused %v, held %d; want true, 0 (no resend made)", s.BudgetRefused, s.Next.Held)
				}
			}},
		{name: "refusals of backpressure are no attempts against the cap", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			s.Requests, s.Refused = 4, 1
		},
			kind: Retry, decision: "retry", delay: 250 * time.Millisecond, model: "qwen-72b"},
		{name: "the cap after refusals says how many were left out", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			s.Requests, s.Refused = 6, 2
		},
			kind: Fallback, decision: "fallback", reason: "attempts cap reached (4/4 upstream requests; 2 more refused as backpressure)"},
		{name: "refusals left out of the cap are bounded", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			s.Requests, s.Refused = 14, 12
		},
			kind: Fallback, decision: "fallback", reason: "attempts cap reached (4/4 upstream requests; 10 more refused as backpressure)"},
		{name: "rate limited waits Retry-After exactly", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.RetryAfter, o.HasRetryAfter = failure.RateLimited, 2300*time.Millisecond, true
		}, kind: Retry, decision: "wait retry-after", delay: 2300 * time.Millisecond, model: "qwen-72b"},
		{name: "rate limited beyond the cap switches at once", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.RetryAfter, o.HasRetryAfter = failure.RateLimited, 61*time.Second, true
		}, kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "beyond the"},
		{name: "rate limited beyond the deadline switches", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.RetryAfter, o.HasRetryAfter, o.Elapsed = failure.RateLimited, 10*time.Second, true, 50*time.Second
		}, kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "deadline"},
		{name: "context length keeps 3 rounds, no wait", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ContextLengthExceeded },
			kind: Retry, decision: "prune+resend", model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.Next.Shape.KeepRounds != 3 {
					t.Errorf("KeepRounds = %d", s.Next.Shape.KeepRounds)
				}
			}},
		{name: "pruning never grows back on a later retry", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			s.Shape.KeepRounds = 3
			s.Shape.PruneStage = 2
		},
			kind: Retry, decision: "retry", delay: 250 * time.Millisecond, model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.Next.Shape.KeepRounds != 3 || s.Next.Shape.PruneStage != 2 {
					t.Errorf("KeepRounds %d, stage %d", s.Next.Shape.KeepRounds, s.Next.Shape.PruneStage)
				}
			}},
		{name: "output truncated raises max_tokens", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.OutputTruncated; s.Shape.MaxTokens = 512 },
			kind: Retry, decision: "more tokens+retry", delay: 500 * time.Millisecond, model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.Next.Shape.MaxTokens != 768 || s.Next.Shape.Temperature == nil || *s.Next.Shape.Temperature != 0.3 {
					t.Errorf("max_tokens %d, temperature %v", s.Next.Shape.MaxTokens, s.Next.Shape.Temperature)
				}
			}},
		{name: "output truncated at the max_tokens limit switches", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.OutputTruncated; s.Shape.MaxTokens = 32768 },
			kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "limit"},
		{name: "maintenance falls back", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ServiceUnavailable },
			kind: Fallback, decision: "fallback"},
		{name: "content filter falls back", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ContentFilter },
			kind: Fallback, decision: "fallback"},
		{name: "invalid request fails", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.InvalidRequest },
			kind: Fail, decision: "fail"},
		{name: "auth never sends the refused key to the same endpoint again", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Auth },
			kind: Fallback, decision: "fallback", reason: "refused the key of qwen-72b"},
		{name: "auth switches to a rung with another key", cfg: two, in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Auth },
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "model not found switches", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ModelNotFound },
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "connect switches", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Connect },
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "worker lost resends", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.WorkerLost },
			kind: Resend, decision: "resend", model: "qwen-72b"},
		{name: "worker lost twice already switches", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.WorkerLost
			s.ClassRetries = map[failure.Class]int{failure.WorkerLost: 2}
		},
			kind: Switch, decision: "switch_model", model: "qwen-14b"},
		{name: "worker lost on a spent endpoint: resent all the same, the request paid for when first sent", noBudget: true,
			in:   func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.WorkerLost },
			kind: Resend, decision: "resend", model: "qwen-72b",
			check: func(t *testing.T, s Step) {
				if s.Next.LostWithWorker != "qwen-72b" {
					t.Errorf("LostWithWorker %q, want qwen-72b", s.Next.LostWithWorker)
				}
			}},
		{name: "a retry on a spent endpoint after a lost one: refused", noBudget: true,
			in: func(s *State, o *Outcome, v *Verdicts) {
				s.LostWithWorker = "qwen-72b" // the attempt before was lost; this one failed upstream
				o.Class = failure.BodyError
			},
			kind: Fallback, decision: "fallback", reason: "retry budget of the endpoint of qwen-72b is spent"},
		{name: "budget spent on the endpoint: a model on another endpoint at once", cfg: two, noBudget: true,
			in:   func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.BodyError },
			kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "the retry budget of the endpoint of qwen-72b is spent: switch to qwen-14b",
			check: func(t *testing.T, s Step) {
				if !s.BudgetRefused {
					t.Error("BudgetRefused not set")
				}
			}},
		{name: "budget spent: a switch never lands on the same endpoint", noBudget: true, in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.ReadTimeout },
			kind: Fallback, decision: "fallback", reason: "retry budget of the endpoint of qwen-14b is spent and no other model may take the call",
			check: func(t *testing.T, s Step) {
				if !s.BudgetRefused {
					t.Error("BudgetRefused not set")
				}
			}},
		{name: "budget exhausted and no model left: fallback", cfg: two, in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			v.Open = []string{"qwen-14b", "llama-8b"}
		},
			noBudget: true, kind: Fallback, decision: "fallback", reason: "retry budget",
			check: func(t *testing.T, s Step) {
				if !s.NoModel {
					t.Error("NoModel not set: the worker cannot offer a wait for the open breakers' trials")
				}
			}},
		{name: "open breakers leave no model: fallback", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.ModelNotFound
			v.Open = []string{"qwen-14b", "llama-8b"}
		},
			kind: Fallback, decision: "fallback", reason: "no other model",
			check: func(t *testing.T, s Step) {
				if !s.NoModel {
					t.Error("NoModel not set: the worker cannot offer a wait for the open breakers' trials")
				}
			}},
		{name: "the attempts cap is no want of a model", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			s.Requests = 4
			v.Open = []string{"qwen-14b", "llama-8b"}
		},
			kind: Fallback, decision: "fallback", reason: "attempts cap",
			check: func(t *testing.T, s Step) {
				if s.NoModel {
					t.Error("NoModel set on the attempts cap: a wait would lead to a request over the cap")
				}
			}},
		{name: "attempts cap", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.BodyError; s.Requests = 4 },
			kind: Fallback, decision: "fallback", reason: "attempts cap reached (4/4 upstream requests)"},
		{name: "connect resends count against the cap", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class, o.ConnectResends = failure.BodyError, 2
			s.Requests = 2
		},
			kind: Fallback, decision: "fallback", reason: "attempts cap reached (4/4"},
		{name: "the cap holds for resends", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.WorkerLost; s.Requests = 4 },
			kind: Fallback, decision: "fallback", reason: "attempts cap"},
		{name: "deadline reserve: no time for another attempt", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.BodyError
			o.Elapsed = 57 * time.Second
			v.Open = []string{"qwen-14b", "llama-8b"}
		},
			kind: Fallback, decision: "fallback", reason: "deadline"},
		{name: "class breaker open: no retry of the class, the next rung instead", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.RateLimited
			o.HasRetryAfter, o.RetryAfter = true, 800*time.Millisecond
			v.ClassAllowed = false
		},
			kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "class breaker"},
		{name: "class breaker open, no rung left", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.Timeout
			s.Tried = append(s.Tried, "qwen-14b", "llama-8b")
			v.ClassAllowed = false
		},
			kind: Fallback, decision: "fallback", reason: "class breaker"},
		{name: "business rule forbids retries", in: func(s *State, o *Outcome, v *Verdicts) { o.Class = failure.Timeout; s.NoRetry = true },
			kind: Fallback, decision: "fallback", reason: "business rule"},
		{name: "class max reached switches", in: func(s *State, o *Outcome, v *Verdicts) {
			o.Class = failure.RateLimited
			s.ClassRetries = map[failure.Class]int{failure.RateLimited: 1}
			o.HasRetryAfter = true
			o.RetryAfter = time.Second
		},
			kind: Switch, decision: "switch_model", model: "qwen-14b", reason: "max 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New("", Shape{}, 60*time.Second, false)
			s.Model = "qwen-72b"
			s = s.SentTo(first) // the failed attempt went there
			o := Outcome{Elapsed: time.Second}
			v := Verdicts{ClassAllowed: true, U: 0.5}
			if tc.noBudget {
				v.Spent = []string{first}
			}
			tc.in(&s, &o, &v)
			before := s.clone()
			c := cfg
			if tc.cfg != nil {
				c = tc.cfg
			}
			st := Next(c, s, o, v)
			model := st.Next.Model
			if st.Kind == Fallback || st.Kind == Fail {
				model = ""
			}
			if st.Kind != tc.kind || st.Decision != tc.decision || st.Wait.Delay != tc.delay || model != tc.model {
				t.Fatalf("got %s/%s delay %v model %q (%s); want %s/%s delay %v model %q",
					st.Kind, st.Decision, st.Wait.Delay, model, st.Reason, tc.kind, tc.decision, tc.delay, tc.model)
			}
			if st.Reason == "" || !strings.Contains(st.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", st.Reason, tc.reason)
			}
			if strings.Contains(st.Reason, "://") {
				t.Errorf("reason %q names an endpoint's address: tenants read it", st.Reason)
			}
			// (A resend of an attempt lost with its worker is that attempt,
			// paid for when first sent.)
			if tc.noBudget && o.Class != failure.WorkerLost && (st.Kind == Retry || st.Kind == Resend || st.Kind == Switch && c.Endpoint(st.Next.Model) == first) {
				t.Errorf("a %s step to %s, whose endpoint has no retry left", st.Kind, st.Next.Model)
			}
			if st.Next.FailuresOn("qwen-72b", o.Class) != before.FailuresOn("qwen-72b", o.Class)+1 {
				t.Errorf("failure of %s on qwen-72b not counted: %v", o.Class, st.Next.Failures)
			}
			if !reflect.DeepEqual(s.clone(), before) {
				t.Errorf("Next changed its input state:\n got %+v\nwant %+v", s, before)
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

// TestNextSteps steps one call through a sequence of failed attempts at
// fixed instants, each decision fed the state the previous one returned,
// in the style of golang.org/x/time/rate's tests.
func TestNextSteps(t *testing.T) {
	cfg := config.DefaultConfig()
	type want struct {
		kind     Kind
		wait     Wait
		model    string
		n        int
		upstream int
		backoffs int
		pending  failure.Class
		from     string
		retries  int // ClassRetries of the step's class
	}
	steps := []struct {
		at    time.Duration
		class failure.Class
		ra    time.Duration // Retry-After, 0: none
		want  want
	}{
		// The first rung answers 500: retry it after full jitter (U 0.5 of 500 ms).
		{1 * time.Second, failure.ServerError, 0,
			want{Retry, Wait{250 * time.Millisecond, Backoff}, "qwen-72b", 2, 1, 1, failure.ServerError, "1 (server_error)", 1}},
		// The worker running the retry dies: the same attempt again, at
		// once, still the retry of server_error, not counted upstream.
		{2 * time.Second, failure.WorkerLost, 0,
			want{Resend, Wait{}, "qwen-72b", 2, 1, 1, failure.ServerError, "2 (worker_lost)", 1}},
		// The resend fails with 500 again: the second on this model switches.
		{3 * time.Second, failure.ServerError, 0,
			want{Switch, Wait{}, "qwen-14b", 3, 2, 1, failure.None, "2 (server_error)", 1}},
		// 429 with Retry-After 1.5 s on the fourth upstream request (the
		// resend counts): a refusal of backpressure is no attempt against
		// the cap, so the Retry-After is waited for.
		{4 * time.Second, failure.RateLimited, 1500 * time.Millisecond,
			want{Retry, Wait{1500 * time.Millisecond, RetryAfter}, "qwen-14b", 4, 3, 1, failure.RateLimited, "3 (rate_limited)", 1}},
		// That retry, the fifth request, is the fourth attempt: the cap
		// sends the call to the fallback.
		{7 * time.Second, failure.BodyError, 0,
			want{Fallback, Wait{}, "qwen-14b", 4, 4, 1, failure.None, "3 (rate_limited)", 0}},
	}
	s := New("", Shape{}, 60*time.Second, false)
	s.Model = "qwen-72b"
	for i, st := range steps {
		out := Outcome{Class: st.class, Elapsed: st.at, RetryAfter: st.ra, HasRetryAfter: st.ra > 0}
		s = s.Start(s.Model) // PrepareAttempt
		step := Next(cfg, s, out, Verdicts{ClassAllowed: true, U: 0.5})
		s = step.Next
		got := want{step.Kind, step.Wait, s.Model, s.N, s.Upstream, s.Backoffs, s.Pending, s.From.String(), s.ClassRetries[st.class]}
		if got != st.want {
			t.Fatalf("step %d (%s at %v): got %+v (%s), want %+v", i, st.class, st.at, got, step.Reason, st.want)
		}
	}
	if want := []failure.Class{failure.ServerError, failure.WorkerLost, failure.RateLimited, failure.BodyError}; strings.Join(classNames(s.Classes), ",") != strings.Join(classNames(want), ",") {
		t.Errorf("classes %v, want %v", s.Classes, want)
	}
	if len(s.Tried) != 1 || s.Tried[0] != "qwen-72b" {
		t.Errorf("tried %v, want [qwen-72b]", s.Tried)
	}
}

// TestNextOpenBreakers: a switch never lands on a model whose breaker is
// open, and with every other rung open the call falls back.
func TestNextOpenBreakers(t *testing.T) {
	cfg := config.DefaultConfig()
	s := New("", Shape{}, 60*time.Second, false)
	s.Model = "qwen-72b"
	out := Outcome{Class: failure.Connect, Elapsed: time.Second}
	step := Next(cfg, s, out, Verdicts{ClassAllowed: true, Open: []string{"qwen-14b"}})
	if step.Kind != Switch || step.Next.Model != "llama-8b" || step.Wait != (Wait{}) {
		t.Fatalf("got %s to %q after %+v, want a switch to llama-8b at once", step.Kind, step.Next.Model, step.Wait)
	}
	step = Next(cfg, s, out, Verdicts{ClassAllowed: true, Open: []string{"qwen-14b", "llama-8b"}})
	if step.Kind != Fallback {
		t.Fatalf("got %s, want fallback with every other breaker open", step.Kind)
	}
}

func classNames(cs []failure.Class) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// walk feeds Next one failed attempt after another at one-second
// instants, the state passed through JSON between steps as history does,
// and returns the steps.
func walk(t *testing.T, cfg *config.Config, s State, outs ...Outcome) []Step {
	t.Helper()
	var steps []Step
	for i, out := range outs {
		if out.Elapsed == 0 {
			out.Elapsed = time.Duration(i+1) * time.Second
		}
		s = s.Start(s.Model) // PrepareAttempt
		step := Next(cfg, s, out, Verdicts{ClassAllowed: true, U: 0.5})
		b, err := json.Marshal(step)
		if err != nil {
			t.Fatal(err)
		}
		var back Step
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Kind, step.Kind) || back.Wait != step.Wait || !reflect.DeepEqual(back.Next.ClassRetries, step.Next.ClassRetries) {
			t.Fatalf("step %d does not survive JSON: %s", i, b)
		}
		steps = append(steps, back)
		s = back.Next
	}
	return steps
}

// TestNextLimitsBySteps reaches each class's limit by stepping, not by a
// preset counter.
func TestNextLimitsBySteps(t *testing.T) {
	cfg := config.DefaultConfig()
	start := New("", Shape{}, 60*time.Second, false)
	start.Model = "qwen-72b"
	kinds := func(steps []Step) string {
		var k []string
		for _, s := range steps {
			k = append(k, s.Kind.String())
		}
		return strings.Join(k, ",")
	}

	t.Run("worker_lost resends twice, then switches and forgets the pending retry", func(t *testing.T) {
		cfg := config.DefaultConfig()
		cfg.Call.MaxAttempts = 6 // the cap would stop the fourth request
		steps := walk(t, cfg, start,
			Outcome{Class: failure.Timeout}, Outcome{Class: failure.WorkerLost},
			Outcome{Class: failure.WorkerLost}, Outcome{Class: failure.WorkerLost})
		if got := kinds(steps); got != "retry,resend,resend,switch_model" {
			t.Fatalf("kinds %s", got)
		}
		last := steps[3].Next
		if last.Upstream != 1 || last.N != 3 || last.Model != "qwen-14b" {
			t.Errorf("upstream %d, n %d, model %s; want 1, 3, qwen-14b", last.Upstream, last.N, last.Model)
		}
		if steps[2].Next.Pending != failure.Timeout || last.Pending != failure.None {
			t.Errorf("pending %q while resending, %q after the switch; want timeout, none", steps[2].Next.Pending, last.Pending)
		}
	})
	t.Run("rate_limited is retried once, the second switches", func(t *testing.T) {
		ra := Outcome{Class: failure.RateLimited, RetryAfter: time.Second, HasRetryAfter: true}
		steps := walk(t, cfg, start, ra, ra)
		if got := kinds(steps); got != "retry,switch_model" || !strings.Contains(steps[1].Reason, "max 1") {
			t.Fatalf("kinds %s (%s)", got, steps[1].Reason)
		}
	})
	t.Run("an attempt refused before sending is not sent upstream, but counts against the cap", func(t *testing.T) {
		steps := walk(t, cfg, start, Outcome{Class: failure.ContextLengthExceeded, NotSent: true})
		if s := steps[0]; s.Kind != Retry || s.Next.Upstream != 0 || s.Next.Requests != 1 || s.Next.Shape.KeepRounds != 3 {
			t.Fatalf("%s, upstream %d, requests %d, keep %d; want retry, 0, 1, 3", s.Kind, s.Next.Upstream, s.Next.Requests, s.Next.Shape.KeepRounds)
		}
	})
	t.Run("no class loops past the cap, whatever its max", func(t *testing.T) {
		cfg := config.DefaultConfig()
		cp := cfg.Classes[failure.ContextLengthExceeded]
		cp.Max = -1
		cfg.Classes[failure.ContextLengthExceeded] = cp
		var outs []Outcome
		for range 12 {
			outs = append(outs, Outcome{Class: failure.ContextLengthExceeded, NotSent: true})
		}
		steps := walk(t, cfg, start, outs[:4]...)
		if got := kinds(steps); got != "retry,retry,retry,fallback" {
			t.Fatalf("kinds %s", got)
		}
		cfg.Call.MaxAttempts = 1000 // Validate refuses it; HardMaxRequests still holds
		steps = walk(t, cfg, start, outs...)
		if got := kinds(steps); !strings.HasSuffix(got, "fallback") || len(steps) != 12 || steps[HardMaxRequests-1].Kind != Fallback {
			t.Fatalf("kinds %s; want a fallback at request %d", got, HardMaxRequests)
		}
	})
	t.Run("only full-jitter retries raise the backoff exponent", func(t *testing.T) {
		steps := walk(t, cfg, start,
			Outcome{Class: failure.OutputTruncated}, // fixed 500 ms wait
			Outcome{Class: failure.BodyError})       // backoff exponent still 0
		if w := steps[0].Wait; w != (Wait{500 * time.Millisecond, FixedWait}) {
			t.Errorf("first wait %+v", w)
		}
		if w := steps[1].Wait; w != (Wait{250 * time.Millisecond, Backoff}) || steps[1].Next.Backoffs != 1 {
			t.Errorf("second wait %+v, backoffs %d; want 250 ms backoff, 1", w, steps[1].Next.Backoffs)
		}
	})
	t.Run("a skipped model ends the pending retry", func(t *testing.T) {
		s := walk(t, cfg, start, Outcome{Class: failure.Timeout})[0].Next
		if s.Pending != failure.Timeout || s.Skip("qwen-72b", failure.BreakerOpen).Pending != failure.None {
			t.Fatalf("pending %q, after skip %q", s.Pending, s.Skip("qwen-72b", failure.BreakerOpen).Pending)
		}
	})
}

// TestStepJSONNames: kinds and wait reasons are written by name, so a
// recorded step keeps its meaning if the constants are ever reordered.
func TestStepJSONNames(t *testing.T) {
	b, err := json.Marshal(Step{Kind: Switch, Wait: Wait{Delay: time.Second, Reason: FixedWait}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"kind":"switch_model"`) || !strings.Contains(string(b), `"reason":"fixed"`) {
		t.Errorf("step JSON %s", b)
	}
	var k Kind
	if err := json.Unmarshal([]byte(`"teleport"`), &k); err == nil {
		t.Error("an unknown kind decoded without error")
	}
	if err := json.Unmarshal([]byte(`3`), &k); err == nil {
		t.Error("a numbered kind decoded without error")
	}
}

// TestNextDelivered: once text was streamed to the caller, every further
// attempt continues it, or the call ends with it.
func TestNextDelivered(t *testing.T) {
	cfg := config.DefaultConfig() // qwen-72b: vllm, qwen-14b: deepseek, llama-8b: none
	tests := []struct {
		name      string
		model     string
		tried     []string
		class     failure.Class
		delivered int
		kind      Kind
		next      string
		decision  string
		reason    string
	}{
		{"nothing delivered: resume is a plain retry at once", "qwen-72b", nil, failure.StreamBroken, 0, Retry, "qwen-72b", "resume", "at once"},
		{"broken stream on a model that continues: same model", "qwen-72b", nil, failure.StreamBroken, 50, Retry, "qwen-72b", "resume (continue)", "continues the 50 token(s)"},
		{"broken stream on a model that cannot: the next that can", "llama-8b", nil, failure.StreamBroken, 50, Switch, "qwen-72b", "switch_model (continue)", "llama-8b cannot continue"},
		{"no rung left that can continue: end with the text", "llama-8b", []string{"qwen-72b", "qwen-14b"}, failure.StreamBroken, 50, Finish, "llama-8b", "finish", "after 50 token(s)"},
		{"truncated answer: more tokens, continued", "qwen-14b", nil, failure.OutputTruncated, 256, Retry, "qwen-14b", "more tokens+retry (continue)", "continues"},
		{"content filter after text: end with it, never the FAQ", "qwen-72b", nil, failure.ContentFilter, 20, Finish, "qwen-72b", "finish", "20 token(s)"},
		{"worker lost mid-stream: the resend continues", "qwen-72b", nil, failure.WorkerLost, 30, Resend, "qwen-72b", "resend (continue)", "continues"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New("", Shape{}, 60*time.Second, false)
			s.Model, s.Tried = tc.model, tc.tried
			st := Next(cfg, s, Outcome{Class: tc.class, Elapsed: time.Second, Delivered: tc.delivered}, Verdicts{ClassAllowed: true, U: 0.5})
			if st.Kind != tc.kind || st.Next.Model != tc.next || st.Decision != tc.decision || !strings.Contains(st.Reason, tc.reason) {
				t.Fatalf("got %s to %s, %q (%s); want %s to %s, %q with %q", st.Kind, st.Next.Model, st.Decision, st.Reason, tc.kind, tc.next, tc.decision, tc.reason)
			}
			if st.Wait.Delay != 0 && tc.class == failure.StreamBroken {
				t.Errorf("a broken stream waits %v", st.Wait.Delay)
			}
			if st.Next.Delivered != tc.delivered {
				t.Errorf("delivered %d, want %d", st.Next.Delivered, tc.delivered)
			}
		})
	}
}

// TestNextHoldBySteps steps a call whose endpoint refuses as backpressure
// again and again, the state passed through JSON as history does: six
// resends after jittered holds, none an attempt against the cap, then a
// model on another endpoint; a call allowed less waiting resends less.
func TestNextHoldBySteps(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Models = cfg.Models[:1] // qwen-72b alone: a full queue has nowhere else to go
	run := func(maxWait time.Duration, classes ...failure.Class) ([]Step, State) {
		s := New("", Shape{}, 60*time.Second, false)
		s.Model = "qwen-72b"
		at := time.Second
		var steps []Step
		for _, c := range classes {
			s = s.Start(s.Model) // PrepareAttempt
			st := Next(cfg, s, Outcome{Class: c, Elapsed: at}, Verdicts{ClassAllowed: true, U: 0.5, MaxWait: maxWait})
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			var back Step
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if again, _ := json.Marshal(back); string(again) != string(b) {
				t.Fatalf("step does not survive JSON:\n%s\n%s", b, again)
			}
			steps = append(steps, back)
			s = back.Next
			at += back.Wait.Delay + 100*time.Millisecond
		}
		return steps, s
	}
	decisions := func(steps []Step) string {
		var d []string
		for _, s := range steps {
			d = append(d, s.Decision)
		}
		return strings.Join(d, ",")
	}

	qf := failure.QueueFull
	steps, s := run(10*time.Second, qf, qf, qf, qf, qf, qf, qf)
	want := "hold+resend,hold+resend,hold+resend,hold+resend,hold+resend,hold+resend,fallback"
	if got := decisions(steps); got != want {
		t.Fatalf("decisions %s, want %s (%s)", got, want, steps[len(steps)-1].Reason)
	}
	for i, st := range steps[:6] {
		if st.Wait != (Wait{1250 * time.Millisecond, HoldWait}) || st.Next.Model != "qwen-72b" || st.Next.N != 1 {
			t.Errorf("resend %d: wait %+v to %s as attempt %d; want 1.25 s (hold), qwen-72b, 1", i+1, st.Wait, st.Next.Model, st.Next.N)
		}
	}
	if s.Requests != 7 || s.Refused != 7 || s.Attempts() != 0 || s.Held != 6 || s.Waited != 7500*time.Millisecond {
		t.Errorf("requests %d, refused %d, attempts %d, held %d, waited %v; want 7, 7, 0, 6, 7.5 s",
			s.Requests, s.Refused, s.Attempts(), s.Held, s.Waited)
	}

	// A streamed call (call.max_wait_stream 3 s) resends twice.
	steps, _ = run(3*time.Second, qf, qf, qf)
	if got := decisions(steps); got != "hold+resend,hold+resend,fallback" || !strings.Contains(steps[2].Reason, "call.max_wait") {
		t.Fatalf("decisions %s (%s)", got, steps[2].Reason)
	}
}

// TestGrace: an attempt the call's deadline bounds may run into the
// fallback's reserve, all but what the fallback needs, never past its
// model's own timeout; one its model's timeout bounds gets none.
func TestGrace(t *testing.T) {
	for _, c := range []struct{ timeout, model, reserve, want time.Duration }{
		{10 * time.Second, 30 * time.Second, 2 * time.Second, 1500 * time.Millisecond},
		{29 * time.Second, 30 * time.Second, 2 * time.Second, time.Second}, // the model's timeout first
		{30 * time.Second, 30 * time.Second, 2 * time.Second, 0},
		{10 * time.Second, 30 * time.Second, 300 * time.Millisecond, 0}, // a reserve under guard.FallbackTime
	} {
		if got := Grace(c.timeout, c.model, c.reserve); got != c.want {
			t.Errorf("Grace(%v, %v, %v) = %v, want %v", c.timeout, c.model, c.reserve, got, c.want)
		}
	}
}

// TestLastChanceGoesAsLateAsItCanAnswer: the last request waits until
// what it needs (at least guard.MinAttemptTime) is left before the fallback's own
// guard.FallbackTime, inside the reserve; a reserve shorter than guard.FallbackTime is
// the fallback's whole.
func TestLastChanceGoesAsLateAsItCanAnswer(t *testing.T) {
	for _, c := range []struct {
		name                             string
		deadline, elapsed, reserve, need time.Duration
		delay, window                    time.Duration
	}{
		{"20 s deadline, 16 s gone, 2 s reserve", 20 * time.Second, 16 * time.Second, 2 * time.Second, 300 * time.Millisecond, 2500 * time.Millisecond, 3500 * time.Millisecond},
		{"answers that take 3 s", 20 * time.Second, 16 * time.Second, 2 * time.Second, 3 * time.Second, 500 * time.Millisecond, 3500 * time.Millisecond},
		{"a reserve shorter than guard.FallbackTime", 20 * time.Second, 16 * time.Second, 200 * time.Millisecond, 0, 2800 * time.Millisecond, 3800 * time.Millisecond},
		{"too late already: at once", 20 * time.Second, 19 * time.Second, 2 * time.Second, 0, 0, 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := guard.LastChanceDelay(FallbackWindow(c.deadline, c.elapsed, c.reserve), c.need); d != c.delay {
				t.Fatalf("delay %v, want %v", d, c.delay)
			}
			if w := FallbackWindow(c.deadline, c.elapsed, c.reserve); w != c.window {
				t.Fatalf("window %v, want %v", w, c.window)
			}
		})
	}
}

// TestNextNamesItsRule: every step after an outcome names the guard's
// rule that made it, as the call's attempts and the Web UI show it: the
// class's own action, backpressure for a refusal, the class breaker when
// it capped the retry, the budget when a spent one changed the step.
func TestNextNamesItsRule(t *testing.T) {
	cfg := config.DefaultConfig()
	for _, c := range []struct {
		name  string
		class failure.Class
		v     Verdicts
		want  guard.RuleName
	}{
		{"a server error retried", failure.ServerError, Verdicts{ClassAllowed: true, U: 0.5}, guard.RuleClass},
		{"a full queue", failure.QueueFull, Verdicts{ClassAllowed: true, U: 0.5}, guard.RuleBackpressure},
		{"a 429", failure.RateLimited, Verdicts{ClassAllowed: true, U: 0.5}, guard.RuleBackpressure},
		{"the class breaker open", failure.ServerError, Verdicts{ClassAllowed: false, U: 0.5}, guard.RuleClassBreaker},
		{"every budget spent", failure.ServerError, Verdicts{ClassAllowed: true, U: 0.5,
			Spent: []string{cfg.Models[0].Capacity(), cfg.Models[1].Capacity(), cfg.Models[2].Capacity()}}, guard.RuleBudget},
	} {
		s := New("", Shape{}, 60*time.Second, false)
		s.Model = "qwen-72b"
		s = s.Start(s.Model)
		s = s.SentTo(cfg.Models[0].Capacity())
		step := Next(cfg, s, Outcome{Class: c.class, Elapsed: time.Second}, c.v)
		if step.Rule != c.want {
			t.Errorf("%s: %s (%s) named rule %q, want %q", c.name, step.Decision, step.Reason, step.Rule, c.want)
		}
	}
}

// TestFormatDurationSaysWhatTheHistoryRecords: a wait's summary is printed
// from the whole milliseconds its delay_ms records, so an operator reading
// "hold 1.32 s" beside delay_ms 1325 never sees a different last digit.
func TestFormatDurationSaysWhatTheHistoryRecords(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{1325*time.Millisecond + 600*time.Microsecond, "1.32 s"}, // rounding the nanoseconds would say 1.33 s
		{1325 * time.Millisecond, "1.32 s"},
		{999*time.Millisecond + 999*time.Microsecond, "999 ms"},
		{time.Second, "1.00 s"},
		{200 * time.Millisecond, "200 ms"},
		{0, "0 ms"},
	} {
		if got := FormatDuration(c.d); got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.d, got, c.want)
		}
		ms := time.Duration(c.d.Milliseconds()) * time.Millisecond
		if FormatDuration(c.d) != FormatDuration(ms) {
			t.Errorf("FormatDuration(%v) = %q but its recorded %v reads %q", c.d, FormatDuration(c.d), ms, FormatDuration(ms))
		}
	}
}
