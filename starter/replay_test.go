package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

const goldenDir = "../workflows/testdata/histories"

func TestReplayGoldenFiles(t *testing.T) {
	t.Setenv(codec.EnvKeys, "")
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append([]string{"replay"}, files...), &out))
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, got, len(files)+1)
	require.Equal(t, []string{replay.StatusOK, "history-success", filepath.Join(goldenDir, "success.json")},
		strings.Fields(got[slices.Index(files, filepath.Join(goldenDir, "success.json"))]))
	require.Equal(t, strings.TrimSpace(got[len(got)-1]), strconv.Itoa(len(files))+" histories replay against this build")
}

func TestReplayRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "give history files, or --query"},
		{[]string{"replay", "--query", `WorkflowType="LLMCall"`, "a.json"}, "not both"},
		{[]string{"replay", "--query", `WorkflowType="LLMCall"`, "--limit", "-1"}, "--limit must be 0 (all) or more"},
		{[]string{"replay", filepath.Join(t.TempDir(), "missing.json")}, "no such file"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{})
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// TestReplayEncryptedHistoryNeedsItsKeys replays a history whose payloads
// are encrypted as the codec writes them: with the keys in
// LLM_PAYLOAD_KEYS it replays, without them it cannot.
func TestReplayEncryptedHistoryNeedsItsKeys(t *testing.T) {
	keys := "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	c, err := codec.FromEnv(func(k string) string {
		if k == codec.EnvKeys {
			return keys
		}
		return ""
	})
	require.NoError(t, err)
	h, err := replay.LoadFile(filepath.Join(goldenDir, "success.json"))
	require.NoError(t, err)
	require.NoError(t, proxy.VisitPayloads(context.Background(), h, proxy.VisitPayloadsOptions{
		SkipSearchAttributes: true,
		Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
			return c.Encode(p)
		},
	}))
	data, err := replay.Marshal(h)
	require.NoError(t, err)
	input := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	require.Equal(t, codec.EncodingEncrypted, string(input.GetMetadata()["encoding"]), "the input is encrypted")
	file := filepath.Join(t.TempDir(), "encrypted.json")
	require.NoError(t, os.WriteFile(file, data, 0o600))

	t.Setenv(codec.EnvKeys, keys)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"replay", file}, &out))
	require.Equal(t, []string{replay.StatusOK, "history-success", file}, strings.Fields(strings.Split(out.String(), "\n")[0]),
		"the workflow ID comes from the decrypted input")

	t.Setenv(codec.EnvKeys, "")
	out.Reset()
	err = run(context.Background(), []string{"replay", file}, &out)
	require.ErrorContains(t, err, "set "+codec.EnvKeys+" to the keys that wrote it")
	require.NotErrorIs(t, err, replay.ErrNonDeterministic, "a missing key is not a determinism problem")
	require.True(t, strings.HasPrefix(out.String(), replay.StatusFailed), out.String())
	t.Logf("without the keys: %s", out.String())
}

// TestReplayQueryOnALiveServer is the pre-deploy check end to end: real
// calls on a dev server, then `starter replay --query` through the
// standard Temporal environment.
func TestReplayQueryOnALiveServer(t *testing.T) {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	tq := "starter-replay-test"
	s := rig.New(t, rig.Options{Client: srv.Client(), TaskQueue: tq, Worker: func(o *llmworker.Options) { o.Getenv = func(string) string { return "" } }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Calls.Call(ctx, workflows.CallRequest{UserID: "u-1", SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{{Role: "user", Content: "[[sim fault=server_error times=1]] Where is my order?"}}})
	require.NoError(t, err)
	query := `WorkflowType="LLMCall" AND ExecutionStatus="Completed" AND TaskQueue="` + tq + `"`
	require.Eventually(t, func() bool {
		resp, err := srv.Client().CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		return err == nil && resp.GetCount() == 1
	}, 30*time.Second, 100*time.Millisecond)

	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendHostPort())
	t.Setenv(codec.EnvKeys, "")
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"replay", "--query", query}, &out))
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, got, 2, out.String())
	require.Equal(t, []string{replay.StatusOK, res.RequestID, "run"}, strings.Fields(got[0])[:3])
	require.Equal(t, "1 history replay against this build", got[1])

	out.Reset()
	require.NoError(t, run(ctx, []string{"replay", "--query", `WorkflowType="NoSuchWorkflow"`}, &out))
	require.Contains(t, out.String(), "nothing was checked")
}
