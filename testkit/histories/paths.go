package histories

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// path is one way through LLMCall and how to make a real run take it.
type path struct {
	// name names the file (<name>.json) and the workflow ID
	// (history-<name>).
	name string
	// doc says what the history shows.
	doc string
	// policy changes the default policy of the path's workers.
	policy func(*config.Config)
	// scenario, when set, is the shipped llmsim scenario to run.
	scenario string
	// request is the recorded call; see ask.
	request workflows.CallRequest
	// prepare runs calls before the recorded one (open a breaker, spend
	// the budget) on the same worker.
	prepare func(ctx context.Context, e *env) error
	// drive runs the recorded call and returns its result; default e.call
	// (start, wait). It may cancel the call or kill its worker.
	drive func(ctx context.Context, e *env, req workflows.CallRequest) (workflows.CallResult, error)
	// childWorker: the recorded call starts on a worker in a separate
	// process (drive kills it); the in-process worker starts later.
	childWorker bool
	// want is what the run must show before its history is saved.
	want want
}

// want is the path a run must have taken.
type want struct {
	// decisions are "model:class:decision" per attempt (class "ok" for
	// the answer).
	decisions []string
	// source of the answer; "" for a call that fails.
	source workflows.Source
	// fails is the ApplicationError type a failed call ends with, or
	// "canceled".
	fails string
	// check looks at what else the path must show.
	check func(res workflows.CallResult) error
	// stickyTimeout allows workflow tasks that timed out on the sticky
	// queue of a worker that died (schedule-to-start).
	stickyTimeout bool
	// timers, when set, is the number of timers the history must start.
	timers int
}

// The outcomes in want.fails beyond failure classes.
const failsCanceled = "canceled"

// system is the system prompt of every recorded call.
const system = "You are a support agent."

// ask is the recorded request of a path: a system prompt and one short
// question, in the customer_service scenario, with the idempotency key
// history-<name> (the workflow ID).
func ask(name, question string) workflows.CallRequest {
	return workflows.CallRequest{
		UserID: "u-history", SessionID: "s-history", Scenario: "customer_service",
		IdempotencyKey: "history-" + name,
		Messages: []request.Message{
			{Role: request.RoleSystem, Content: system},
			{Role: request.RoleUser, Content: question},
		},
	}
}

func streamed(req workflows.CallRequest) workflows.CallRequest {
	req.Stream = true
	return req
}

func inScenario(req workflows.CallRequest, scenario string) workflows.CallRequest {
	req.Scenario = scenario
	return req
}

// Questions: faqQuestion matches the example FAQ, unrelated matches no FAQ
// entry and no rule.
const (
	plainQuestion = "Where is my order?"
	faqQuestion   = "How do I get a refund for my order?"
	unrelated     = "Explain the difference between a heap and a stack."
)

// paths returns every recorded path, in recording order.
func paths() []path {
	return []path{
		{
			name: "success", doc: "the first model answers at once",
			request: ask("success", plainQuestion),
			want:    want{decisions: []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel},
		},
		{
			name: "class-connect", doc: "connection refused: resent inside the activity, then the next model",
			// A reset after the request was sent is a server_error; a
			// refused dial is a connect failure.
			policy: func(c *config.Config) {
				c.Models[0].BaseURL = refusingURL()
			},
			request: ask("class-connect", plainQuestion),
			want: want{decisions: []string{"qwen-72b:connect:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel},
		},
		{
			name: "class-read_timeout", doc: "no first token: kept open past the first-token timeout (nothing could answer sooner), cut at the attempt's timeout, then the next model",
			policy: func(c *config.Config) {
				c.Models[0].FirstTokenTimeout = config.Duration(time.Second)
				c.Models[0].Timeout = config.Duration(3 * time.Second)
			},
			request: ask("class-read_timeout", "[[sim fault=hang model=qwen-72b times=always]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:read_timeout:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel},
		},
		{
			name: "class-timeout", doc: "504: prune, full-jitter backoff, retry the same model",
			request: ask("class-timeout", "[[sim fault=gateway_timeout times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:timeout:prune+retry", "qwen-72b:ok:answer"},
				source: workflows.SourceModel},
		},
		{
			name: "class-queue_full", doc: "queue full: the model's queue is its own, so the next model at once",
			request: ask("class-queue_full", "[[sim fault=queue_full model=qwen-72b times=always]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:queue_full:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel},
		},
		{
			name: "queue-full-hold", doc: "queue full on the ladder's only model: backpressure, its queue held 1 s (released with jitter), then the same request again, no attempt against the cap",
			policy:  func(c *config.Config) { c.Models = c.Models[:1] },
			request: ask("queue-full-hold", "[[sim fault=queue_full model=qwen-72b times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:queue_full:hold+resend", "qwen-72b:ok:answer"},
				source: workflows.SourceModel},
		},
		{
			name: "class-rate_limited", doc: "429: wait Retry-After exactly, retry the same model",
			request: ask("class-rate_limited", "[[sim fault=rate_limited retry_after=1s times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:rate_limited:wait retry-after", "qwen-72b:ok:answer"},
				source: workflows.SourceModel, check: delays(1000)},
		},
		{
			name: "class-context_length_exceeded", doc: "context too long: keep the last rounds, resend at once",
			request: contextRequest(),
			want: want{decisions: []string{"qwen-72b:context_length_exceeded:prune+resend", "qwen-72b:ok:answer"},
				source: workflows.SourceModel, check: func(res workflows.CallResult) error {
					if a, b := res.Attempts[0].Messages, res.Attempts[1].Messages; b >= a {
						return fmt.Errorf("the resend sent %d messages, the first attempt %d: nothing was pruned", b, a)
					}
					return delays(0)(res)
				}},
		},
		{
			name: "class-output_truncated", doc: "finish_reason length: more max_tokens, lower temperature, retry after 500 ms",
			request: ask("class-output_truncated", "[[sim fault=length times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:output_truncated:more tokens+retry", "qwen-72b:ok:answer"},
				source: workflows.SourceModel, check: delays(500)},
		},
		{
			name: "class-service_unavailable", doc: "maintenance 503: no retry, the FAQ answers",
			// A shipped scenario, not a directive: directive text in the
			// question would spoil the FAQ match.
			scenario: "class-service_unavailable",
			request:  ask("class-service_unavailable", faqQuestion),
			want: want{decisions: []string{"qwen-72b:service_unavailable:fallback"}, source: workflows.SourceFAQ,
				check: faqAnswered},
		},
		{
			name: "class-server_error", doc: "500: full-jitter backoff, retry the same model",
			request: ask("class-server_error", "[[sim fault=server_error times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:server_error:retry", "qwen-72b:ok:answer"},
				source: workflows.SourceModel},
		},
		{
			name: "class-body_error", doc: "HTTP 200 with an error body: full-jitter backoff, retry",
			request: ask("class-body_error", "[[sim fault=error_body times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:body_error:retry", "qwen-72b:ok:answer"},
				source: workflows.SourceModel},
		},
		{
			name: "class-invalid_request", doc: "upstream 400: no retry, the call fails with a clear error",
			request: ask("class-invalid_request", "[[sim fault=bad_request times=always]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:invalid_request:fail"},
				fails: string(failure.InvalidRequest)},
		},
		{
			name: "class-auth", doc: "401: trip the model's breaker, the next model with another key answers",
			policy:  func(c *config.Config) { c.Models[1].APIKeyEnv = "QWEN_14B_API_KEY" },
			request: ask("class-auth", "[[sim fault=invalid_api_key model=qwen-72b times=always]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:auth:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel},
		},
		{
			name: "class-model_not_found", doc: "404 model_not_found: the next model",
			request: ask("class-model_not_found", "[[sim fault=model_not_found model=qwen-72b times=always]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:model_not_found:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel},
		},
		{
			name: "class-content_filter", doc: "finish_reason content_filter: no retry, the FAQ answers",
			scenario: "class-content_filter",
			request:  ask("class-content_filter", faqQuestion),
			want: want{decisions: []string{"qwen-72b:content_filter:fallback"}, source: workflows.SourceFAQ,
				check: faqAnswered},
		},
		{
			name: "class-worker_lost", doc: "the worker process is killed mid-attempt: the attempt is resent",
			policy: func(c *config.Config) {
				c.Call.HeartbeatTimeout = config.Duration(2 * time.Second)
			},
			request:     ask("class-worker_lost", "[[sim fault=latency latency=30s times=1]] "+plainQuestion),
			childWorker: true,
			drive:       killWorkerMidAttempt,
			want: want{decisions: []string{"qwen-72b:worker_lost:resend", "qwen-72b:ok:answer"},
				source: workflows.SourceModel, stickyTimeout: true, check: func(res workflows.CallResult) error {
					if res.Attempts[1].RetriedFrom != "1 (worker_lost)" {
						return fmt.Errorf("the resend says retried_from %q, want %q", res.Attempts[1].RetriedFrom, "1 (worker_lost)")
					}
					return nil
				}},
		},
		{
			name: "model-switch", doc: "500 twice on the first model: retry, then the next model answers",
			request: ask("model-switch", "[[sim fault=server_error model=qwen-72b times=always]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:server_error:retry", "qwen-72b:server_error:switch_model",
				"qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel},
		},
		{
			name: "breaker-open", doc: "the first model's breaker is open (earlier calls failed): skipped, no upstream call",
			prepare: openBreaker,
			request: ask("breaker-open", plainQuestion),
			want: want{decisions: []string{"qwen-72b:breaker_open:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel},
		},
		{
			name: "budget-exhausted", doc: "the retry budget of the endpoint is spent: no retry, the model on another endpoint at once",
			policy: func(c *config.Config) {
				c.Budget.Floor, c.Budget.Ratio = 1, 0.0001
				// The same simulator by another name: another endpoint.
				c.Models[1].BaseURL = strings.Replace(c.Models[1].BaseURL, "127.0.0.1", "localhost", 1)
			},
			prepare: spendBudget,
			request: ask("budget-exhausted", "[[sim fault=error_body times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:body_error:switch_model", "qwen-14b:ok:answer"},
				source: workflows.SourceFallbackModel, check: func(res workflows.CallResult) error {
					if !strings.Contains(res.Attempts[0].Reason, "retry budget of") {
						return fmt.Errorf("reason %q does not say the budget refused the retry", res.Attempts[0].Reason)
					}
					return delays(0)(res)
				}},
		},
		{
			name: "wait-for-trials", doc: "the one model refuses the key once (auth trips its breaker): the call waits on a timer for the breaker's trial, which the model answers",
			policy: func(c *config.Config) {
				c.Models = c.Models[:1]
				c.Breaker.OpenFor = config.Duration(time.Second)
			},
			request: ask("wait-for-trials", "[[sim fault=invalid_api_key times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:auth:wait_for_trials", "qwen-72b:ok:answer"},
				source: workflows.SourceModel, check: func(res workflows.CallResult) error {
					if !strings.Contains(res.Attempts[0].Reason, "breaker open: qwen-72b") {
						return fmt.Errorf("reason %q does not name the open breaker it waits on", res.Attempts[0].Reason)
					}
					return nil
				}},
		},
		{
			name: "wait-for-budget", doc: "the retry budget of the one endpoint is spent: the call waits on a timer until the budget refills, and the retry is answered",
			policy: func(c *config.Config) {
				c.Budget.Floor, c.Budget.Ratio = 1, 0.0001
				c.Budget.Window = config.Duration(3 * time.Second)
				c.Call.MaxWait = config.Duration(25 * time.Second)
			},
			prepare: spendBudget,
			request: ask("wait-for-budget", "[[sim fault=error_body times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:body_error:wait_for_budget", "qwen-72b:ok:answer"},
				source: workflows.SourceModel, check: func(res workflows.CallResult) error {
					if !strings.Contains(res.Attempts[0].Reason, "retry budget spent: qwen-72b") {
						return fmt.Errorf("reason %q does not say the spent budget is waited for", res.Attempts[0].Reason)
					}
					return nil
				}},
		},
		{
			name: "rate-limit-hold", doc: "another call's 429 (x-ratelimit-remaining 0 until its reset) holds the endpoint: this call waits for the hold, then the model answers",
			prepare: holdEndpoint,
			request: ask("rate-limit-hold", plainQuestion),
			want:    want{decisions: []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel, timers: 1},
		},
		{
			name: "fallback-faq", doc: "every attempt fails: attempts cap, then the FAQ answers",
			// Every qwen-72b answer is an error body, no choices or
			// malformed JSON.
			scenario: "class-body_error",
			request:  ask("fallback-faq", faqQuestion),
			want: want{decisions: []string{"qwen-72b:body_error:retry", "qwen-72b:body_error:retry",
				"qwen-72b:body_error:retry", "qwen-72b:body_error:fallback"}, source: workflows.SourceFAQ,
				check: faqAnswered},
		},
		{
			name: "fallback-rule", doc: "a no_retry business rule: the failed attempt is not retried, the rule card answers",
			policy: func(c *config.Config) {
				c.Rules = append(c.Rules, config.Rule{
					ID: "homework-no-retry", Scenario: "education", Keywords: []string{"homework"},
					Action: config.RuleNoRetry, Message: "Let's take it one step at a time.",
				})
			},
			request: inScenario(ask("fallback-rule", "[[sim fault=server_error times=always]] Can you check my homework?"), "education"),
			want: want{decisions: []string{"qwen-72b:server_error:fallback"}, source: workflows.SourceRule,
				check: func(res workflows.CallResult) error {
					if res.RuleID != "homework-no-retry" {
						return fmt.Errorf("rule %q answered, want homework-no-retry", res.RuleID)
					}
					return nil
				}},
		},
		{
			name: "fallback-placeholder", doc: "no model exists upstream: the ladder is exhausted, nothing matches, the placeholder answers",
			request: ask("fallback-placeholder", "[[sim fault=model_not_found times=always]] "+unrelated),
			want: want{decisions: []string{"qwen-72b:model_not_found:switch_model", "qwen-14b:model_not_found:switch_model",
				"llama-8b:model_not_found:fallback"}, source: workflows.SourcePlaceholder},
		},
		{
			name: "handoff", doc: "medical + chest pain: hand-off to a human, no model call",
			request: inScenario(ask("handoff", "I have chest pain."), "medical"),
			want: want{source: workflows.SourceHandoff, check: func(res workflows.CallResult) error {
				if res.RuleID != "medical-emergency" {
					return fmt.Errorf("rule %q, want medical-emergency", res.RuleID)
				}
				return nil
			}},
		},
		{
			name: "safe-message", doc: "an admission safe_message rule (finance + password): the safe message and a risk flag, no model call",
			policy: func(c *config.Config) {
				c.Rules = append([]config.Rule{{
					ID: "finance-password-now", Scenario: "finance", Keywords: []string{"password"},
					Action: config.RuleSafeMessage, Message: "For your security, use the official app.", Flag: "risk_review",
				}}, c.Rules...)
			},
			request: inScenario(ask("safe-message", "What is my password?"), "finance"),
			want: want{source: workflows.SourceRule, check: func(res workflows.CallResult) error {
				if res.Flag != "risk_review" {
					return fmt.Errorf("flag %q, want risk_review", res.Flag)
				}
				return nil
			}},
		},
		{
			name: "rule-after-failures", doc: "medical + bleeding, two truncated answers: the medical-urgent rule hands off, no third attempt",
			request: inScenario(ask("rule-after-failures", "[[sim fault=length times=2]] My cut keeps bleeding, what should I do?"), "medical"),
			want: want{decisions: []string{"qwen-72b:output_truncated:continue", "qwen-72b:output_truncated:rule handoff"}, source: workflows.SourceHandoff,
				check: ruleAnswered("medical-urgent")},
		},
		{
			name: "risk-review", doc: "finance + transfer on a rate limit: the safe message, no retry, and a RiskReview workflow started on llm-reviews",
			request: inScenario(ask("risk-review", "[[sim fault=rate_limited retry_after=1s]] Please transfer 200 dollars to my brother"), "finance"),
			want: want{decisions: []string{"qwen-72b:rate_limited:rule safe_message"}, source: workflows.SourceRule,
				check: func(res workflows.CallResult) error {
					if err := ruleAnswered("finance-sensitive")(res); err != nil {
						return err
					}
					if res.Review != workflows.ReviewID(res.RequestID) {
						return fmt.Errorf("review %q, want %q", res.Review, workflows.ReviewID(res.RequestID))
					}
					return nil
				}},
		},
		{
			name: "step-by-step", doc: "education + homework over the window: split into three questions, three child LLMCalls, one combined answer",
			request: inScenario(ask("step-by-step", "[[sim fault=context_length_exceeded]] My homework: a train leaves at 3 pm at 80 km/h. "+
				"Its town is 240 km away. When does it arrive?"), "education"),
			want: want{decisions: []string{"qwen-72b:context_length_exceeded:rule step_by_step"}, source: workflows.SourceSteps,
				check: func(res workflows.CallResult) error {
					if err := ruleAnswered("education-steps")(res); err != nil {
						return err
					}
					if len(res.Steps) != 3 {
						return fmt.Errorf("%d steps, want 3", len(res.Steps))
					}
					return nil
				}},
		},
		{
			name: "invalid-request", doc: "a message with an unknown role: refused by validation, no model call",
			request: func() workflows.CallRequest {
				r := ask("invalid-request", plainQuestion)
				r.Messages = append(r.Messages[:1], request.Message{Role: "robot", Content: "beep"}, r.Messages[1])
				return r
			}(),
			want: want{fails: string(failure.InvalidRequest)},
		},
		{
			name: "stream-success", doc: "a caller asks to stream: the answer's deltas go through the call's workflow stream",
			request: streamed(ask("stream-success", "[[sim tokens=60]] "+plainQuestion)),
			want:    want{decisions: []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel},
		},
		{
			name: "stream-resume", doc: "the stream is cut after 20 tokens: the next attempt continues the delivered text",
			request: streamed(ask("stream-resume", "[[sim fault=cut_stream after=20 times=1]] [[sim tokens=60]] "+plainQuestion)),
			want: want{decisions: []string{"qwen-72b:stream_broken:resume (continue)", "qwen-72b:ok:answer"},
				source: workflows.SourceModel},
		},
		{
			name: "stream-no-continuation", doc: "the stream is cut and no model can continue it: the call ends with the delivered text",
			policy: func(c *config.Config) {
				for i := range c.Models {
					c.Models[i].Continuation = config.ContinueNone
				}
			},
			request: streamed(ask("stream-no-continuation", "[[sim fault=cut_stream after=20 times=1]] [[sim tokens=60]] "+plainQuestion)),
			want:    want{decisions: []string{"qwen-72b:stream_broken:finish"}, source: workflows.SourceModel},
		},
		{
			name: "tool-call", doc: "an agent offers a tool: the model's tool call is the answer",
			request: withTools(ask("tool-call", "Where is order 42?")),
			want:    want{decisions: []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel, check: calledLookup},
		},
		{
			name: "stream-tool-call", doc: "a streamed agent call: the tool call reaches the stream whole, once checked",
			request: streamed(withTools(ask("stream-tool-call", "Where is order 42?"))),
			want:    want{decisions: []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel, check: calledLookup},
		},
		{
			name: "class-bad_tool_call", doc: "a call to a tool that was not offered: repaired once on the model, cooler",
			request: withTools(ask("class-bad_tool_call", "[[sim fault=unknown_tool times=1]] Where is order 42?")),
			want: want{decisions: []string{"qwen-72b:bad_tool_call:repair", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
				check: calledLookup},
		},
		{
			name: "class-schema_mismatch", doc: "an answer that is not JSON for a json_schema request: one repair with the error",
			request: withSchema(ask("class-schema_mismatch", "[[sim fault=bad_json times=1]] Status of order 42?")),
			want: want{decisions: []string{"qwen-72b:schema_mismatch:repair", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
				check: func(res workflows.CallResult) error {
					if !strings.Contains(res.Attempts[0].Reason, "not valid JSON") || !strings.HasPrefix(res.Content, "{") {
						return fmt.Errorf("reason %q, content %q", res.Attempts[0].Reason, res.Content)
					}
					return nil
				}},
		},
		{
			name: "capability-skip", doc: "a request with tools and a first rung without them: it is skipped, never sent; the next answers",
			policy: func(c *config.Config) {
				c.Models[0].Capabilities = nil
			},
			request: withTools(ask("capability-skip", "Where is order 42?")),
			want: want{decisions: []string{"qwen-72b:ok:skip", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
				check: func(res workflows.CallResult) error {
					if !strings.Contains(res.Attempts[0].Reason, "qwen-72b lacks tools") {
						return fmt.Errorf("skip reason %q", res.Attempts[0].Reason)
					}
					return calledLookup(res)
				}},
		},
		{
			name: "fallback-unavailable", doc: "a required tool call and no model answers: the call fails, retryable, no FAQ text",
			request: requireTool(withTools(ask("fallback-unavailable", "[[sim fault=maintenance times=always]] "+faqQuestion))),
			want:    want{decisions: []string{"qwen-72b:service_unavailable:fallback"}, fails: workflows.ErrFallbackUnavailable},
		},
		{
			name: "key-pool", doc: "a 429 on one key of the model's pool: the next attempt takes the other key at once",
			policy: func(c *config.Config) {
				c.Models[0].APIKeyEnv, c.Models[0].APIKeyEnvs = "", []string{"HISTORY_KEY_A", "HISTORY_KEY_B"}
			},
			request: ask("key-pool", "[[sim fault=rate_limited retry_after=5s model=qwen-72b times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:rate_limited:retry (another key)", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
				check: func(res workflows.CallResult) error {
					if a, b := res.Attempts[0].Key, res.Attempts[1].Key; a == "" || a == b || res.Attempts[0].DelayMS != 0 {
						return fmt.Errorf("keys %q then %q after %d ms: want two keys, no wait", a, b, res.Attempts[0].DelayMS)
					}
					return nil
				}},
		},
		{
			name: "hedge-wins", doc: "the first model has no first token after the hedge delay: llama-8b is asked too and answers first; the first attempt is cancelled",
			policy:  hedgeAfter("400ms"),
			request: ask("hedge-wins", "[[sim fault=latency latency=6s model=qwen-72b times=1]] "+plainQuestion),
			want:    want{decisions: []string{"qwen-72b:ok:cancelled", "llama-8b:ok:answer"}, source: workflows.SourceFallbackModel},
		},
		{
			name: "hedge-streamed", doc: "a streamed hedged call: the hedge's first token comes first, so only its deltas reach the stream and the first attempt is cancelled",
			policy:  hedgeAfter("300ms"),
			request: streamed(ask("hedge-streamed", "[[sim fault=latency latency=900ms model=qwen-72b times=1]] [[sim tokens=60]] "+plainQuestion)),
			want:    want{decisions: []string{"qwen-72b:ok:cancelled", "llama-8b:ok:answer"}, source: workflows.SourceFallbackModel},
		},
		{
			name: "overdue-hedge", doc: "no hedge policy: qwen-72b's request hangs past first_token_timeout and is kept open; llama-8b, on another endpoint none of whose requests is overdue, races it from the retry budget, answers first and cuts it",
			policy:  overdueOnAnotherEndpoint,
			request: ask("overdue-hedge", "[[sim fault=hang model=qwen-72b times=1]] "+plainQuestion),
			want:    want{decisions: []string{"qwen-72b:ok:cancelled", "llama-8b:ok:answer"}, source: workflows.SourceFallbackModel},
		},
		{
			name: "hedge-replaced", doc: "hedge.replace: llama-8b's answer goes out first through the answer update, marked replaceable; the first model goes on, and its answer replaces it as the call's result",
			policy:  hedgeReplace("400ms"),
			request: ask("hedge-replaced", "[[sim fault=latency latency=3s model=qwen-72b times=1]] "+plainQuestion),
			drive:   quickThenFinal,
			want: want{decisions: []string{"llama-8b:ok:replaced", "qwen-72b:ok:answer"}, source: workflows.SourceModel, check: func(res workflows.CallResult) error {
				if res.Replaced == nil || res.Replaced.Model != "llama-8b" || res.Replaced.Content == "" {
					return fmt.Errorf("replaced %+v: want llama-8b's quick answer", res.Replaced)
				}
				return nil
			}},
		},
		{
			name: "hedge-replaced-streamed", doc: "hedge.replace on a streamed call: llama-8b's first token comes first and its text streams; the first model goes on, and its answer replaces the text in a replaced event",
			policy:  hedgeReplace("300ms"),
			request: streamed(ask("hedge-replaced-streamed", "[[sim fault=latency latency=3s model=qwen-72b times=1]] [[sim tokens=30]] "+plainQuestion)),
			drive:   quickThenFinal,
			want: want{decisions: []string{"llama-8b:ok:replaced", "qwen-72b:ok:answer"}, source: workflows.SourceModel, check: func(res workflows.CallResult) error {
				if res.Replaced == nil || res.Replaced.Model != "llama-8b" {
					return fmt.Errorf("replaced %+v: want llama-8b's streamed answer", res.Replaced)
				}
				return nil
			}},
		},
		{
			name: "fallback-cache", doc: "every model is under maintenance: the answer a model gave the same question earlier answers, with its age, before the FAQ",
			prepare: primeCacheThenMaintenance,
			request: ask("fallback-cache", "How long does shipping to Canada take?"),
			want: want{decisions: []string{"qwen-72b:service_unavailable:fallback"}, source: workflows.SourceCache, check: func(res workflows.CallResult) error {
				if res.CacheAgeMS <= 0 || res.Model != "qwen-72b" {
					return fmt.Errorf("cached answer of %q, %d ms old: want qwen-72b's, with its age", res.Model, res.CacheAgeMS)
				}
				return nil
			}},
		},
		{
			name: "diagnosis", doc: "an error body no classifier rule knows: llama-8b, asked as the diagnosis rung, names queue_full, and the call takes queue_full's step",
			policy:  func(c *config.Config) { c.Diagnose.Enabled = true },
			request: ask("diagnosis", "[[sim fault=unknown_error model=qwen-72b times=1]] "+plainQuestion),
			want: want{decisions: []string{"qwen-72b:queue_full:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
				check: func(res workflows.CallResult) error {
					if !strings.Contains(res.Attempts[0].Diagnosis, "diagnosed by llama-8b as queue_full") {
						return fmt.Errorf("diagnosis %q, want queue_full named by llama-8b", res.Attempts[0].Diagnosis)
					}
					return nil
				}},
		},
		{
			name: "cancellation", doc: "the call is cancelled while it waits out a Retry-After",
			request: ask("cancellation", "[[sim fault=rate_limited retry_after=30s times=1]] "+plainQuestion),
			drive:   cancelDuringBackoff,
			want:    want{decisions: []string{"qwen-72b:rate_limited:wait retry-after"}, fails: failsCanceled},
		},
	}
}

// hedgeAfter hedges every call with llama-8b after delay.
func hedgeAfter(delay string) func(*config.Config) {
	return func(c *config.Config) { c.Hedge.After, c.Hedge.Model, c.Hedge.Budget = delay, "llama-8b", 1 }
}

// hedgeReplace hedges every call with llama-8b after delay, under hedge.replace.
func hedgeReplace(delay string) func(*config.Config) {
	return func(c *config.Config) {
		hedgeAfter(delay)(c)
		c.Hedge.Replace = true
	}
}

// quickThenFinal takes the call's first answer, which must be a quick one,
// then waits for the final result.
func quickThenFinal(ctx context.Context, e *env, req workflows.CallRequest) (workflows.CallResult, error) {
	quick, err := e.call(ctx, req)
	if err != nil {
		return quick, err
	}
	if !quick.Replaceable {
		return quick, fmt.Errorf("the first answer (%s's) is not a quick one", quick.Model)
	}
	return e.lc.Result(ctx, quick.RequestID)
}

// withTools offers the lookup_order tool.
func withTools(req workflows.CallRequest) workflows.CallRequest {
	req.Tools = []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "lookup_order",
		Description: "Find an order by its id",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)}}}
	return req
}

// requireTool makes a tool call the only valid answer.
func requireTool(req workflows.CallRequest) workflows.CallRequest {
	req.ToolChoice = &request.ToolChoice{Mode: request.ToolChoiceRequired}
	return req
}

// withSchema asks for JSON matching an order schema.
func withSchema(req workflows.CallRequest) workflows.CallRequest {
	req.ResponseFormat = &request.ResponseFormat{Type: request.FormatJSONSchema, JSONSchema: &request.JSONSchema{Name: "order",
		Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"status":{"type":"string","enum":["shipped","pending"]}},"required":["order_id","status"]}`)}}
	return req
}

// calledLookup checks that the answer is the lookup_order call.
func calledLookup(res workflows.CallResult) error {
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Function.Name != "lookup_order" || res.FinishReason != "tool_calls" {
		return fmt.Errorf("tool calls %+v, finish %q: want one lookup_order call", res.ToolCalls, res.FinishReason)
	}
	return nil
}

// refusingURL is the base URL of a local port nobody listens on: a dial
// there is refused.
func refusingURL() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "http://127.0.0.1:1/v1"
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr + "/v1"
}

// contextRequest has five short rounds before the question, so keeping the
// last three rounds visibly prunes it.
func contextRequest() workflows.CallRequest {
	r := ask("class-context_length_exceeded", "")
	r.Messages = r.Messages[:1]
	for i := 1; i <= 5; i++ {
		r.Messages = append(r.Messages,
			request.Message{Role: request.RoleUser, Content: fmt.Sprintf("Order %d: where is it?", i)},
			request.Message{Role: request.RoleAssistant, Content: fmt.Sprintf("Order %d ships today.", i)})
	}
	r.Messages = append(r.Messages, request.Message{Role: request.RoleUser,
		Content: "[[sim fault=context_length_exceeded times=1]] And the last one?"})
	return r
}

// delays checks the delays the attempts before the last one waited.
func delays(ms ...int64) func(workflows.CallResult) error {
	return func(res workflows.CallResult) error {
		for i, d := range ms {
			if i >= len(res.Attempts) {
				break
			}
			if got := res.Attempts[i].DelayMS; got != d {
				return fmt.Errorf("attempt %d waited %d ms, want %d ms", i+1, got, d)
			}
		}
		return nil
	}
}

func faqAnswered(res workflows.CallResult) error {
	if res.FAQID == "" || !res.Degraded {
		return fmt.Errorf("the FAQ answer has no entry id or is not marked degraded: %+v", res)
	}
	return nil
}

// ruleAnswered checks that rule id answered the call.
func ruleAnswered(id string) func(workflows.CallResult) error {
	return func(res workflows.CallResult) error {
		if res.RuleID != id {
			return fmt.Errorf("rule %q answered, want %s", res.RuleID, id)
		}
		return nil
	}
}

// overdueOnAnotherEndpoint gives every model a 1 s first_token_timeout and
// puts llama-8b on another endpoint (the same simulator, named by another
// host), where a hedge of an overdue attempt may go.
func overdueOnAnotherEndpoint(c *config.Config) {
	for i := range c.Models {
		c.Models[i].FirstTokenTimeout = config.Duration(time.Second)
		if c.Models[i].Name == "llama-8b" {
			c.Models[i].BaseURL = strings.Replace(c.Models[i].BaseURL, "127.0.0.1", "localhost", 1)
		}
	}
}
