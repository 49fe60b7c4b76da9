package replay_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

const goldenDir = "../workflows/testdata/histories"

func goldenFile(name string) string { return filepath.Join(goldenDir, name+".json") }

// sideEffectBeforeTimers alters LLMCall: a side effect (one more marker)
// before every backoff timer. Histories that wait become
// non-deterministic; the others still replay.
type sideEffectBeforeTimers struct {
	interceptor.WorkerInterceptorBase
}

func (*sideEffectBeforeTimers) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &alteredInbound{}
	in.Next = next
	return in
}

type alteredInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *alteredInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	out := &alteredOutbound{}
	out.Next = outbound
	return i.Next.Init(out)
}

type alteredOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *alteredOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	var id int64
	_ = o.Next.SideEffect(ctx, func(workflow.Context) any { return int64(1) }).Get(&id)
	return o.Next.NewTimerWithOptions(ctx, d, opts)
}

func altered() replay.Options {
	return replay.Options{Replayer: worker.WorkflowReplayerOptions{
		Interceptors: []interceptor.WorkerInterceptor{&sideEffectBeforeTimers{}},
	}}
}

func lines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

// lineOf returns the report line about a workflow.
func lineOf(t *testing.T, out, id string) string {
	t.Helper()
	for _, l := range lines(out) {
		if strings.Contains(l, " "+id+" ") {
			return l
		}
	}
	t.Fatalf("no line about %s in:\n%s", id, out)
	return ""
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Query: query}
}

func TestFilesReplayEveryGoldenHistory(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 20)
	var out bytes.Buffer
	c, err := replay.New(replay.Options{Out: &out})
	require.NoError(t, err)
	n, err := c.Files(files)
	require.NoError(t, err)
	require.Equal(t, len(files), n)
	got := lines(out.String())
	require.Len(t, got, len(files))
	for i, f := range files {
		id := "history-" + strings.TrimSuffix(filepath.Base(f), ".json")
		if b := filepath.Base(f); strings.HasPrefix(b, "guard") {
			id = "-" // the guard's runs are not calls: no request ID to show
		}
		require.Equal(t, []string{replay.StatusOK, id, f}, strings.Fields(got[i]))
	}
}

func TestFilesStopAtTheFirstNonDeterministicHistory(t *testing.T) {
	o := altered()
	var out bytes.Buffer
	o.Out = &out
	c, err := replay.New(o)
	require.NoError(t, err)
	files := []string{goldenFile("success"), goldenFile("handoff"), goldenFile("class-rate_limited"), goldenFile("class-timeout")}
	n, err := c.Files(files)
	require.Equal(t, 2, n, "the two histories without a timer replay")
	require.ErrorIs(t, err, replay.ErrNonDeterministic)
	var f *replay.Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "history-class-rate_limited", f.WorkflowID)
	require.Equal(t, files[2], f.File)
	require.Contains(t, err.Error(), "workflow history-class-rate_limited ("+files[2]+") is not deterministic against this build: [TMPRL1100]")
	require.NotContains(t, err.Error(), "stack_trace", "the reason is the message, not the whole failure")

	got := lines(out.String())
	require.Len(t, got, 3, "nothing after the first non-determinism is replayed:\n%s", out.String())
	require.True(t, strings.HasPrefix(got[0], replay.StatusOK+" "), got[0])
	require.True(t, strings.HasPrefix(got[1], replay.StatusOK+" "), got[1])
	require.True(t, strings.HasPrefix(got[2], replay.StatusNonDeterministic+"  history-class-rate_limited  "+files[2]+": [TMPRL1100]"), got[2])
}

// somethingElse is a workflow of another type: a build without LLMCall.
func somethingElse(ctx workflow.Context) error { return nil }

func TestFilesReportAWorkflowTheBuildCannotRun(t *testing.T) {
	var out bytes.Buffer
	c, err := replay.New(replay.Options{Out: &out, Register: func(r worker.WorkflowRegistry) {
		r.RegisterWorkflowWithOptions(somethingElse, workflow.RegisterOptions{Name: "SomethingElse"})
	}})
	require.NoError(t, err)
	_, err = c.Files([]string{goldenFile("success")})
	var f *replay.Failure
	require.ErrorAs(t, err, &f)
	require.False(t, f.NonDeterministic)
	require.NotErrorIs(t, err, replay.ErrNonDeterministic)
	require.Equal(t, []string{replay.StatusFailed, "history-success", goldenFile("success") + ":"}, strings.Fields(out.String())[:3])
	require.Contains(t, err.Error(), "LLMCall", "the error names the unknown workflow type")
}

func TestFilesRefuseWhatIsNotAHistory(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "notes.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"hello": "world"}`), 0o600))
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte(`{"events": []}`), 0o600))
	c, err := replay.New(replay.Options{})
	require.NoError(t, err)
	for _, f := range []string{bad, empty} {
		_, err = c.Files([]string{f})
		require.ErrorContains(t, err, f+": not the JSON of a workflow history")
	}
	_, err = c.Files([]string{filepath.Join(dir, "missing.json")})
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestMarshalRoundTripsAndWorkflowIDComesFromTheKey(t *testing.T) {
	h, err := replay.LoadFile(goldenFile("class-auth"))
	require.NoError(t, err)
	require.Equal(t, "history-class-auth", replay.WorkflowID(h, nil))
	data, err := replay.Marshal(h)
	require.NoError(t, err)
	again, err := replay.Unmarshal(data)
	require.NoError(t, err)
	require.Equal(t, len(h.GetEvents()), len(again.GetEvents()))
	// The SDK's own reader accepts what Marshal writes.
	sdk, err := client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
	require.NoError(t, err)
	require.Equal(t, len(h.GetEvents()), len(sdk.GetEvents()))
}

// TestQueryReplaysLiveHistories runs calls on a real dev server with a real
// worker and llmsim, then replays them through visibility, as before a
// deploy.
func TestQueryReplaysLiveHistories(t *testing.T) {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	s := rig.New(t, rig.Options{Client: srv.Client(), QueuePrefix: "replay-test-",
		Worker: func(o *llmworker.Options) { o.Getenv = func(string) string { return "" } }})
	tq := s.TaskQueue

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ask := func(key, scenario, q string) string {
		req := workflows.CallRequest{UserID: "u-1", SessionID: "s-1", Scenario: scenario, IdempotencyKey: key,
			Messages: []request.Message{{Role: "user", Content: q}}}
		res, err := s.Calls.Call(ctx, req)
		require.NoError(t, err)
		return res.RequestID
	}
	plain := ask("replay-plain-"+tq, "customer_service", "Where is my order?")
	waited := ask("replay-waited-"+tq, "customer_service", "[[sim fault=rate_limited retry_after=1s times=1]] Where is my order?")
	handoff := ask("replay-handoff-"+tq, "medical", "I have chest pain.")

	query := `WorkflowType="LLMCall" AND ExecutionStatus="Completed" AND TaskQueue="` + tq + `"`
	require.Eventually(t, func() bool {
		resp, err := srv.Client().CountWorkflow(ctx, countRequest(query))
		return err == nil && resp.GetCount() == 3
	}, 30*time.Second, 100*time.Millisecond, "visibility never listed the three calls")

	t.Run("this build replays them all", func(t *testing.T) {
		var out bytes.Buffer
		c, err := replay.New(replay.Options{Out: &out})
		require.NoError(t, err)
		n, err := c.Query(ctx, srv.Client(), query, 0)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		for _, id := range []string{plain, waited, handoff} {
			f := strings.Fields(lineOf(t, out.String(), id))
			require.Equal(t, []string{replay.StatusOK, id, "run"}, f[:3])
		}
	})
	t.Run("limit", func(t *testing.T) {
		c, err := replay.New(replay.Options{})
		require.NoError(t, err)
		n, err := c.Query(ctx, srv.Client(), query, 2)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})
	t.Run("an altered build stops at the call that waited", func(t *testing.T) {
		o := altered()
		var out bytes.Buffer
		o.Out = &out
		c, err := replay.New(o)
		require.NoError(t, err)
		_, err = c.Query(ctx, srv.Client(), query, 0)
		require.ErrorIs(t, err, replay.ErrNonDeterministic)
		var f *replay.Failure
		require.ErrorAs(t, err, &f)
		require.Equal(t, waited, f.WorkflowID)
		require.NotEmpty(t, f.RunID)
		require.Contains(t, out.String(), replay.StatusNonDeterministic+"  "+waited+"  run "+f.RunID+": [TMPRL1100]")
	})
	t.Run("a bad query names itself", func(t *testing.T) {
		c, err := replay.New(replay.Options{})
		require.NoError(t, err)
		_, err = c.Query(ctx, srv.Client(), `NoSuchAttribute="x"`, 0)
		require.ErrorContains(t, err, `list workflows matching "NoSuchAttribute=\"x\""`)
	})
	t.Run("a file from temporal workflow show --output json replays", func(t *testing.T) {
		cli, err := testenv.TemporalCLI()
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "waited.json")
		cmd := exec.CommandContext(ctx, cli, "workflow", "show", "--workflow-id", waited,
			"--address", srv.FrontendHostPort(), "--output", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		require.NoError(t, os.WriteFile(file, data, 0o600))
		var out bytes.Buffer
		c, err := replay.New(replay.Options{Out: &out})
		require.NoError(t, err)
		n, err := c.Files([]string{file})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, []string{replay.StatusOK, waited, file}, strings.Fields(lineOf(t, out.String(), waited)))
		// The SDK's own file reader accepts it too.
		_, err = client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
		require.NoError(t, err)
	})
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
