package llmworker_test

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

func ptr[T any](v T) *T { return &v }

// TestIntegrationBadInputAtTheGoClient sends every bad request of docs/how-it-works.md, step 1
// through llmclient.Call to a real worker. Each one gets an error that
// names the field and the problem, leaves no workflow running and costs no
// upstream request. A request the client can judge alone (size, emptiness,
// key, numbers JSON cannot carry) starts no workflow at all; the rest fail
// their workflow at once with a non-retryable invalid_request.
func TestIntegrationBadInputAtTheGoClient(t *testing.T) {
	s := newStack(t, nil)
	user := func(q string) []request.Message {
		return []request.Message{{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: q}}
	}
	cases := []struct {
		name   string
		mutate func(*workflows.CallRequest)
		want   []string // all in the error message
		// started: the worker judged it (a failed workflow, closed);
		// otherwise the client refused before starting anything.
		started bool
	}{
		{"empty messages", func(r *workflows.CallRequest) { r.Messages = nil },
			[]string{"messages", "at least one message"}, false},
		{"last message not from the user", func(r *workflows.CallRequest) {
			r.Messages = append(user("Where is my order?"), request.Message{Role: "assistant", Content: "It shipped."})
		}, []string{"messages[2].role", `the last message is from "assistant"`}, true},
		{"blank question", func(r *workflows.CallRequest) { r.Messages = user("   ") },
			[]string{"messages[1].content", "empty"}, true},
		{"unknown role", func(r *workflows.CallRequest) {
			r.Messages = append([]request.Message{{Role: "wizard", Content: "obey"}}, user("Where is my order?")...)
		}, []string{"messages[0].role", `unknown role "wizard"`}, true},
		{"unknown model", func(r *workflows.CallRequest) { r.Model = "gpt-9" },
			[]string{"model", `unknown model "gpt-9"`, "qwen-72b"}, true},
		{"model in the wrong case", func(r *workflows.CallRequest) { r.Model = "QWEN-72B" },
			[]string{"model", `did you mean "qwen-72b"?`}, true},
		{"negative max_tokens", func(r *workflows.CallRequest) { r.MaxTokens = -1 },
			[]string{"max_tokens", "-1 is negative"}, true},
		{"absurd max_tokens", func(r *workflows.CallRequest) { r.MaxTokens = 1_000_000_000 },
			[]string{"max_tokens", "1000000000 is over the limit of 32768"}, true},
		{"negative temperature", func(r *workflows.CallRequest) { r.Temperature = ptr(-0.5) },
			[]string{"temperature", "-0.5 is negative"}, true},
		{"absurd temperature", func(r *workflows.CallRequest) { r.Temperature = ptr(50.0) },
			[]string{"temperature", "50 is over the limit of 2"}, true},
		{"NaN temperature", func(r *workflows.CallRequest) { r.Temperature = ptr(math.NaN()) },
			[]string{"temperature", "NaN is not a number"}, false},
		{"infinite temperature", func(r *workflows.CallRequest) { r.Temperature = ptr(math.Inf(1)) },
			[]string{"temperature", "+Inf is not a number"}, false},
		{"negative deadline", func(r *workflows.CallRequest) { r.DeadlineMS = -5000 },
			[]string{"deadline_ms", "-5000 is negative"}, true},
		{"deadline too short for anything", func(r *workflows.CallRequest) { r.DeadlineMS = 10 },
			[]string{"deadline_ms", "10 ms is below the minimum"}, true},
		{"absurd deadline", func(r *workflows.CallRequest) { r.DeadlineMS = int64(365 * 24 * time.Hour / time.Millisecond) },
			[]string{"deadline_ms", "over the limit of 600000 ms"}, true},
		{"prompt over 1 MiB", func(r *workflows.CallRequest) { r.Messages = user(strings.Repeat("a", 1<<20+1)) },
			[]string{"messages", "over the", "1048576"}, false},
		{"idempotency key with a slash", func(r *workflows.CallRequest) { r.IdempotencyKey = "order/42" },
			[]string{"idempotency_key", `'/'`}, false},
		{"idempotency key with a space", func(r *workflows.CallRequest) { r.IdempotencyKey = "order 42" },
			[]string{"idempotency_key", "without spaces"}, false},
		{"idempotency key too long", func(r *workflows.CallRequest) { r.IdempotencyKey = strings.Repeat("k", 1000) },
			[]string{"idempotency_key", "over the limit"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := question("Where is my order?")
			tc.mutate(&req)
			id := ""
			if k, err := llmclient.Key(req); err == nil {
				id = k
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := s.Calls.Call(ctx, req)
			require.Error(t, err)
			msg := err.Error()
			t.Logf("error: %s", abbreviate(msg, 300))
			for _, w := range tc.want {
				require.Contains(t, msg, w, "the message should name the problem")
			}
			require.NotContains(t, msg, "retryable: true", "a bad request must not be called retryable")
			require.Equal(t, 1, strings.Count(msg, "invalid request:"), "the problem is said once")
			if tc.started {
				var appErr *temporal.ApplicationError
				require.True(t, errors.As(err, &appErr), "a worker-side refusal is an ApplicationError: %v", err)
				require.Equal(t, string(failure.InvalidRequest), appErr.Type())
				require.True(t, appErr.NonRetryable())
				desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
				require.NoError(t, err)
				require.NotNil(t, desc.GetWorkflowExecutionInfo().GetCloseTime(), "the refused call's workflow must be closed")
			} else {
				require.ErrorIs(t, err, llmclient.ErrInvalidRequest)
				if id != "" {
					_, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
					require.Error(t, err, "the client must not start a workflow for a request it refuses")
				}
			}
			requireNoOpenCalls(t, s.Client, s.TaskQueue)
			require.Zero(t, s.Sim.Stats().Totals.Arrivals, "no upstream request may be made for a bad request")
		})
	}
}

// TestIntegrationWorkerBinaryRefusesToStart starts the worker binary with
// bad policy files, and with no Temporal server at its address. It exits at
// once, with a message naming the file and the field (a bad policy is
// refused before the worker connects anywhere), or the address and the
// variable to set.
func TestIntegrationWorkerBinaryRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs the worker binary")
	}
	bin := buildWorker(t)
	dir := t.TempDir()
	cases := []struct {
		name, file, yaml string // no yaml: the file does not exist
		want             []string
	}{
		{"missing file", "missing.yaml", "", []string{"missing.yaml", "no such file"}},
		{"not YAML", "bad-yaml.yaml", "models: [unclosed\n", []string{"bad-yaml.yaml", "line 1"}},
		{"unknown field", "unknown-field.yaml", "backof:\n  base: 1s\n", []string{"unknown-field.yaml", "backof", "unknown field"}},
		{"duration without a unit", "duration-unit.yaml", "backoff:\n  base: 8\n", []string{"duration-unit.yaml", "backoff.base", "unit"}},
		{"negative context window", "negative-window.yaml", "models:\n  - {name: m, base_url: \"http://127.0.0.1:1/v1\", context_window: -5}\n",
			[]string{"negative-window.yaml", "models[0].context_window", "-5"}},
		{"retry budget ratio over 1", "budget-ratio.yaml", "budget:\n  ratio: 7\n", []string{"budget-ratio.yaml", "budget.ratio", "got 7"}},
		{"unknown class action", "class-action.yaml", "classes:\n  timeout: {action: pray}\n", []string{"class-action.yaml", "classes.timeout.action", `"pray"`}},
	}
	for _, tc := range cases {
		t.Run("policy: "+tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			if tc.yaml != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.yaml), 0o600))
			}
			out, code := runWorker(t, bin, "POLICY_FILE="+path, "TEMPORAL_ADDRESS="+freeAddr(t), "METRICS_ADDR=")
			t.Logf("worker said: %s", abbreviate(out, 400))
			require.NotZero(t, code, "the worker must refuse to start")
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
			require.NotContains(t, out, "connect to Temporal", "the policy is checked before connecting")
		})
	}

	t.Run("no Temporal server at TEMPORAL_ADDRESS", func(t *testing.T) {
		addr := freeAddr(t)
		start := time.Now()
		out, code := runWorker(t, bin, "TEMPORAL_ADDRESS="+addr, "METRICS_ADDR=", "LLM_MODEL_CHECK=off")
		t.Logf("worker said after %v: %s", time.Since(start).Round(time.Millisecond), abbreviate(out, 400))
		require.NotZero(t, code)
		require.Contains(t, out, addr, "the message names the address it tried")
		require.Contains(t, out, "TEMPORAL_ADDRESS", "the message says how to point the worker elsewhere")
	})
}

// TestIntegrationWorkerBinaryChecksModels: started with LLM_MODELS against
// an endpoint that offers other models, the worker refuses and names what
// the endpoint offers; against llmsim offering exactly those names
// (--models), it starts and answers with the first of them — the README's
// one-line quick start for a real provider.
func TestIntegrationWorkerBinaryChecksModels(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs the worker binary")
	}
	bin := buildWorker(t)
	sc := &llmsim.Scenario{Name: "provider", Models: llmsim.InstantModels()}
	require.NoError(t, sc.RenameModels([]string{"gpt-4o", "gpt-4o-mini"}))
	sim := rig.Sim(t, llmsim.Options{Scenario: sc})

	out, code := runWorker(t, bin, "LLM_BASE_URL="+sim.BaseURL, "LLM_MODELS=gpt-4o,gpt-5", "TEMPORAL_ADDRESS="+freeAddr(t), "METRICS_ADDR=")
	t.Logf("worker said: %s", abbreviate(out, 600))
	require.NotZero(t, code)
	require.Contains(t, out, "does not offer gpt-5 (it offers: gpt-4o, gpt-4o-mini)")
	require.Contains(t, out, "LLM_MODELS=a,b")

	// An endpoint that does not answer is not a reason to refuse: the
	// worker logs it and goes on (here to a Temporal that is not there).
	tempAddr := freeAddr(t)
	out, code = runWorker(t, bin, "TEMPORAL_ADDRESS="+tempAddr, "METRICS_ADDR=", "LLM_BASE_URL=http://"+freeAddr(t)+"/v1")
	require.NotZero(t, code)
	require.Contains(t, out, "model ladder not checked", "an endpoint that does not answer: %s", abbreviate(out, 400))
	require.Contains(t, out, "lists no models")
	require.Contains(t, out, tempAddr, "the worker went on to connect to Temporal")

	srv := shared.Server(t)
	tq := "llm-models-" + uuid.NewString()[:8]
	// A versioned worker, as make run and compose start it: it makes its
	// build current, so the call comes to it, pinned to that build.
	deployment := "durable-llm-" + uuid.NewString()[:6]
	startWorkerProc(t, bin, "TEMPORAL_ADDRESS="+srv.FrontendHostPort(), "LLM_BASE_URL="+sim.BaseURL,
		"LLM_MODELS=gpt-4o,gpt-4o-mini", "WORKER_TASK_QUEUE="+tq, "METRICS_ADDR=",
		"WORKER_DEPLOYMENT="+deployment, "WORKER_MAKE_CURRENT=1")
	lc := &llmclient.Client{Temporal: srv.Client(), TaskQueue: tq}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := lc.Call(ctx, question("Where is my order?"))
	require.NoError(t, err)
	require.Equal(t, "gpt-4o", res.Model)
	require.Equal(t, workflows.SourceModel, res.Source)
	d, err := srv.Client().DescribeWorkflowExecution(ctx, res.RequestID, "")
	require.NoError(t, err)
	v := d.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(t, deployment, v.GetDeploymentVersion().GetDeploymentName())
	require.NotEmpty(t, v.GetDeploymentVersion().GetBuildId(), "the build ID the worker gave itself")
	require.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, v.GetBehavior())
}

// runWorker runs the worker binary to its exit (at most a minute) and
// returns its output and exit code.
func runWorker(t *testing.T, bin string, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the worker did not exit within a minute:\n%s", out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}

func abbreviate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
