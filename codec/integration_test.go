package codec_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

var (
	shared testenv.Shared

	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds the real worker and starter commands once.
func binaries(t *testing.T) (worker, starter string) {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "codec-bin-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "../worker", "../starter")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = &buildError{err: err, out: out.String()}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(binDir, "worker"), filepath.Join(binDir, "starter")
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// The secrets of this test: a prompt, a system prompt and (from llmsim's
// echo) an answer that must not be readable in the stored history.
const (
	customer     = "Ottoline Quibblesworth"
	parcel       = "ZX-31337"
	systemPrompt = "Concierge brief: follow the Marigold-Vortex escalation protocol."
)

func TestIntegrationEncryptedHistoryIsUnreadableWithoutTheKey(t *testing.T) {
	srv := shared.Server(t)
	workerBin, starterBin := binaries(t)
	sim := rig.Sim(t, llmsim.Options{})

	k1env := codec.EnvKeys + "=k1:" + b64(secret(0x11))
	rotated := codec.EnvKeys + "=k2:" + b64(secret(0x22)) + ",k1:" + b64(secret(0x11))
	base := append(os.Environ(), "TEMPORAL_ADDRESS="+srv.FrontendHostPort(), "TEMPORAL_NAMESPACE=default")

	// The real worker, with encryption on, on the default task queue (the
	// starter's): this package's tests run no other worker.
	var workerLog syncBuffer
	w := exec.Command(workerBin, "--metrics-addr", "")
	w.Env = append(base, "LLM_BASE_URL="+sim.BaseURL, k1env)
	w.Stdout, w.Stderr = &workerLog, &workerLog
	require.NoError(t, w.Start())
	t.Cleanup(func() { _ = w.Process.Kill(); _, _ = w.Process.Wait() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", workerLog.String())
		}
	})

	// A call that fails once (an activity failure, a backoff timer, a
	// retry) and then answers, started by the real CLI with the key.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ask := exec.CommandContext(ctx, starterBin, "ask", "--json", "--user", "u-codec", "--session", "s-"+time.Now().Format("150405.000"),
		"--system", systemPrompt, "[[sim fault=server_error times=1]] Where is parcel "+parcel+" for "+customer+"?")
	ask.Env = append(base, k1env)
	var askErr bytes.Buffer
	ask.Stderr = &askErr
	out, err := ask.Output()
	require.NoError(t, err, "starter ask: %s", askErr.String())
	var res workflows.CallResult
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Contains(t, res.Content, customer, "the answer decodes for the starter that holds the key")
	require.Len(t, res.Attempts, 2, "server_error, then the answer")
	id := res.RequestID
	answerTail := res.Content[strings.LastIndex(res.Content, "—")+len("—"):]
	require.GreaterOrEqual(t, len(strings.TrimSpace(answerTail)), 8, "llmsim's answer has words of its own: %q", res.Content)

	// Read the history as someone without the key would: a plain client.
	raw, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	defer raw.Close()
	var events []*historypb.HistoryEvent
	it := raw.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	var all []byte
	for _, ev := range events {
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		all = append(all, b...)
	}
	desc, err := raw.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: id},
	})
	require.NoError(t, err)
	db, err := proto.Marshal(desc)
	require.NoError(t, err)
	all = append(all, db...)

	require.Contains(t, string(all), workflows.WorkflowName, "sanity: the raw history was read")
	for _, secretText := range []string{customer, "Quibblesworth", parcel, "Marigold-Vortex", strings.TrimSpace(answerTail), "Where is parcel"} {
		require.NotContains(t, string(all), secretText, "readable without the key in the raw history")
	}

	// Every payload in the history is encrypted with k1, except search
	// attributes, which Temporal never encodes (they hold no prompt text).
	payloads := 0
	for _, ev := range events {
		walkPayloads(ev.ProtoReflect(), func(p *commonpb.Payload) {
			payloads++
			require.Equal(t, codec.EncodingEncrypted, string(p.GetMetadata()[converter.MetadataEncoding]), "event %d %s", ev.GetEventId(), ev.GetEventType())
			require.Equal(t, "k1", string(p.GetMetadata()[codec.MetadataKeyID]))
		})
	}
	require.Greater(t, payloads, 8, "input, summaries, markers, activity input and result, failure, result")
	var failed, summaries int
	for _, ev := range events {
		if f := ev.GetActivityTaskFailedEventAttributes().GetFailure(); f != nil {
			failed++
			require.Equal(t, "Encoded failure", f.GetMessage(), "error messages are encoded, not stored in plain text")
			require.NotNil(t, f.GetEncodedAttributes())
		}
		if ev.GetUserMetadata().GetSummary() != nil {
			summaries++
		}
	}
	require.Equal(t, 1, failed, "the server_error attempt")
	require.Positive(t, summaries)
	indexed := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	require.Equal(t, `"answered"`, string(indexed["LlmOutcome"].GetData()), "search attributes stay readable (and filterable)")

	// Without the key the CLI cannot read the call; with it, it can.
	show := exec.CommandContext(ctx, starterBin, "show", "--json", id)
	show.Env = base
	shown, err := show.CombinedOutput()
	require.Error(t, err, "starter show without the key: %s", shown)
	require.NotContains(t, string(shown), customer)
	show = exec.CommandContext(ctx, starterBin, "show", "--json", id)
	show.Env = append(base, rotated) // after a rotation to k2: k1's history still reads
	shown, err = show.Output()
	require.NoError(t, err)
	var again workflows.CallResult
	require.NoError(t, json.Unmarshal(shown, &again))
	require.Equal(t, res, again)

	// Replay (the pre-deploy check) needs the keys too; after a rotation
	// the old key still replays what it wrote.
	hist := &historypb.History{Events: events}
	var ropts worker.WorkflowReplayerOptions
	_, err = codec.ConfigureReplayer(&ropts, env(map[string]string{codec.EnvKeys: strings.TrimPrefix(rotated, codec.EnvKeys+"=")}))
	require.NoError(t, err)
	withKeys, err := replay.New(replay.Options{Replayer: ropts})
	require.NoError(t, err)
	require.NoError(t, withKeys.History(hist, id, "", ""))
	withoutKeys, err := replay.New(replay.Options{})
	require.NoError(t, err)
	require.Error(t, withoutKeys.History(hist, id, "", ""), "an encrypted history replayed without the keys")

	// The codec server (as the Web UI calls it) decrypts payloads fetched
	// from history over HTTP: the workflow input and its summary.
	endpoint := startCodecServer(t, ctx, starterBin, append(base, rotated))
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: endpoint})
	started := events[0]
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, started.GetEventType())
	dec, err := remote.Decode(started.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads())
	require.NoError(t, err)
	var req workflows.CallRequest
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &req))
	require.Equal(t, systemPrompt, req.Messages[0].Content)
	require.Contains(t, req.Messages[1].Content, customer)
	dec, err = remote.Decode([]*commonpb.Payload{started.GetUserMetadata().GetSummary()})
	require.NoError(t, err)
	var summary string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &summary))
	require.Contains(t, summary, parcel, "operators with the codec server see the summary")
}

// walkPayloads calls fn for every Payload in m, except inside search
// attributes.
func walkPayloads(m protoreflect.Message, fn func(*commonpb.Payload)) {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		fn(p)
		return
	}
	if _, ok := m.Interface().(*commonpb.SearchAttributes); ok {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				walkPayloads(v.List().Get(i).Message(), fn)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				walkPayloads(mv.Message(), fn)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			walkPayloads(v.Message(), fn)
		}
		return true
	})
}

// startCodecServer runs `starter codec-server` on a free port and returns
// its URL.
func startCodecServer(t *testing.T, ctx context.Context, starterBin string, env []string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, starterBin, "codec-server", "--addr", "127.0.0.1:0")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "codec-server printed nothing: %s", stderr.String())
	line := sc.Text()
	url, ok := strings.CutPrefix(line, "codec server listening on ")
	require.True(t, ok, "unexpected first line %q", line)
	go func() {
		for sc.Scan() {
		}
	}()
	return url
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
