package llmworker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// stack is the rig's stack (a real dev server, llmsim and worker on a
// task queue of the test's own, so that per-process budgets and breakers
// of one test never leak into another) and the test it runs for.
type stack struct {
	*rig.Stack
	t *testing.T
}

var (
	shared   testenv.Shared
	postgres testenv.SharedPostgres
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	postgres.Stop()
	os.Exit(code)
}

func newStack(t *testing.T, mutate func(*config.Config)) *stack {
	t.Helper()
	return newStackWith(t, llmsim.Options{}, mutate)
}

// newStackWith is newStack with llmsim started with opts.
func newStackWith(t *testing.T, opts llmsim.Options, mutate func(*config.Config)) *stack {
	t.Helper()
	return &stack{Stack: rig.New(t, rig.Options{Shared: &shared, Sim: opts, Policy: mutate}), t: t}
}

func question(q string) workflows.CallRequest {
	return workflows.CallRequest{
		UserID: "u-" + uuid.NewString()[:8], SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{
			{Role: "system", Content: "You are a support agent."},
			{Role: "user", Content: q},
		},
	}
}

func TestIntegrationRateLimitedWaitsRetryAfter(t *testing.T) {
	s := newStack(t, nil)
	res := s.Call(question("[[sim fault=rate_limited retry_after=2s times=1]] Where is my order?"))
	require.Equal(t, []string{"qwen-72b:rate_limited:wait retry-after", "qwen-72b:ok:answer"}, res.Decisions())
	require.Equal(t, int64(2000), res.Attempts[0].DelayMS)
	up := s.Upstream(res.RequestID)
	require.Equal(t, 2, up.Attempts)
	gap := time.Duration(up.Requests[1].AtMS-up.Requests[0].AtMS) * time.Millisecond
	require.GreaterOrEqual(t, gap, 2*time.Second, "the retry came before Retry-After")
	require.Less(t, gap, 4*time.Second, "the retry waited far longer than Retry-After")
	require.Equal(t, res.RequestID+"/1", up.Requests[0].IdempotencyKey)
	require.Equal(t, res.RequestID+"/2", up.Requests[1].IdempotencyKey)
	require.Contains(t, res.Content, "[qwen-72b]")
}

// TestIntegrationRateLimitIsBackpressure: a burst of 429s (Retry-After
// 1 s) on the shared endpoint refuses each of 20 calls once. The rate limit
// holds the endpoint instead of opening the model's breaker, so every call
// is answered by the preferred model once the hold is over.
//
// The refusals eject the endpoint, and each probe is one call's request:
// when it is a first request, the burst refuses it. Probes that all happen
// to be first requests show an endpoint refusing without an answer, for
// longer each time, and past rate_limit.breaker_after (30 s) refusals count
// against the breaker, as an outage's do. That is not what this test
// checks, and a loaded machine stretches the probes' timers towards it, so
// breaker_after is set out of reach.
func TestIntegrationRateLimitIsBackpressure(t *testing.T) {
	s := newStack(t, func(cfg *config.Config) {
		cfg.Budget.Floor = 100                                         // the budget is not under test
		cfg.RateLimit.BreakerAfter = config.Duration(10 * time.Minute) // nor is breaker_after
	})
	for _, r := range s.burst(20, "[[sim fault=rate_limited retry_after=1s times=1]] burst") {
		require.Equal(t, workflows.SourceModel, r.Source, "a 429 burst sent a call elsewhere: %v", r.Decisions())
		require.False(t, r.Degraded)
	}
	require.Equal(t, 20, s.Sim.Stats().Faults["rate_limited"])
}

// TestIntegrationCallsWaitForARateLimitHold: a call that arrives while
// another call's 429 holds the endpoint (its x-ratelimit-remaining-requests
// says 0 until the reset, 2 s, as a provider's 429 does) is not sent to be
// refused: it waits for the hold, weighs it again at its release, and the
// model answers it.
func TestIntegrationCallsWaitForARateLimitHold(t *testing.T) {
	s := newStack(t, nil)
	first := make(chan workflows.CallResult, 1)
	go func() { first <- s.Call(question("[[sim fault=rate_limited retry_after=2s times=1]] the first")) }()
	require.Eventually(t, func() bool { return s.Sim.Stats().Faults["rate_limited"] > 0 }, 20*time.Second, 10*time.Millisecond)
	res := s.Call(question("the second, during the hold"))
	require.Equal(t, []string{"qwen-72b:ok:answer"}, res.Decisions())
	held := s.Upstream((<-first).RequestID).Requests[0]
	sent := s.Upstream(res.RequestID).Requests[0]
	gap := time.Duration(sent.AtMS-held.AtMS) * time.Millisecond
	require.GreaterOrEqual(t, gap, 1800*time.Millisecond, "the second call was sent during the hold")
	require.Equal(t, 1, s.Sim.Stats().Faults["rate_limited"], "only the first call was refused")
}

// TestIntegrationProviderHeadroomPacesCalls: the upstream's own
// x-ratelimit-remaining-requests: 0 holds the endpoint until its
// x-ratelimit-reset-requests, so the next call waits its turn instead of
// being refused (a gateway limit of one request every 2 s, bucket of 2:
// six calls in a row empty it however slow the machine is).
func TestIntegrationProviderHeadroomPacesCalls(t *testing.T) {
	sc, err := llmsim.ParseScenario([]byte(`
models:
  - {name: qwen-72b, rate_limit: 0.5, burst: 2, ttft: 0s, itl: 0s}
  - {name: qwen-14b}
  - {name: llama-8b}
`), "headroom.yaml")
	require.NoError(t, err)
	s := newStackWith(t, llmsim.Options{Scenario: sc}, nil)
	held := 0
	for i := range 6 {
		res := s.Call(question(fmt.Sprintf("paced call %d", i)))
		require.Equal(t, []string{"qwen-72b:ok:answer"}, res.Decisions(), "call %d", i)
		iter := s.Client.GetWorkflowHistory(context.Background(), res.RequestID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(t, err)
			if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
				held++ // a call that fails nothing waits only for a hold
			}
		}
	}
	st := s.Sim.Stats()
	require.Zero(t, st.Faults["rate_limited"], "a call was sent although the upstream said no request was left")
	require.Equal(t, 6, st.Models["qwen-72b"].Arrivals)
	require.Positive(t, held, "no call waited for the upstream's headroom: the test did not exercise it")
	t.Logf("%d of 6 calls waited for the upstream's x-ratelimit-reset-requests", held)
}

func TestIntegrationContextLengthCuredByPruning(t *testing.T) {
	s := newStack(t, nil)
	req := question("")
	req.Messages = req.Messages[:1]
	long := strings.Repeat("The parcel was handed to the courier and scanned at the depot. ", 8)
	for i := 0; i < 12; i++ {
		req.Messages = append(req.Messages,
			request.Message{Role: "user", Content: fmt.Sprintf("round %d: %s", i, long)},
			request.Message{Role: "assistant", Content: "noted: " + long})
	}
	req.Messages = append(req.Messages, request.Message{Role: "user",
		Content: "[[sim fault=context_length_exceeded window=1200 times=always]] So where is it now?"})
	res := s.Call(req)
	require.Equal(t, []string{"qwen-72b:context_length_exceeded:prune+resend", "qwen-72b:ok:answer"}, res.Decisions())
	require.Equal(t, workflows.SourceModel, res.Source)
	require.Equal(t, 26, res.Attempts[0].Messages)
	require.Equal(t, 1+3*2+1, res.Attempts[1].Messages, "system + last 3 rounds + question")
	require.Less(t, res.Attempts[1].PromptTokens, res.Attempts[0].PromptTokens)
	require.Zero(t, res.Attempts[0].DelayMS, "resent at once")
	require.Equal(t, 2, s.Upstream(res.RequestID).Attempts)
}

// TestIntegrationQueueFullSwitchesModel: a full queue is its model's; the
// ladder's next model answers at once.
func TestIntegrationQueueFullSwitchesModel(t *testing.T) {
	s := newStack(t, nil)
	res := s.Call(question("[[sim fault=queue_full model=qwen-72b times=always]] Where is my order?"))
	require.Equal(t, []string{"qwen-72b:queue_full:switch_model", "qwen-14b:ok:answer"}, res.Decisions())
	require.Equal(t, workflows.SourceFallbackModel, res.Source)
	require.Contains(t, res.Content, "[qwen-14b]")
	up := s.Upstream(res.RequestID)
	require.Equal(t, []string{"qwen-72b", "qwen-14b"}, []string{up.Requests[0].Model, up.Requests[1].Model})
}

// TestIntegrationQueueFullOnTheLastModelIsHeldAndResent: with no other
// model to take the call, a full queue is backpressure, not a failed
// attempt: the model's queue is held for rate_limit.hold (1 s), released
// with jitter (up to half the hold more), and the same request is resent,
// which answers.
func TestIntegrationQueueFullOnTheLastModelIsHeldAndResent(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Models = c.Models[:1] })
	res := s.Call(question("[[sim fault=queue_full model=qwen-72b times=1]] Where is my order?"))
	require.Equal(t, []string{"qwen-72b:queue_full:hold+resend", "qwen-72b:ok:answer"}, res.Decisions())
	require.Equal(t, workflows.SourceModel, res.Source)
	require.GreaterOrEqual(t, res.Attempts[0].DelayMS, int64(1000), "released before the hold's end")
	require.LessOrEqual(t, res.Attempts[0].DelayMS, int64(1500), "released after the hold's jitter")
	up := s.Upstream(res.RequestID)
	require.Equal(t, []string{"qwen-72b", "qwen-72b"}, []string{up.Requests[0].Model, up.Requests[1].Model})
}

func TestIntegrationMaintenanceAnswersFromFAQWithoutRetry(t *testing.T) {
	s := newStack(t, nil)
	sc, err := llmsim.BuiltinScenario("class-service_unavailable")
	require.NoError(t, err)
	require.NoError(t, s.Sim.SetScenario(sc))
	res := s.Call(question("How do I get a refund for my order?"))
	require.Equal(t, []string{"qwen-72b:service_unavailable:fallback"}, res.Decisions())
	require.Equal(t, workflows.SourceFAQ, res.Source)
	require.True(t, res.Degraded)
	require.NotEmpty(t, res.FAQID)
	require.Equal(t, 1, s.Upstream(res.RequestID).Attempts, "maintenance must not be retried")
}

func TestIntegrationBreakerOpensAndLaterCallsSkipTheModel(t *testing.T) {
	// Open for 30 s (the policy's first period is 1 s): the next call
	// meets it open however slow this machine is.
	s := newStack(t, func(cfg *config.Config) { cfg.Breaker.OpenFor = config.Duration(30 * time.Second) })
	// Each call fails twice on qwen-72b (retry, then switch): after three
	// calls the breaker has seen 5+ consecutive failures.
	for i := 0; i < 3; i++ {
		res := s.Call(question(fmt.Sprintf("[[sim fault=server_error model=qwen-72b times=always]] order %d?", i)))
		require.Equal(t, workflows.SourceFallbackModel, res.Source)
	}
	before := s.Sim.Stats().Models["qwen-72b"].Arrivals
	res := s.Call(question("[[sim fault=server_error model=qwen-72b times=always]] and now?"))
	require.Equal(t, "qwen-72b:breaker_open:switch_model", res.Decisions()[0])
	require.Equal(t, "qwen-14b:ok:answer", res.Decisions()[1])
	require.Equal(t, before, s.Sim.Stats().Models["qwen-72b"].Arrivals, "no request may reach a model whose breaker is open")
	for _, r := range s.Upstream(res.RequestID).Requests {
		require.NotEqual(t, "qwen-72b", r.Model)
	}
}

// TestIntegrationBreakerLetsARecoveredModelServeWithinSeconds: with the
// default policy, a breaker that opened stays open only open_for (1 s)
// and then lets calls through as trials, one until one succeeds and then
// up to 5 at once, so a model that works again answers again seconds
// later, not after a fixed 30 s. The calls after the trip are healthy and
// come in rounds of 10 at once: some skip qwen-72b (open, or beyond the
// trials out), until it answers a whole round.
func TestIntegrationBreakerLetsARecoveredModelServeWithinSeconds(t *testing.T) {
	s := newStack(t, nil)
	for i := 0; i < 3; i++ { // 6 failures on qwen-72b: open
		s.Call(question(fmt.Sprintf("[[sim fault=server_error model=qwen-72b times=always]] order %d?", i)))
	}
	tripped := time.Now()
	skipped := 0
	for round := 0; ; round++ {
		require.Less(t, time.Since(tripped), 20*time.Second, "qwen-72b did not answer a whole round of calls within 20 s of its breaker opening (%d rounds, %d calls skipped it)", round, skipped)
		first := make([]string, 10)
		var wg sync.WaitGroup
		for i := range first {
			wg.Go(func() { first[i] = s.Call(question(fmt.Sprintf("and now, %d.%d?", round, i))).Decisions()[0] })
		}
		wg.Wait()
		answered := 0
		for i, d := range first {
			switch d {
			case "qwen-72b:ok:answer":
				answered++
			case "qwen-72b:breaker_open:switch_model":
				skipped++
			default:
				t.Fatalf("round %d, call %d: first decision %q, want qwen-72b answering or skipped by its breaker", round, i, d)
			}
		}
		if answered == len(first) {
			break
		}
	}
	require.Positive(t, skipped, "no call met the open breaker")
	t.Logf("qwen-72b answered a whole round %v after its breaker opened; %d calls skipped it", time.Since(tripped).Round(10*time.Millisecond), skipped)
}

// TestIntegrationBurstRetriesStayWithinBudget: every request fails with a
// 502; the retries and switches of 30 calls at once all come from the one
// endpoint's budget (floor 3 + 10 % of the calls).
func TestIntegrationBurstRetriesStayWithinBudget(t *testing.T) {
	s := newStack(t, func(cfg *config.Config) {
		cfg.Budget.Floor, cfg.Budget.Ratio = 3, 0.1
		cfg.Breaker.ConsecutiveFailures = 1000 // keep the breaker out of this test
		cfg.Breaker.MinCalls = 1000
		cfg.Breaker.Window = 1000
	})
	const calls = 30
	results := s.burst(calls, "[[sim fault=bad_gateway times=always]] burst")
	upstream := 0
	for _, r := range results {
		require.True(t, r.Degraded, "every upstream attempt fails: the fallback answers")
		upstream += s.Upstream(r.RequestID).Attempts
	}
	limit := calls + int(0.1*calls) + 3
	require.Equal(t, s.Sim.Stats().Totals.Arrivals, upstream)
	require.LessOrEqual(t, upstream, limit, "upstream requests beyond one per call + the budget (floor 3 + 10%% of %d)", calls)
	require.Greater(t, upstream, calls, "the floor lets a few retries through")
	t.Logf("%d calls: %d upstream requests (at most %d; %.2f per call)", calls, upstream, limit, float64(upstream)/calls)
}

// TestIntegrationSharedEndpointHangNoStorm: every rung on one endpoint,
// and that endpoint hangs. 40 calls at once make at most 40 × 1.1 + floor
// upstream requests (switching models on the sick endpoint is charged like
// a retry), and every call is answered, by the business fallback.
func TestIntegrationSharedEndpointHangNoStorm(t *testing.T) {
	s := newStack(t, func(cfg *config.Config) {
		for i := range cfg.Models {
			cfg.Models[i].FirstTokenTimeout = config.Duration(2 * time.Second)
		}
	})
	const calls = 40
	results := s.burst(calls, "[[sim fault=hang times=always]] hang")
	for _, r := range results {
		require.Contains(t, []workflows.Source{workflows.SourceFAQ, workflows.SourceRule, workflows.SourcePlaceholder}, r.Source,
			"a hung endpoint: the fallback answers (%v)", r.Decisions())
	}
	b := s.Config.Budget
	limit := int(calls*(1+b.Ratio)) + b.Floor
	arrivals := s.Sim.Stats().Totals.Arrivals
	require.GreaterOrEqual(t, arrivals, calls, "every call sent its first request")
	require.LessOrEqual(t, arrivals, limit, "upstream requests of %d calls on a hung endpoint (at most %d × %.2f + floor %d)", calls, calls, 1+b.Ratio, b.Floor)
	t.Logf("%d calls on a hung shared endpoint: %d upstream requests (%.2f×; at most %d)", calls, arrivals, float64(arrivals)/calls, limit)
}

// burst runs n calls at once, each asking prefix plus its number.
func (s *stack) burst(n int, prefix string) []workflows.CallResult {
	s.t.Helper()
	var wg sync.WaitGroup
	results := make([]workflows.CallResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Call(question(fmt.Sprintf("%s %d", prefix, i)))
		}()
	}
	wg.Wait()
	return results
}

func TestIntegrationConcurrentDuplicatesMakeOneUpstreamCall(t *testing.T) {
	s := newStack(t, nil)
	req := question("[[sim fault=latency latency=1s times=always]] Can I change my delivery address?")
	const n = 10
	var wg sync.WaitGroup
	results := make([]workflows.CallResult, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = s.Call(req)
		}(i)
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		require.Equal(t, results[0], results[i])
	}
	id := results[0].RequestID
	require.Equal(t, request.KeyFor(req), id)
	require.Equal(t, 1, s.Upstream(id).Attempts, "ten duplicate starts must reach the upstream once")

	// After completion a duplicate returns the recorded result, no new run.
	again := s.Call(req)
	require.Equal(t, results[0], again)
	require.Equal(t, 1, s.Upstream(id).Attempts)
}

func TestIntegrationWorkerKilledMidAttemptIsReplaced(t *testing.T) {
	s := newStack(t, nil)
	s.Worker.Stop() // only the worker process below serves the first attempt

	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin, "../worker")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("call:\n  heartbeat_timeout: 2s\n"), 0o600))
	proc := exec.Command(bin, "--metrics-addr", "")
	proc.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+shared.Server(t).FrontendHostPort(), "LLM_BASE_URL="+s.Sim.BaseURL,
		"POLICY_FILE="+policy, "WORKER_TASK_QUEUE="+s.TaskQueue)
	require.NoError(t, proc.Start())
	t.Cleanup(func() { _ = proc.Process.Kill(); _, _ = proc.Process.Wait() })

	req := question("[[sim fault=latency latency=30s times=1]] Is my refund processed?")
	run, err := s.Calls.Start(context.Background(), req)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Upstream(run.GetID()).Attempts == 1 }, 30*time.Second, 50*time.Millisecond,
		"the first attempt never reached the upstream")
	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	_, _ = proc.Process.Wait()
	s.StartWorker(nil)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res workflows.CallResult
	require.NoError(t, run.Get(ctx, &res))
	t.Logf("attempts %+v upstream %+v", res.Attempts, s.Upstream(run.GetID()))
	require.Equal(t, []string{"qwen-72b:worker_lost:resend", "qwen-72b:ok:answer"}, res.Decisions())
	require.Equal(t, workflows.SourceModel, res.Source)
	up := s.Upstream(run.GetID())
	require.Equal(t, 2, up.Attempts, "one resent attempt")
	require.Equal(t, up.Requests[0].IdempotencyKey, up.Requests[1].IdempotencyKey, "a resend keeps its Idempotency-Key")
}

func TestIntegrationCancelCancelsTheHTTPRequest(t *testing.T) {
	s := newStack(t, nil)
	req := question("[[sim fault=latency latency=60s times=always]] Where is my order?")
	run, err := s.Calls.Start(context.Background(), req)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Upstream(run.GetID()).Attempts == 1 }, 30*time.Second, 50*time.Millisecond,
		"the attempt never reached the upstream")

	cancelled := time.Now()
	require.NoError(t, s.Client.CancelWorkflow(context.Background(), run.GetID(), ""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the call must end cancelled, got %v", err)
	// The client side of the upstream request went away: llmsim records the
	// attempt as given up by its client (499), well before its 60 s latency.
	require.Eventually(t, func() bool {
		return s.Sim.Stats().Totals.Responses[llmsim.OutcomeClientGone] == 1
	}, 30*time.Second, 50*time.Millisecond, "the HTTP request was not cancelled")
	require.Less(t, time.Since(cancelled), 30*time.Second)
	require.Equal(t, 1, s.Upstream(run.GetID()).Attempts, "no new attempt after the cancellation")

	desc, err := s.Client.DescribeWorkflowExecution(ctx, run.GetID(), "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
}

// TestIntegrationOneCapOverAllLayers: a class allowed to retry without
// limit (body_error, max -1) on every rung still stops at the attempts
// cap: 4 upstream requests in all, then the fallback.
func TestIntegrationOneCapOverAllLayers(t *testing.T) {
	s := newStack(t, func(cfg *config.Config) {
		cfg.Budget.Floor = 100 // the budget is not under test
		cfg.Backoff.Base = config.Duration(10 * time.Millisecond)
	})
	res := s.Call(question("[[sim fault=error_body times=always]] where is my order?"))
	require.Contains(t, []workflows.Source{workflows.SourceFAQ, workflows.SourceRule, workflows.SourcePlaceholder}, res.Source, "%v", res.Decisions())
	require.Equal(t, s.Config.Call.MaxAttempts, s.Upstream(res.RequestID).Attempts, "upstream requests of one call")
	require.Contains(t, res.Attempts[len(res.Attempts)-1].Reason, "attempts cap reached (4/4 upstream requests)")
}
