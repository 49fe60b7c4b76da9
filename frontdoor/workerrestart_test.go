package frontdoor_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// The worker-restart test runs the durable-llm worker as a process of
// its own (this test binary, re-run as TestWorkerProcess), so that
// stopping it is a SIGKILL: no graceful stop, no drained activity, no
// sticky queue handed back.
const (
	envWorkerAddress = "FRONTDOOR_WORKER_ADDRESS"
	envWorkerQueue   = "FRONTDOOR_WORKER_QUEUE"
	envWorkerSimURL  = "FRONTDOOR_WORKER_SIM_URL"
)

// workerHeartbeat is the call activity's heartbeat timeout in the worker
// processes: how soon a killed worker's call is noticed.
const workerHeartbeat = 2 * time.Second

// TestWorkerProcess is not a test: it is the worker process that
// TestBackgroundStreamSurvivesWorkerRestart starts and kills. It runs
// until it is killed or its stdin closes (the test binary that started it
// has gone).
func TestWorkerProcess(t *testing.T) {
	addr := os.Getenv(envWorkerAddress)
	if addr == "" {
		t.Skip("the worker process of TestBackgroundStreamSurvivesWorkerRestart; it starts it")
	}
	c, err := client.Dial(client.Options{HostPort: addr, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	rig.New(t, rig.Options{Client: c, Endpoint: os.Getenv(envWorkerSimURL), TaskQueue: os.Getenv(envWorkerQueue),
		Policy: func(cfg *config.Config) { cfg.Call.HeartbeatTimeout = config.Duration(workerHeartbeat) },
		Worker: func(o *llmworker.Options) { o.Logger = slog.New(slog.DiscardHandler) }})
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// workerProc is a worker process.
type workerProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	exited chan struct{}
}

func (p *workerProc) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(b)
}

// startWorker starts a worker process on task queue tq and waits until it
// polls.
func startWorker(t *testing.T, addr, tq, simURL string) *workerProc {
	t.Helper()
	p := &workerProc{exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.timeout=0")
	p.cmd.Env = append(os.Environ(), envWorkerAddress+"="+addr, envWorkerQueue+"="+tq, envWorkerSimURL+"="+simURL)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.cmd.Stderr = writerFunc(p.write)
	_, err = p.cmd.StdinPipe() // closed when this test binary exits: the process then ends
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
			p.write(append(sc.Bytes(), '\n'))
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("worker pid %d output:\n%s", p.cmd.Process.Pid, p.out.String())
			p.mu.Unlock()
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("the worker exited before it polled:\n%s", p.out.String())
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not poll within a minute")
	}
	return p
}

// kill SIGKILLs the process and waits until it is gone.
func (p *workerProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// TestBackgroundStreamSurvivesWorkerRestart: a streamed background
// response whose worker is SIGKILLed mid-stream, with the upstream
// request open, is resumed by its client with starting_after once a new
// worker runs: every event arrives exactly once (the sequence numbers are
// the ones the whole answer numbers, none repeated, none missing), the
// text is the call's final answer, and it ends completed. The worker
// died with the request open, so the call resends it once (worker_lost):
// llmsim sees at most two requests.
//
// Before the workflow read a lost attempt's deltas from its own stream,
// the resend started the answer over and the client got the text the lost
// attempt had streamed, then the whole answer.
func TestBackgroundStreamSurvivesWorkerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	srv := shared.Server(t)
	d := openDoor(t, rig.New(t, rig.Options{Client: srv.Client(), QueuePrefix: "frontdoor-restart-", NoWorker: true}), nil)
	ctx := rig.Context(t, 2*time.Minute)

	first := startWorker(t, srv.FrontendHostPort(), d.TaskQueue, d.Sim.BaseURL)
	var seqs []int64
	var pieces []string
	var text strings.Builder
	var id string
	s := d.openai(tokAcme).Responses.NewStreaming(ctx, backgroundParams("[[sim tokens=400]] Tell me a long story. (worker restart)"))
	deltas := 0
	for deltas < 3 && s.Next() {
		ev := s.Current()
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
			pieces = append(pieces, ev.Delta)
			deltas++
		}
	}
	require.NoError(t, s.Close())
	require.Equal(t, 3, deltas)
	wid := strings.TrimPrefix(id, "resp_")
	open := func() int {
		n := 0
		for _, r := range d.Sim.Stats().Conversations[wid].Requests {
			if r.Outcome == "" {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, open(), "the upstream request is open when the worker dies")

	first.kill()
	require.True(t, d.running(ctx, wid), "the call ended before the kill: make it longer")
	killed := time.Now()
	startWorker(t, srv.FrontendHostPort(), d.TaskQueue, d.Sim.BaseURL)

	last := seqs[len(seqs)-1]
	r := d.openai(tokAcme).Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)})
	var final *responses.Response
	var resumedAt time.Duration
	for r.Next() {
		ev := r.Current()
		if resumedAt == 0 {
			resumedAt = time.Since(killed)
		}
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
			pieces = append(pieces, ev.Delta)
		case "response.completed":
			resp := ev.Response
			final = &resp
		}
	}
	require.NoError(t, r.Err())
	require.NotNil(t, final, "the stream ends with response.completed")
	res := d.result(ctx, wid)
	conv := d.Sim.Stats().Conversations[wid]
	var classes []string
	for _, a := range res.Attempts {
		classes = append(classes, a.Class)
	}
	t.Logf("upstream requests %d, attempts %v, first event after the kill in %s", conv.Attempts, classes, resumedAt.Round(time.Millisecond))
	require.Equal(t, res.Content, text.String(), "the text is the call's final answer")
	require.Equal(t, res.Content, final.OutputText())

	requireEveryEventOnce(t, res.Content, pieces, seqs)

	require.LessOrEqual(t, conv.Attempts, 2, "at most one resend: the worker died with the request open")
	if conv.Attempts == 2 {
		require.Contains(t, classes, "worker_lost")
	}
}

// requireEveryEventOnce checks the sequence numbers seqs of a background
// response's events read across a restart, whose text deltas were pieces
// and whose answer is content: 0, 1, 2, … without a gap or a repeat, as
// OpenAI numbers them (created, in_progress, the message item and part,
// a delta per piece, then the four closing events), and the deltas add up
// to the answer.
func requireEveryEventOnce(t *testing.T, content string, pieces []string, seqs []int64) {
	t.Helper()
	want := make([]int64, 4+len(pieces)+4)
	for i := range want {
		want[i] = int64(i)
	}
	require.Equal(t, want, seqs, "no sequence number repeated or missing")
	require.Equal(t, content, strings.Join(pieces, ""), "the deltas add up to the answer")
}

// TestAnthropicStreamSurvivesWorkerKill: a message streamed to Anthropic's
// TypeScript client through the Messages API, whose worker is SIGKILLed
// after the third text delta with the upstream request open, goes on on a
// new worker over the same connection: the client's stream ends with the
// call's whole answer, no text repeated (the deltas add up to it), and the
// model was asked at most twice.
func TestAnthropicStreamSurvivesWorkerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	node, dir := requireTS(t, "Anthropic's TypeScript client", "@anthropic-ai", "sdk")
	srv := shared.Server(t)
	d := openDoor(t, rig.New(t, rig.Options{Client: srv.Client(), QueuePrefix: "frontdoor-anthropic-kill-", NoWorker: true}), nil)
	ctx := rig.Context(t, 2*time.Minute)
	first := startWorker(t, srv.FrontendHostPort(), d.TaskQueue, d.Sim.BaseURL)

	cmd := exec.CommandContext(ctx, node, "anthropic-stream.mjs", d.ts.URL, tokAcme, "[[sim tokens=400]] Tell me a long story. (anthropic, worker kill)")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the client ended before its third delta: %s", stderr.String())
	require.Equal(t, "deltas 3", lines.Text())
	first.kill()
	startWorker(t, srv.FrontendHostPort(), d.TaskQueue, d.Sim.BaseURL)
	require.True(t, lines.Scan(), "the client printed nothing after the kill: %s", stderr.String())
	var got struct {
		ID, Text, Final string
		Deltas          int
		StopReason      string `json:"stop_reason"`
	}
	require.NoError(t, json.Unmarshal(lines.Bytes(), &got), lines.Text())
	require.NoError(t, cmd.Wait(), stderr.String())

	wid := strings.TrimPrefix(got.ID, "msg_")
	res := d.result(ctx, wid)
	require.Equal(t, res.Content, got.Text, "the deltas add up to the call's answer: nothing repeated, nothing lost")
	require.Equal(t, res.Content, got.Final)
	require.Equal(t, "end_turn", got.StopReason)
	require.Greater(t, got.Deltas, 3)
	require.LessOrEqual(t, d.Sim.Stats().Conversations[wid].Attempts, 2, "at most one resend: the worker died with the request open")
}
