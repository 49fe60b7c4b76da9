package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// outcome is one scripted upstream attempt.
type outcome struct {
	class      failure.Class
	status     int
	retryAfter time.Duration
	content    string
	published  int   // tokens of content streamed to the caller before a failure
	err        error // a non-application error (timeouts)
}

// broke is a stream that failed after it had streamed text to the caller.
func broke(text string, tokens int) outcome {
	return outcome{class: failure.StreamBroken, status: 200, content: text, published: tokens}
}

func ok(content string) outcome { return outcome{content: content} }
func fail(c failure.Class, status int) outcome {
	return outcome{class: c, status: status}
}

// harness runs LLMCall in the test environment with the real decision
// activities (admission, preparation, planning, fallback, with their budget
// and breakers) and a scripted CallModel.
type harness struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	acts   *activities.Activities
	brk    *guard.BreakerRegistry
	script []outcome
	calls  []activities.CallInput
	at     []time.Time
	start  time.Time
	// onAttempt, when set, runs inside the scripted CallModel of attempt n
	// (1-based), before it returns.
	onAttempt func(n int)
}

func newHarness(t *testing.T, cfg *config.Config, script ...outcome) *harness {
	return newHarnessWithGuards(t, cfg, nil, nil, nil, script...)
}

// newHarnessWithGuards is newHarness with the given retry budgets,
// rate-limit holds and pacer (nil: fresh ones).
func newHarnessWithGuards(t *testing.T, cfg *config.Config, budgets *guard.Budgets, holds *guard.Holds, pacer *guard.Pacer, script ...outcome) *harness {
	t.Helper()
	if cfg == nil {
		cfg = config.DefaultConfig()
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	brk := guard.NewBreakerRegistry(cfg.Breaker, nil)
	// The guards keep the workflow's clock, which skips its timers.
	acts, err := activities.New(activities.Options{Config: cfg, Breakers: brk, Budgets: budgets, Holds: holds, Pacer: pacer, Rand: func() float64 { return 0.5 }, Now: env.Now})
	require.NoError(t, err)
	h := &harness{t: t, env: env, acts: acts, brk: brk, script: script}
	env.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
	env.RegisterActivity(acts)
	env.OnActivity(acts.CallModel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CallInput) (activities.CallOutcome, error) {
			h.calls = append(h.calls, in)
			h.at = append(h.at, env.Now())
			if h.onAttempt != nil {
				h.onAttempt(len(h.calls))
			}
			if len(h.script) == 0 {
				t.Fatalf("unexpected upstream attempt %d on %s", len(h.calls), in.Model)
			}
			o := h.script[0]
			h.script = h.script[1:]
			if o.err != nil {
				return activities.CallOutcome{}, o.err
			}
			out := activities.CallOutcome{Status: 200, Messages: len(in.Request.Messages), PromptTokens: 40}
			if o.class == failure.None {
				out.Content, out.FinishReason, out.CompletionTokens = o.content, "stop", 7
				return out, nil
			}
			out.Class, out.Status, out.Reason = o.class, o.status, "scripted "+string(o.class)
			out.Content, out.Published, out.CompletionTokens = o.content, o.published, o.published
			out.RetryAfter, out.HasRetryAfter = o.retryAfter, o.retryAfter > 0
			return out, temporal.NewApplicationErrorWithOptions(out.Reason, string(o.class),
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
		})
	return h
}

func (h *harness) run(req workflows.CallRequest) (workflows.CallResult, error) {
	h.t.Helper()
	h.env.ExecuteWorkflow(workflows.WorkflowName, req)
	require.True(h.t, h.env.IsWorkflowCompleted(), "workflow did not complete")
	var res workflows.CallResult
	err := h.env.GetWorkflowError()
	if err == nil {
		require.NoError(h.t, h.env.GetWorkflowResult(&res))
	}
	require.Empty(h.t, h.script, "scripted attempts left unused")
	return res, err
}

func ask(q string) workflows.CallRequest {
	return workflows.CallRequest{
		UserID: "u-1", SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{
			{Role: "system", Content: "You are a support agent."},
			{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"},
			{Role: "user", Content: "my parcel is late"}, {Role: "assistant", Content: "sorry"},
			{Role: "user", Content: q},
		},
	}
}

const unrelated = "Explain the difference between a heap and a stack."

func TestLLMCallPaths(t *testing.T) {
	tests := []struct {
		name      string
		script    []outcome
		question  string
		want      []string
		source    workflows.Source
		check     func(t *testing.T, h *harness, res workflows.CallResult)
		mutateCfg func(cfg *config.Config)
		// noMaxTokens: the request sets no max_tokens (the table's set 512).
		noMaxTokens bool
		budget      func(cfg *config.Config) *guard.Budgets
		holds       func(cfg *config.Config) *guard.Holds
		pacer       func(cfg *config.Config) *guard.Pacer
	}{
		{
			name: "success", script: []outcome{ok("Your order ships today.")},
			want: []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, "Your order ships today.", res.Content)
				require.False(t, res.Degraded)
				require.Equal(t, 40, res.Usage.PromptTokens)
				require.Equal(t, 7, res.Usage.CompletionTokens)
				require.Zero(t, res.Usage.FailedAttemptTokens)
			},
		},
		{
			name:   "timeout prunes and retries after full jitter",
			script: []outcome{fail(failure.Timeout, 504), ok("done")},
			want:   []string{"qwen-72b:timeout:prune+retry", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, 1, h.calls[1].Shape.PruneStage)
				// U(0, min(8s, 0.5s·2^0)) with u=0.5 → 250 ms.
				require.Equal(t, int64(250), res.Attempts[0].DelayMS)
				require.Equal(t, 40, res.Usage.FailedAttemptTokens)
			},
		},
		{
			name:   "rate limited waits Retry-After exactly",
			script: []outcome{{class: failure.RateLimited, status: 429, retryAfter: 2 * time.Second}, ok("done")},
			want:   []string{"qwen-72b:rate_limited:wait retry-after", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, int64(2000), res.Attempts[0].DelayMS)
				require.GreaterOrEqual(t, h.at[1].Sub(h.at[0]), 2*time.Second)
			},
		},
		{
			name:   "rate limited beyond the cap switches model at once",
			script: []outcome{{class: failure.RateLimited, status: 429, retryAfter: 5 * time.Minute}, ok("done")},
			want:   []string{"qwen-72b:rate_limited:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
		},
		{
			name:   "context length exceeded keeps the last rounds and resends at once",
			script: []outcome{fail(failure.ContextLengthExceeded, 400), ok("done")},
			want:   []string{"qwen-72b:context_length_exceeded:prune+resend", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, 3, h.calls[1].Shape.KeepRounds)
				require.Zero(t, res.Attempts[0].DelayMS)
			},
		},
		{
			name:   "pruning holds on a later retry after context length",
			script: []outcome{fail(failure.ContextLengthExceeded, 400), fail(failure.ServerError, 500), ok("done")},
			want: []string{"qwen-72b:context_length_exceeded:prune+resend", "qwen-72b:server_error:retry",
				"qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, []int{0, 3, 3}, []int{h.calls[0].Shape.KeepRounds, h.calls[1].Shape.KeepRounds, h.calls[2].Shape.KeepRounds})
			},
		},
		{
			name:        "output truncated under the policy's limit raises max_tokens and lowers temperature",
			noMaxTokens: true,
			script:      []outcome{fail(failure.OutputTruncated, 200), ok("done")},
			want:        []string{"qwen-72b:output_truncated:more tokens+retry", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, 4096+256, h.calls[1].Shape.MaxTokens, "limits.default_max_tokens + 256")
				require.NotNil(t, h.calls[1].Shape.Temperature)
				require.InDelta(t, 0.3, *h.calls[1].Shape.Temperature, 1e-9)
				require.Equal(t, int64(500), res.Attempts[0].DelayMS)
			},
		},
		{
			// An empty answer at the caller's own max_tokens: the limit is
			// the caller's, never raised; another model may answer within it.
			name:   "output truncated at the caller's max_tokens never raises it",
			script: []outcome{fail(failure.OutputTruncated, 200), ok("done")},
			want:   []string{"qwen-72b:output_truncated:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, 512, h.calls[1].Shape.MaxTokens, "the caller's max_tokens")
			},
		},
		{
			// Every model cut its answer at the policy's limit until the
			// retries ran out: the longest text a model wrote answers,
			// degraded and cut (finish_reason length), not the FAQ.
			name:        "exhausted truncation retries answer with the longest model text",
			noMaxTokens: true,
			script: []outcome{
				{class: failure.OutputTruncated, status: 200, content: "Your parcel left"},
				{class: failure.OutputTruncated, status: 200, content: " the depot on Monday"}, // continuations
				{class: failure.OutputTruncated, status: 200, content: " and"},
				{class: failure.OutputTruncated, status: 200, content: "Your"}, // another model, from scratch
			},
			want: []string{"qwen-72b:output_truncated:continue", "qwen-72b:output_truncated:continue",
				"qwen-72b:output_truncated:switch_model", "qwen-14b:output_truncated:fallback"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, "Your parcel left the depot on Monday and", res.Content)
				require.Equal(t, "length", res.FinishReason)
				require.Equal(t, "qwen-72b", res.Model)
				require.True(t, res.Degraded)
				require.Empty(t, res.FAQID, "no canned answer")
				require.Contains(t, res.Reason, "answered with the longest text a model wrote")
			},
		},
		{
			// A generation that outlasted its attempt's deadline: its text is
			// a model's, and answers when no model answers in full.
			name: "text cut by an attempt's deadline answers instead of the FAQ",
			script: []outcome{
				{class: failure.Timeout, status: 200, content: "Your parcel left the depot on Monday and"},
				fail(failure.Timeout, 504), fail(failure.Timeout, 504), fail(failure.Timeout, 504),
			},
			want:   []string{"qwen-72b:timeout:prune+retry", "qwen-72b:timeout:prune+retry", "qwen-72b:timeout:prune+retry", "qwen-72b:timeout:fallback"},
			source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, "Your parcel left the depot on Monday and", res.Content)
				require.Equal(t, "length", res.FinishReason)
				require.True(t, res.Degraded)
			},
		},
		{
			name:      "queue full on the only model: the same request again once the hold is released, with jitter",
			mutateCfg: func(cfg *config.Config) { cfg.Models = cfg.Models[:1] },
			script:    []outcome{fail(failure.QueueFull, 503), ok("done")},
			want:      []string{"qwen-72b:queue_full:hold+resend", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, int64(1250), res.Attempts[0].DelayMS, "rate_limit.hold 1 s + u 0.5 × half of it")
				require.GreaterOrEqual(t, h.at[1].Sub(h.at[0]), 1250*time.Millisecond)
				require.Equal(t, res.Attempts[0].N, res.Attempts[1].N, "a resend of the same attempt")
				require.False(t, res.Degraded)
			},
		},
		{
			name:      "queue full refusals are no attempts against the cap",
			mutateCfg: func(cfg *config.Config) { cfg.Models = cfg.Models[:1] },
			script: []outcome{fail(failure.QueueFull, 503), fail(failure.QueueFull, 503), fail(failure.QueueFull, 503),
				fail(failure.QueueFull, 503), fail(failure.QueueFull, 503), ok("done")},
			want: []string{"qwen-72b:queue_full:hold+resend", "qwen-72b:queue_full:hold+resend", "qwen-72b:queue_full:hold+resend",
				"qwen-72b:queue_full:hold+resend", "qwen-72b:queue_full:hold+resend", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Len(t, h.at, 6, "six requests under a cap of four attempts")
			},
		},
		{
			name:     "maintenance goes to the FAQ at once",
			script:   []outcome{fail(failure.ServiceUnavailable, 503)},
			question: "Where is my order? I want to track my package.",
			want:     []string{"qwen-72b:service_unavailable:fallback"}, source: workflows.SourceFAQ,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.True(t, res.Degraded)
				require.NotEmpty(t, res.FAQID)
				require.NotEmpty(t, res.Content)
			},
		},
		{
			name:     "content filter falls back to the placeholder when nothing matches",
			script:   []outcome{fail(failure.ContentFilter, 200)},
			question: unrelated,
			want:     []string{"qwen-72b:content_filter:fallback"}, source: workflows.SourcePlaceholder,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, config.DefaultConfig().Placeholder, res.Content)
			},
		},
		{
			name:   "server error retries then switches",
			script: []outcome{fail(failure.ServerError, 502), fail(failure.ServerError, 500), ok("done")},
			want: []string{"qwen-72b:server_error:retry", "qwen-72b:server_error:switch_model",
				"qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
		},
		{
			name:   "body error retries",
			script: []outcome{fail(failure.BodyError, 200), ok("done")},
			want:   []string{"qwen-72b:body_error:retry", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
		},
		{
			name:   "model not found switches",
			script: []outcome{fail(failure.ModelNotFound, 404), ok("done")},
			want:   []string{"qwen-72b:model_not_found:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
		},
		{
			name:      "auth switches to a rung with another key and trips the breaker",
			mutateCfg: func(cfg *config.Config) { cfg.Models[1].APIKeyEnv = "OTHER_KEY" },
			script:    []outcome{fail(failure.Auth, 401), ok("done")},
			want:      []string{"qwen-72b:auth:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, guard.BreakerOpen, h.brk.State("qwen-72b", time.Now()))
			},
		},
		{
			name:   "auth never sends the refused key to the same endpoint: the FAQ answers",
			script: []outcome{fail(failure.Auth, 401)},
			want:   []string{"qwen-72b:auth:fallback"}, source: workflows.SourceFAQ,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Contains(t, res.Attempts[0].Reason, "refused the key of qwen-72b")
			},
		},
		{
			name:   "read timeout prunes and retries once, then switches",
			script: []outcome{fail(failure.ReadTimeout, 0), ok("done")},
			want:   []string{"qwen-72b:read_timeout:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
		},
		{
			name:   "connect failure after network resends switches model",
			script: []outcome{fail(failure.Connect, 0), ok("done")},
			want:   []string{"qwen-72b:connect:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
		},
		{
			name:   "worker lost resends the same attempt, not charged",
			script: []outcome{{err: temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)}, ok("done")},
			want:   []string{"qwen-72b:worker_lost:resend", "qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, h.calls[0].Attempt, h.calls[1].Attempt, "a resend keeps the attempt number (and X-Request-ID)")
				require.Equal(t, "1 (worker_lost)", res.Attempts[1].RetriedFrom)
			},
		},
		{
			name: "attempts cap: four attempts then the fallback",
			script: []outcome{fail(failure.BodyError, 200), fail(failure.BodyError, 200),
				fail(failure.BodyError, 200), fail(failure.BodyError, 200)},
			question: unrelated,
			want: []string{"qwen-72b:body_error:retry", "qwen-72b:body_error:retry", "qwen-72b:body_error:retry",
				"qwen-72b:body_error:fallback"}, source: workflows.SourcePlaceholder,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Contains(t, res.Reason, "attempts cap")
				// Full jitter grows: u=0.5 → 250, 500, 1000 ms.
				require.Equal(t, []int64{250, 500, 1000, 0}, []int64{res.Attempts[0].DelayMS, res.Attempts[1].DelayMS, res.Attempts[2].DelayMS, res.Attempts[3].DelayMS})
			},
		},
		{
			name:   "a stream broken after delivering text is continued, never repeated",
			script: []outcome{broke("Your order ", 3), broke("ships ", 1), ok("today.")},
			want:   []string{"qwen-72b:stream_broken:resume (continue)", "qwen-72b:stream_broken:switch_model (continue)", "qwen-14b:ok:answer"},
			source: workflows.SourceFallbackModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, "Your order ships today.", res.Content)
				require.Equal(t, []string{"", "Your order ", "Your order ships "},
					[]string{h.calls[0].Continue, h.calls[1].Continue, h.calls[2].Continue})
				require.Zero(t, res.Attempts[0].DelayMS, "a broken stream resumes at once")
				require.Equal(t, 3+1+7, res.Usage.CompletionTokens, "the streamed tokens of the broken attempts are part of the answer")
				require.Equal(t, 40+40, res.Usage.FailedAttemptTokens, "only their prompts were spent in vain")
			},
		},
		{
			name: "no model left that can continue: the call ends with the delivered text",
			mutateCfg: func(cfg *config.Config) {
				cfg.Models[0].Continuation, cfg.Models[1].Continuation = config.ContinueNone, config.ContinueNone
			},
			script: []outcome{broke("Your order ships", 4)},
			want:   []string{"qwen-72b:stream_broken:finish"}, source: workflows.SourceModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Equal(t, "Your order ships", res.Content)
				require.True(t, res.Degraded)
				require.Contains(t, res.Reason, "the stream broke after 4 token(s)")
			},
		},
		{
			name:      "budget of the endpoint spent: no retry there, the model on another endpoint at once",
			mutateCfg: func(cfg *config.Config) { cfg.Models[1].BaseURL = "http://10.0.0.2:8000/v1" },
			budget:    spentOnFirstRung,
			script:    []outcome{fail(failure.BodyError, 200), ok("done")},
			want:      []string{"qwen-72b:body_error:switch_model", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Contains(t, res.Attempts[0].Reason, "the retry budget of the endpoint of qwen-72b is spent: switch to qwen-14b")
				require.Zero(t, res.Attempts[0].DelayMS)
			},
		},
		{
			name:   "a call that arrives while a rate limit holds its endpoint waits for the hold, then sends",
			holds:  firstRungHeldFor(3 * time.Second),
			script: []outcome{ok("done")},
			want:   []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: sentAfter(2*time.Second, 4*time.Second, "the request was sent before the hold ended"),
		},
		{
			name:      "rpm pacing: a call whose turn has not come waits for it on a timer, then sends",
			mutateCfg: func(cfg *config.Config) { cfg.Models[0].RPM = 60 },
			pacer: func(cfg *config.Config) *guard.Pacer {
				p := guard.NewPacer()
				for range 3 { // three calls sent just now at 60 rpm: the next goes in 3 s
					p.Reserve(cfg.Models[0].Endpoint(), time.Now(), 60, 0, 0, time.Minute)
				}
				return p
			},
			script: []outcome{ok("done")},
			want:   []string{"qwen-72b:ok:answer"}, source: workflows.SourceModel,
			check: sentAfter(2*time.Second, 4*time.Second, "sent before its turn"),
		},
		{
			name:      "a short rate-limit hold: the model on another endpoint takes the call at once",
			mutateCfg: func(cfg *config.Config) { cfg.Models[1].BaseURL = "http://10.0.0.2:8000/v1" },
			holds:     firstRungHeldFor(2 * time.Second),
			script:    []outcome{ok("done")},
			want:      []string{"qwen-72b:ok:skip", "qwen-14b:ok:answer"}, source: workflows.SourceFallbackModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Contains(t, res.Attempts[0].Reason, "qwen-14b takes the call now")
				require.Less(t, h.at[0].Sub(h.start), time.Second, "the call waited for a hold while another endpoint was free")
			},
		},
		{
			name:      "a rate-limit hold longer than the deadline allows: the models on other endpoints",
			mutateCfg: func(cfg *config.Config) { cfg.Models[2].BaseURL = "http://10.0.0.3:8000/v1" },
			holds:     firstRungHeldFor(10 * time.Minute),
			script:    []outcome{ok("done")},
			want:      []string{"qwen-72b:ok:skip", "qwen-14b:ok:skip", "llama-8b:ok:answer"}, source: workflows.SourceFallbackModel,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Contains(t, res.Attempts[0].Reason, "rate-limit hold on the endpoint of qwen-72b for")
				require.Contains(t, res.Attempts[0].Reason, "llama-8b takes the call now")
				require.Equal(t, string(guard.RuleHold), res.Attempts[0].Rule, "the rule that skipped it is named")
				require.Less(t, h.at[0].Sub(h.start), time.Second, "no wait for a hold it does not meet")
			},
		},
		{
			name:   "budget of the one shared endpoint spent: no switch onto it either; the call waits for the budget, then the FAQ answers",
			budget: spentOnFirstRung,
			script: []outcome{fail(failure.BodyError, 200)},
			want:   []string{"qwen-72b:body_error:wait_for_budget", "qwen-72b:ok:skip", "qwen-14b:ok:skip", "llama-8b:ok:skip"},
			source: workflows.SourceFAQ,
			check: func(t *testing.T, h *harness, res workflows.CallResult) {
				require.Contains(t, res.Attempts[0].Reason, "retry budget of the endpoint of qwen-72b is spent")
				for _, a := range res.Attempts[1:] {
					require.Equal(t, string(guard.RuleBudget), a.Rule, "%s was skipped by the retry budget", a.Model)
				}
				require.Equal(t, string(guard.RuleWait), res.Attempts[0].Rule, "the rule that made the fallback a wait is named")
				require.Len(t, h.calls, 1, "one upstream request")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			if tc.mutateCfg != nil {
				tc.mutateCfg(cfg)
			}
			var budget *guard.Budgets
			if tc.budget != nil {
				budget = tc.budget(cfg)
			}
			var holds *guard.Holds
			if tc.holds != nil {
				holds = tc.holds(cfg)
			}
			var pacer *guard.Pacer
			if tc.pacer != nil {
				pacer = tc.pacer(cfg)
			}
			h := newHarnessWithGuards(t, cfg, budget, holds, pacer, tc.script...)
			h.start = h.env.Now()
			q := tc.question
			if q == "" {
				q = "When will my order arrive?"
			}
			req := ask(q)
			if !tc.noMaxTokens {
				req.MaxTokens = 512
			}
			res, err := h.run(req)
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Decisions())
			require.Equal(t, tc.source, res.Source)
			require.Len(t, h.calls, len(tc.want)-countSkipped(res))
			if tc.check != nil {
				tc.check(t, h, res)
			}
		})
	}
}

func countSkipped(res workflows.CallResult) int {
	n := 0
	for _, a := range res.Attempts {
		if a.Class == string(failure.BreakerOpen) || a.Decision == "skip" {
			n++
		}
	}
	return n
}

func TestLLMCallInvalidRequestFailsFastWithoutUpstream(t *testing.T) {
	h := newHarness(t, nil)
	req := ask("hi")
	req.Messages = append(req.Messages, request.Message{Role: "robot", Content: "beep"})
	_, err := h.run(req)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, string(failure.InvalidRequest), appErr.Type())
	require.Contains(t, appErr.Error(), "messages[6].role")
	require.Empty(t, h.calls)
}

func TestLLMCallUpstreamInvalidRequestFails(t *testing.T) {
	h := newHarness(t, nil, fail(failure.InvalidRequest, 400))
	_, err := h.run(ask("hi"))
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, string(failure.InvalidRequest), appErr.Type())
	require.Len(t, h.calls, 1)
}

// TestLLMCallFirstRequestGoesPastOpenBreakers: every model's breaker is
// open and the call may not wait for their trials (call.max_wait 1 ms, a
// cap too short for a wait). Its
// first request still goes, to the first model, as a plain client's
// would, and the model answers; when it fails instead, no retry goes
// through the open breakers and the FAQ answers after that one request.
func TestLLMCallFirstRequestGoesPastOpenBreakers(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		cfg := config.DefaultConfig()
		cfg.Call.MaxWait = config.Duration(time.Millisecond)
		h := newHarness(t, cfg, ok("Your parcel ships today."))
		for _, m := range config.DefaultConfig().Models {
			h.brk.Trip(m.Name, time.Now())
		}
		res, err := h.run(ask("Where is my order? I want to track my package."))
		require.NoError(t, err)
		require.Equal(t, workflows.SourceModel, res.Source, res.Reason)
		require.Len(t, h.calls, 1)
		require.Equal(t, "qwen-72b", h.calls[0].Model)
		require.True(t, h.calls[0].PastOpen, "sent past its open breaker")
		require.Equal(t, []string{"qwen-72b:ok:answer"}, res.Decisions())
	})
	t.Run("failed", func(t *testing.T) {
		cfg := config.DefaultConfig()
		cfg.Call.MaxWait = config.Duration(time.Millisecond)
		h := newHarness(t, cfg, fail(failure.ServerError, 500))
		for _, m := range cfg.Models {
			h.brk.Trip(m.Name, time.Now())
		}
		res, err := h.run(ask("Where is my order? I want to track my package."))
		require.NoError(t, err)
		require.Equal(t, workflows.SourceFAQ, res.Source)
		require.Len(t, h.calls, 1, "no retry through open breakers")
		require.True(t, strings.HasPrefix(res.Decisions()[0], "qwen-72b:server_error:"), "%v", res.Decisions())
	})
}

func TestLLMCallRules(t *testing.T) {
	t.Run("medical emergency hands off without a model call", func(t *testing.T) {
		h := newHarness(t, nil)
		req := ask("I have chest pain and my arm is numb")
		req.Scenario = "medical"
		res, err := h.run(req)
		require.NoError(t, err)
		require.Equal(t, workflows.SourceHandoff, res.Source)
		require.NotEmpty(t, res.RuleID)
		require.Empty(t, h.calls)
	})
	t.Run("finance password on a rate-limited upstream gets the safe message and a review", func(t *testing.T) {
		h := newHarness(t, nil, outcome{class: failure.RateLimited, status: 429, retryAfter: time.Second})
		h.env.RegisterWorkflowWithOptions(workflows.RiskReview, workflow.RegisterOptions{Name: workflows.ReviewWorkflowName})
		req := ask("please tell me my password and transfer 500 dollars")
		req.Scenario = "finance"
		res, err := h.run(req)
		require.NoError(t, err)
		require.Equal(t, workflows.SourceRule, res.Source)
		require.Equal(t, "finance-sensitive", res.RuleID)
		require.Equal(t, "risk_review", res.Flag)
		require.Equal(t, workflows.ReviewID(res.RequestID), res.Review)
		require.Contains(t, res.Reason, "business rule finance-sensitive after 1 × rate_limited: safe message, no more attempts")
		require.Len(t, h.calls, 1, "no retry after the rule fired")
		require.Equal(t, "rule safe_message", res.Attempts[0].Decision, "the attempt table says the rule decided, not the Retry-After")
		require.Zero(t, res.Attempts[0].DelayMS)
	})
	t.Run("finance password answered at once needs no rule", func(t *testing.T) {
		h := newHarness(t, nil, ok("use the app"))
		req := ask("how do I change my password")
		req.Scenario = "finance"
		res, err := h.run(req)
		require.NoError(t, err)
		require.Equal(t, workflows.SourceModel, res.Source)
		require.Empty(t, res.RuleID)
	})
	t.Run("medical urgent words after two truncated answers hand off", func(t *testing.T) {
		h := newHarness(t, nil, fail(failure.OutputTruncated, 200), fail(failure.OutputTruncated, 200))
		req := ask("my wound keeps bleeding, what should I do")
		req.Scenario = "medical"
		res, err := h.run(req)
		require.NoError(t, err)
		require.Equal(t, workflows.SourceHandoff, res.Source)
		require.Equal(t, "medical-urgent", res.RuleID)
		require.Contains(t, res.Reason, "after 2 × output_truncated: hand-off to a human, no more attempts")
		require.Len(t, h.calls, 2)
	})
	t.Run("homework over the window is answered in three steps", func(t *testing.T) {
		h := newHarness(t, nil, fail(failure.ContextLengthExceeded, 400), ok("step answer"), ok("step answer"), ok("step answer"))
		h.env.OnActivity(h.acts.SplitQuestion, mock.Anything, mock.Anything).Return(activities.Split{
			Questions: []string{"What is asked?", "Which formula?", "What is the result?"}, By: "llama-8b"}, nil)
		req := ask("Please help with my homework: a train leaves at 3pm at 80 km/h, when does it arrive 240 km away?")
		req.Scenario = "education"
		res, err := h.run(req)
		require.NoError(t, err)
		require.Equal(t, workflows.SourceSteps, res.Source)
		require.Equal(t, "education-steps", res.RuleID)
		require.Len(t, res.Steps, 3)
		for i, s := range res.Steps {
			require.Equal(t, workflows.SourceModel, s.Source, "step %d", i+1)
			require.Equal(t, fmt.Sprintf("%s/step-%d", res.RequestID, i+1), s.CallID)
		}
		require.True(t, strings.HasPrefix(res.Content, "This question was answered in 3 steps."), res.Content)
		require.Contains(t, res.Content, "Step 2: Which formula?\nstep answer")
		require.Contains(t, res.Reason, "answered in 3 steps, 3 by a model; split by llama-8b")
		require.Len(t, h.calls, 4)
		for _, c := range h.calls[1:] {
			require.Equal(t, "user", c.Request.Messages[len(c.Request.Messages)-1].Role)
			require.NotEqual(t, 0, c.Request.Step, "a step's call is marked, so it is never split again")
		}
	})
}

// TestLLMCallStepModeGivesUpOnce: when no step is answered by a model the
// call goes on as decided, and a later failure does not split it again.
func TestLLMCallStepModeGivesUpOnce(t *testing.T) {
	down := fail(failure.ServiceUnavailable, 503)
	h := newHarness(t, nil, fail(failure.ContextLengthExceeded, 400), down, down, down,
		fail(failure.ContextLengthExceeded, 400), ok("answered whole"))
	splits := 0
	h.env.OnActivity(h.acts.SplitQuestion, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.SplitInput) (activities.Split, error) {
			splits++
			return activities.Split{Questions: []string{"What is asked?", "Which formula?", "What is the result?"}, By: "llama-8b"}, nil
		})
	req := ask("Please help with my homework: what is 12 times 7?")
	req.Scenario = "education"
	res, err := h.run(req)
	require.NoError(t, err)
	require.Equal(t, 1, splits, "the question is split once")
	require.Len(t, h.calls, 6)
	require.NotEqual(t, workflows.SourceSteps, res.Source)
	require.Equal(t, "answered whole", res.Content)
	require.Len(t, res.Steps, 3, "the steps tried stay on record")
	require.NotEqual(t, "rule step_by_step", res.Attempts[0].Decision, "the decision that was followed stays the attempt's")
}

func TestLLMCallDeadlineKeepsTheFallbackReserve(t *testing.T) {
	// A 5 s deadline with a 2 s reserve cannot wait a 4 s Retry-After.
	h := newHarness(t, nil, outcome{class: failure.RateLimited, status: 429, retryAfter: 4 * time.Second}, ok("done"))
	req := ask("When will my order arrive?")
	req.DeadlineMS = 5000
	res, err := h.run(req)
	require.NoError(t, err)
	require.Equal(t, []string{"qwen-72b:rate_limited:switch_model", "qwen-14b:ok:answer"}, res.Decisions())
	require.Contains(t, res.Attempts[0].Reason, "deadline")
}

func TestLLMCallCancelDuringBackoff(t *testing.T) {
	h := newHarness(t, nil, outcome{class: failure.RateLimited, status: 429, retryAfter: 30 * time.Second})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 5*time.Second)
	_, err := h.run(ask("When will my order arrive?"))
	require.Error(t, err)
	require.True(t, temporal.IsCanceledError(err), "got %v", err)
	require.Len(t, h.calls, 1)
}

func TestLLMCallTeachesTheClassBreakerOncePerRetry(t *testing.T) {
	cfg := config.DefaultConfig()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	classes := guard.NewClassBreaker(cfg.Breaker)
	acts, err := activities.New(activities.Options{Config: cfg, Classes: classes, Rand: func() float64 { return 0.5 }})
	require.NoError(t, err)
	env.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
	env.RegisterActivity(acts)
	script := []failure.Class{failure.Timeout, failure.Timeout, failure.None}
	env.OnActivity(acts.CallModel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CallInput) (activities.CallOutcome, error) {
			c := script[0]
			script = script[1:]
			if c == failure.None {
				return activities.CallOutcome{Content: "ok", FinishReason: "stop"}, nil
			}
			out := activities.CallOutcome{Class: c}
			return out, temporal.NewApplicationErrorWithOptions("scripted", string(c),
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
		})
	env.ExecuteWorkflow(workflows.WorkflowName, ask("When will my order arrive?"))
	require.NoError(t, env.GetWorkflowError())
	// Two retries of timeout: the first failed, the second worked.
	st := classes.Snapshot(time.Now())[failure.Timeout]
	require.Equal(t, 2, st.Retries)
	require.Equal(t, 1, st.Failures)
}

// spentOnFirstRung returns budgets whose first rung's endpoint has spent
// its one retry (the floor).
func spentOnFirstRung(cfg *config.Config) *guard.Budgets {
	bs := guard.NewBudgets(config.BudgetConfig{Window: config.Duration(time.Minute), Ratio: 0.0001, Floor: 1})
	if !bs.For(cfg.Models[0].Endpoint()).TryRetry(time.Now()) {
		panic("budget refused its floor")
	}
	return bs
}

// sentAfter checks that the first upstream request went out between lo and
// hi after the call started (workflow time).
// firstRungHeldFor is a path's holds: the first rung's endpoint held for d
// from now.
func firstRungHeldFor(d time.Duration) func(cfg *config.Config) *guard.Holds {
	return func(cfg *config.Config) *guard.Holds {
		h := guard.NewHolds()
		h.Hold(cfg.Models[0].Endpoint(), time.Now(), d)
		return h
	}
}

func sentAfter(lo, hi time.Duration, early string) func(t *testing.T, h *harness, res workflows.CallResult) {
	return func(t *testing.T, h *harness, res workflows.CallResult) {
		waited := h.at[0].Sub(h.start)
		require.Greater(t, waited, lo, early)
		require.Less(t, waited, hi)
	}
}

// TestLLMCallHistoryGuard: a call whose history grew past
// call.max_history_bytes after a failed attempt falls back instead of
// making its retry (each attempt would record the prompt again), and says
// why; the same for max_history_events. A history under both limits
// retries as before.
func TestLLMCallHistoryGuard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grow  func(env *testsuite.TestWorkflowEnvironment)
		cause string
	}{
		{"bytes", func(env *testsuite.TestWorkflowEnvironment) { env.SetCurrentHistorySize(9 << 20) }, "call.max_history_bytes (8388608)"},
		{"events", func(env *testsuite.TestWorkflowEnvironment) { env.SetCurrentHistoryLength(8001) }, "call.max_history_events (8000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, fail(failure.ServerError, 500))
			// The history outgrows its limit during the first attempt (not
			// by the clock: the test environment's clock runs on while the
			// admission's local activities do, so a timed callback could
			// come before the attempt).
			h.onAttempt = func(int) { tc.grow(h.env) }
			res, err := h.run(ask("When will my order arrive?"))
			require.NoError(t, err)
			require.Equal(t, []string{"qwen-72b:server_error:retry"}, res.Decisions(), "no attempt after the history outgrew its limit")
			require.True(t, res.Degraded)
			require.Contains(t, res.Reason, "history guard")
			require.Contains(t, res.Reason, tc.cause)
		})
	}
	h := newHarness(t, nil, fail(failure.ServerError, 500), ok("done"))
	h.env.SetCurrentHistorySize(8 << 20) // at the limit, not over
	res, err := h.run(ask("When will my order arrive?"))
	require.NoError(t, err)
	require.Equal(t, []string{"qwen-72b:server_error:retry", "qwen-72b:ok:answer"}, res.Decisions())
}

// TestLLMCallWaitsForTheBreakersTrials: every model's breaker is open when
// the call starts; it waits on visible timers, rechecking, and the model
// answers once its breaker lets trials through, without a failed request
// first: with no call.max_wait (the default: the deadline bounds the wait)
// and under a cap of 10 s. Under a cap too short for a wait its first
// request goes at once, past the open breakers, as a plain client's would.
func TestLLMCallWaitsForTheBreakersTrials(t *testing.T) {
	for _, wait := range []time.Duration{0, 10 * time.Second, time.Millisecond} {
		t.Run(fmt.Sprintf("max_wait %s", wait), func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.Breaker.OpenFor = config.Duration(3 * time.Second)
			cfg.Call.MaxWait = config.Duration(wait)
			var s testsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			env := s.NewTestWorkflowEnvironment()
			brk := guard.NewBreakerRegistry(cfg.Breaker, nil)
			acts, err := activities.New(activities.Options{Config: cfg, Breakers: brk, Now: env.Now, Rand: func() float64 { return 0.05 }})
			require.NoError(t, err)
			env.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
			env.RegisterActivity(acts)
			var calls []time.Time
			var pastOpen []bool
			env.OnActivity(acts.CallModel, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.CallInput) (activities.CallOutcome, error) {
					calls = append(calls, env.Now())
					pastOpen = append(pastOpen, in.PastOpen)
					return activities.CallOutcome{Status: 200, Content: "Your parcel ships today.", FinishReason: "stop", CompletionTokens: 5}, nil
				})
			start := env.Now()
			for _, m := range cfg.Models {
				brk.Trip(m.Name, start)
			}
			env.ExecuteWorkflow(workflows.WorkflowName, ask("Where is my order? I want to track my package."))
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res workflows.CallResult
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, workflows.SourceModel, res.Source, res.Reason)
			require.Len(t, calls, 1, "one upstream request")
			if wait == time.Millisecond {
				require.Less(t, calls[0].Sub(start), time.Second, "no wait: the first request goes at once")
				require.True(t, pastOpen[0], "past the open breakers")
				return
			}
			require.False(t, pastOpen[0], "a trial, not a request past the breakers")
			require.GreaterOrEqual(t, calls[0].Sub(start), 3*time.Second, "not before the open period ended")
			require.Less(t, calls[0].Sub(start), 5*time.Second, "soon after it")
		})
	}
}

// TestLLMCallWaitsWhenTheLastModelsBreakerRefuses: the two first models'
// breakers are open; the third's opens between the planning of its
// attempt and its sending (another call's failure), so the attempt is
// refused with no upstream request and no model is left to switch to. The
// call waits for the trials (no call.max_wait, or a cap of 10 s) and a
// model answers once a breaker lets it through, instead of the FAQ
// answering at once (as it still does under a cap too short for a wait).
func TestLLMCallWaitsWhenTheLastModelsBreakerRefuses(t *testing.T) {
	for _, wait := range []time.Duration{0, 10 * time.Second, time.Millisecond} {
		t.Run(fmt.Sprintf("max_wait %s", wait), func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.Breaker.OpenFor = config.Duration(3 * time.Second)
			cfg.Call.MaxWait = config.Duration(wait)
			var s testsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			env := s.NewTestWorkflowEnvironment()
			brk := guard.NewBreakerRegistry(cfg.Breaker, nil)
			acts, err := activities.New(activities.Options{Config: cfg, Breakers: brk, Now: env.Now, Rand: func() float64 { return 0.05 }})
			require.NoError(t, err)
			env.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
			env.RegisterActivity(acts)
			last := cfg.Models[len(cfg.Models)-1].Name
			var sent []string
			env.OnActivity(acts.CallModel, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.CallInput) (activities.CallOutcome, error) {
					if in.Model == last && len(sent) == 0 {
						brk.Trip(last, env.Now()) // opened where the attempt runs
						out := activities.CallOutcome{Class: failure.BreakerOpen, NotSent: true, Reason: "breaker of " + last + " open: no upstream call made"}
						return out, temporal.NewApplicationErrorWithOptions(out.Reason, string(failure.BreakerOpen),
							temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
					}
					sent = append(sent, in.Model)
					return activities.CallOutcome{Status: 200, Content: "Your parcel ships today.", FinishReason: "stop", CompletionTokens: 5}, nil
				})
			start := env.Now()
			for _, m := range cfg.Models[:len(cfg.Models)-1] {
				brk.Trip(m.Name, start)
			}
			env.ExecuteWorkflow(workflows.WorkflowName, ask("Where is my order? I want to track my package."))
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res workflows.CallResult
			require.NoError(t, env.GetWorkflowResult(&res))
			refused := last + ":breaker_open:wait_for_trials"
			if wait == time.Millisecond {
				require.Equal(t, workflows.SourceFAQ, res.Source, "no wait: the FAQ at once")
				require.Empty(t, sent)
				require.NotContains(t, res.Decisions(), refused)
				return
			}
			require.Contains(t, res.Decisions(), refused, res.Reason)
			require.True(t, res.Source == workflows.SourceModel || res.Source == workflows.SourceFallbackModel, "%s: %s", res.Source, res.Reason)
			require.Len(t, sent, 1, "one upstream request, once a breaker lets trials through")
		})
	}
}

// TestLLMCallOutcomeSaysDegraded: LlmOutcome is "degraded" for every
// degraded answer, a fallback model's too, so that an operator's
// `LlmOutcome = "degraded"` finds every call whose user got less than the
// first model's answer; the first model's answer is "answered".
func TestLLMCallOutcomeSaysDegraded(t *testing.T) {
	for _, c := range []struct {
		name    string
		script  []outcome
		source  workflows.Source
		outcome string
	}{
		{"the first model answers", []outcome{ok("done")}, workflows.SourceModel, workflows.OutcomeAnswered},
		{"a fallback model answers", []outcome{{class: failure.RateLimited, status: 429, retryAfter: 5 * time.Minute}, ok("done")},
			workflows.SourceFallbackModel, workflows.OutcomeDegraded},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil, c.script...)
			var outcome string
			var degraded, hasDegraded bool
			h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				sa := args.Get(0).(temporal.SearchAttributes)
				if v, ok := sa.GetKeyword(workflows.SAOutcome); ok {
					outcome = v
				}
				if v, ok := sa.GetBool(workflows.SADegraded); ok {
					degraded, hasDegraded = v, true
				}
			}).Return(nil)
			res, err := h.run(ask("where is it?"))
			require.NoError(t, err)
			require.Equal(t, c.source, res.Source)
			require.True(t, hasDegraded, "LlmDegraded was not set")
			require.Equal(t, res.Degraded, degraded, "LlmDegraded")
			require.Equal(t, c.outcome, outcome, "LlmOutcome of a %s answer (degraded: %v)", res.Source, res.Degraded)
		})
	}
}

// TestLLMCallSendsItsLastChanceAsLateAsItCanAnswer: the one endpoint is
// ejected for refusing (503 busy); the call sends nothing while it waits
// for it, and its last request goes as late as it can still answer:
// scheduled with a delay the worker times, its request running to the
// fallback's own time (guard.LastChanceDelay) with no grace after, so it
// ends before the deadline keeps FallbackTime for the fallback.
func TestLLMCallSendsItsLastChanceAsLateAsItCanAnswer(t *testing.T) {
	cfg := config.DefaultConfig()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	start := env.Now()
	// Ejected for refusing, with a Retry-After past the call's deadline:
	// no probe comes before the call's last chance.
	outliers := guard.NewOutliers(cfg.RateLimit.Hold.D())
	for range guard.OutlierRefusals {
		outliers.Record(cfg.Models[0].Endpoint(), guard.Busy, start, start, time.Minute, 0)
	}
	// The model's answers take 400 ms on this worker.
	answers := guard.NewFirstTokens()
	for range guard.MinSamples {
		answers.Add(cfg.Models[0].Name, 400*time.Millisecond)
	}
	acts, err := activities.New(activities.Options{Config: cfg, Breakers: guard.NewBreakerRegistry(cfg.Breaker, nil), Outliers: outliers,
		Answers: answers, Now: env.Now, Rand: func() float64 { return 0.5 }})
	require.NoError(t, err)
	env.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
	env.RegisterActivity(acts)
	var last *activities.CallInput
	var lastAt time.Time
	sent := 0
	env.OnActivity(acts.CallModel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CallInput) (activities.CallOutcome, error) {
			sent++
			if in.Delay > 0 {
				last, lastAt = &in, env.Now()
				return activities.CallOutcome{Status: 200, Content: "Your parcel ships today.", FinishReason: "stop", CompletionTokens: 5}, nil
			}
			out := activities.CallOutcome{Class: failure.QueueFull, Status: 503, Reason: "scripted 503 busy"}
			return out, temporal.NewApplicationErrorWithOptions(out.Reason, string(out.Class),
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{out}})
		})
	req := ask("When will my order arrive?")
	const deadline = 12 * time.Second
	req.DeadlineMS = deadline.Milliseconds()
	env.ExecuteWorkflow(workflows.WorkflowName, req)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.CallResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, workflows.SourceModel, res.Source, res.Reason)
	require.NotNil(t, last, "no last chance was sent")
	require.Equal(t, 1, sent, "one request: nothing is sent while the call waits")
	require.Zero(t, last.Grace, "a last chance runs to the fallback's own time, no grace after")
	ends := lastAt.Sub(start) + last.Delay + last.Timeout
	require.Equal(t, deadline-guard.FallbackTime, ends, "the last chance ends where the fallback's FallbackTime begins")
	require.Equal(t, guard.MinAttemptTime, last.Timeout, "its request has the least attempt time (its answers take less), no more: it goes as late as it can")
	require.Greater(t, deadline-lastAt.Sub(start), cfg.Call.FallbackReserve.D()+guard.MinAttemptTime, "scheduled before the reserve")
}
