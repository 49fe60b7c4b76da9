package workflows_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// goldenPaths are the committed histories (testdata/histories/<path>.json),
// recorded from real runs by `make histories`. A file missing from the
// directory, or one no path names, fails TestReplayGoldenHistories.
var goldenPaths = []string{
	"success",
	"class-connect", "class-read_timeout", "class-timeout", "class-queue_full", "queue-full-hold", "class-rate_limited",
	"class-context_length_exceeded", "class-output_truncated", "class-service_unavailable",
	"class-server_error", "class-body_error", "class-invalid_request", "class-auth",
	"class-model_not_found", "class-content_filter", "class-worker_lost",
	"model-switch", "breaker-open", "budget-exhausted", "wait-for-trials", "wait-for-budget", "rate-limit-hold",
	"fallback-faq", "fallback-rule", "fallback-placeholder",
	"handoff", "safe-message", "invalid-request", "cancellation",
	"stream-success", "stream-resume", "stream-no-continuation",
	"tool-call", "stream-tool-call", "class-bad_tool_call", "class-schema_mismatch", "capability-skip", "fallback-unavailable",
	"key-pool", "hedge-wins", "hedge-streamed", "overdue-hedge", "hedge-replaced", "hedge-replaced-streamed", "fallback-cache", "diagnosis",
	"rule-after-failures", "risk-review", "step-by-step",
}

const historiesDir = "testdata/histories"

// golden returns the committed history files by path name, checking that
// they are exactly the goldenPaths.
func golden(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	got := map[string]string{}
	var names []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		got[name] = f
		names = append(names, name)
	}
	want := append(slices.Clone(goldenPaths), guardGolden, guardBeforeMemo, guardBeforeFreshReports)
	slices.Sort(want)
	slices.Sort(names)
	require.Equal(t, want, names, "the histories in %s are not the recorded paths: run `make histories`", historiesDir)
	return got
}

func loadHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}

// replayer returns a replayer with wf registered as LLMCall.
func replayer(t *testing.T, wf any, opts worker.WorkflowReplayerOptions) worker.WorkflowReplayer {
	t.Helper()
	r, err := worker.NewWorkflowReplayerWithOptions(opts)
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: workflows.WorkflowName})
	return r
}

// quietLog keeps the SDK's replay log (a stack trace per rejected history)
// out of the test output.
var quietLog = log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// replayAs replays the golden history of path name under its recorded
// workflow ID (history-<name>): child workflows' IDs derive from it.
func replayAs(r worker.WorkflowReplayer, name string, h *historypb.History) error {
	return r.ReplayWorkflowHistoryWithOptions(quietLog, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: "history-" + name},
	})
}

func isNonDeterminism(err error) bool {
	return err != nil && strings.Contains(err.Error(), "TMPRL1100")
}

// TestReplayGoldenHistories replays every recorded path against the
// LLMCall of this build: a change to the workflow's sequence of commands
// that is not guarded by workflow.GetVersion fails here.
func TestReplayGoldenHistories(t *testing.T) {
	files := golden(t)
	r := replayer(t, workflows.LLMCall, worker.WorkflowReplayerOptions{})
	for _, name := range goldenPaths {
		t.Run(name, func(t *testing.T) {
			err := replayAs(r, name, loadHistory(t, files[name]))
			require.NoError(t, err, "%s no longer replays against LLMCall: guard the change with workflow.GetVersion, or re-record with `make histories` if no such call can be running", name)
		})
	}
}

// guardGolden is the recorded run of the fleet's guard (LLMGuard): started
// from a previous run's state, fed reports, continued as new.
// guardBeforeMemo is one recorded before the guard published its view in
// its memo (it took reports and queries only): a run of that build still
// in flight replays on this one. guardBeforeFreshReports is one recorded
// before each report of a workflow task was decoded into a new value.
const (
	guardGolden             = "guard"
	guardBeforeMemo         = "guard-before-memo"
	guardBeforeFreshReports = "guard-before-fresh-reports"
)

// TestReplayGuardHistory replays the recorded guard run against this
// build's LLMGuard.
func TestReplayGuardHistory(t *testing.T) {
	files := golden(t)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(workflows.LLMGuard, workflow.RegisterOptions{Name: workflows.GuardWorkflowName})
	for _, name := range []string{guardGolden, guardBeforeMemo, guardBeforeFreshReports} {
		err = r.ReplayWorkflowHistoryFromJSONFile(quietLog, files[name])
		require.NoError(t, err, "the guard's recorded run %s no longer replays against LLMGuard: guard the change with workflow.GetVersion, or re-record with `make histories ONLY=guard` if no guard can be running", name)
	}
}

// extraStepFirst is LLMCall with one step added before everything else:
// an unguarded change that every recorded history must reject.
func extraStepFirst(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error) {
	if err := workflow.Sleep(ctx, time.Second); err != nil {
		return workflows.CallResult{}, err
	}
	return workflows.LLMCall(ctx, req)
}

// extraStepVersioned is the same change guarded by workflow.GetVersion:
// histories recorded before it replay the old way.
func extraStepVersioned(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error) {
	if workflow.GetVersion(ctx, "extra-step-first", workflow.DefaultVersion, 1) == 1 {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.CallResult{}, err
		}
	}
	return workflows.LLMCall(ctx, req)
}

// alteration changes LLMCall from the outside: an audit ID drawn (a side
// effect) before every backoff timer, or the fallback local activity skipped (its
// answer made up in workflow code).
type alteration struct {
	interceptor.WorkerInterceptorBase
	auditBeforeTimer bool
	skipFallback     bool
}

func (a *alteration) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &alteredInbound{a: a}
	in.Next = next
	return in
}

type alteredInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	a *alteration
}

func (i *alteredInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	out := &alteredOutbound{a: i.a}
	out.Next = outbound
	return i.Next.Init(out)
}

type alteredOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	a *alteration
}

func (o *alteredOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	if o.a.auditBeforeTimer {
		// An audit record before the wait: one more marker in history.
		var id int64
		_ = o.Next.SideEffect(ctx, func(workflow.Context) any { return int64(1) }).Get(&id)
	}
	return o.Next.NewTimerWithOptions(ctx, d, opts)
}

func (o *alteredOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if o.a.skipFallback && activityType == "Fallback" {
		f, s := workflow.NewFuture(ctx)
		s.SetValue(activities.FallbackAnswer{Content: "Please try again later.", Source: "placeholder"})
		return f
	}
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

// hasTimer reports whether a history waited on a timer.
func hasTimer(h *historypb.History) bool {
	return slices.ContainsFunc(h.GetEvents(), func(e *historypb.HistoryEvent) bool {
		return e.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED
	})
}

// ranLocalActivity reports whether a history has the marker of a local
// activity of this type.
func ranLocalActivity(t *testing.T, h *historypb.History, activityType string) bool {
	for _, e := range h.GetEvents() {
		m := e.GetMarkerRecordedEventAttributes()
		if e.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED || m.GetMarkerName() != "LocalActivity" {
			continue
		}
		var data struct{ ActivityType string }
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &data))
		if data.ActivityType == activityType {
			return true
		}
	}
	return false
}

// TestReplayFailsOnAlteredWorkflow proves the replay test can fail: copies
// of LLMCall with a changed sequence of commands are rejected by exactly
// the histories that reach the change, with Temporal's non-determinism
// error, while the same change behind workflow.GetVersion replays.
func TestReplayFailsOnAlteredWorkflow(t *testing.T) {
	files := golden(t)
	histories := map[string]*historypb.History{}
	for name, f := range files {
		histories[name] = loadHistory(t, f)
	}
	tests := []struct {
		name    string
		wf      any
		alter   *alteration
		reaches func(t *testing.T, h *historypb.History) bool
	}{
		{
			name:    "a step added before admission breaks every history",
			wf:      extraStepFirst,
			reaches: func(*testing.T, *historypb.History) bool { return true },
		},
		{
			name:    "the same step behind GetVersion breaks none",
			wf:      extraStepVersioned,
			reaches: func(*testing.T, *historypb.History) bool { return false },
		},
		{
			name: "a side effect added before each backoff timer breaks the histories that wait",
			wf:   workflows.LLMCall, alter: &alteration{auditBeforeTimer: true},
			reaches: func(_ *testing.T, h *historypb.History) bool { return hasTimer(h) },
		},
		{
			name: "a skipped fallback step breaks the histories that fall back",
			wf:   workflows.LLMCall, alter: &alteration{skipFallback: true},
			reaches: func(t *testing.T, h *historypb.History) bool { return ranLocalActivity(t, h, "Fallback") },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts worker.WorkflowReplayerOptions
			if tc.alter != nil {
				opts.Interceptors = []interceptor.WorkerInterceptor{tc.alter}
			}
			r := replayer(t, tc.wf, opts)
			var broken, intact []string
			for _, name := range goldenPaths {
				err := replayAs(r, name, histories[name])
				if tc.reaches(t, histories[name]) {
					require.True(t, isNonDeterminism(err), "%s reaches the change but replayed with %v", name, err)
					broken = append(broken, name)
				} else {
					require.NoError(t, err, "%s does not reach the change", name)
					intact = append(intact, name)
				}
			}
			t.Logf("non-deterministic: %v", broken)
			t.Logf("replayed:          %v", intact)
		})
	}

	// The partial alterations must split the histories, or they prove
	// nothing about telling paths apart.
	var timers, fallbacks int
	for _, h := range histories {
		if hasTimer(h) {
			timers++
		}
		if ranLocalActivity(t, h, "Fallback") {
			fallbacks++
		}
	}
	require.True(t, timers >= 5 && timers <= len(histories)-5, "%d of %d histories wait on a timer", timers, len(histories))
	require.True(t, fallbacks >= 5 && fallbacks <= len(histories)-5, "%d of %d histories fall back", fallbacks, len(histories))
}

// TestReplayStructuredFallbackOfAnOlderBuild: a run started before agents
// were supported, whose request carried a required tool (an older worker
// ignored the field) and ended in the FAQ, still replays: the
// fallback_unavailable branch is versioned, and without its marker the
// call takes the FAQ as it did. The same history with the field but the
// new branch taken would fail.
func TestReplayStructuredFallbackOfAnOlderBuild(t *testing.T) {
	h := loadHistory(t, golden(t)["fallback-faq"])
	attrs := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(t, attrs)
	dc := converter.GetDefaultDataConverter()
	var req workflows.CallRequest
	require.NoError(t, dc.FromPayload(attrs.Input.Payloads[0], &req))
	req.Tools = []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "lookup_order"}}}
	req.ToolChoice = &request.ToolChoice{Mode: request.ToolChoiceRequired}
	p, err := dc.ToPayload(req)
	require.NoError(t, err)
	attrs.Input.Payloads[0] = p

	r := replayer(t, workflows.LLMCall, worker.WorkflowReplayerOptions{})
	require.NoError(t, r.ReplayWorkflowHistory(quietLog, h), "a run of an older build with a required tool no longer replays")

	unversioned := func(ctx workflow.Context, req workflows.CallRequest) (workflows.CallResult, error) {
		// The new branch without its version check: fails on that run.
		if req.Structured() {
			return workflows.CallResult{}, temporal.NewApplicationError("no fallback", workflows.ErrFallbackUnavailable)
		}
		return workflows.LLMCall(ctx, req)
	}
	r = replayer(t, unversioned, worker.WorkflowReplayerOptions{})
	require.Error(t, r.ReplayWorkflowHistory(quietLog, h), "the unversioned change replays: the test cannot tell")
}
