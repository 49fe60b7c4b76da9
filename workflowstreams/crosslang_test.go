package workflowstreams_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/workflowstreams"
)

// The official TypeScript client (@temporalio/workflow-streams with
// @temporalio/client, pinned in testdata/tsclient/package-lock.json) talks
// to the Go workflow through testdata/tsclient/stream.mjs.
const tsClientDir = "testdata/tsclient"

// requireNode skips the test unless node (20 or later) and the installed
// TypeScript client are there.
func requireNode(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("cross-language test: needs the Temporal dev server (skipped in -short mode)")
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@temporalio", "workflow-streams", "package.json")); err != nil {
		t.Skip("cross-language test: the TypeScript client is not installed; run `npm ci --prefix workflowstreams/testdata/tsclient` (.ci/run does)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("cross-language test: node is not on PATH (Node 20 or later is needed)")
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if major < 20 {
		t.Skipf("cross-language test: node %s is too old (the TypeScript client needs 20 or later)", strings.TrimSpace(string(out)))
	}
	return node
}

// tsLine is one line stream.mjs prints.
type tsLine struct {
	Offset    int64           `json:"offset"`
	Topic     string          `json:"topic"`
	Encoding  string          `json:"encoding"`
	Data      string          `json:"data"`
	Value     json.RawMessage `json:"value"`
	End       bool            `json:"end"`
	Count     int             `json:"count"`
	Published int             `json:"published"`
}

// tsProc is a running stream.mjs.
type tsProc struct {
	lines  chan tsLine
	done   chan error
	stderr *bytes.Buffer
}

func runTS(t *testing.T, ctx context.Context, node string, args ...string) *tsProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{"stream.mjs"}, args...)...)
	cmd.Dir = tsClientDir
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &tsProc{lines: make(chan tsLine, 1000), done: make(chan error, 1), stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l tsLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("stream.mjs printed %q: %v", sc.Text(), err)
				continue
			}
			p.lines <- l
		}
	}()
	go func() {
		wg.Wait()
		p.done <- cmd.Wait()
	}()
	return p
}

// collectTS reads a subscriber's items until its end line, telling gate
// what it receives, and checks that the process exits cleanly.
func collectTS(t *testing.T, p *tsProc, gate *liveGate) []tsLine {
	t.Helper()
	var items []tsLine
	ended := false
	for l := range p.lines {
		if l.End {
			require.Equal(t, len(items), l.Count)
			ended = true
			continue
		}
		items = append(items, l)
		if gate != nil {
			var s string
			if json.Unmarshal(l.Value, &s) == nil {
				gate.saw("ts", s)
			}
		}
	}
	err := <-p.done
	require.NoError(t, err, "stream.mjs: %s", p.stderr.String())
	require.True(t, ended, "the TypeScript subscription did not end: %s", p.stderr.String())
	return items
}

// requireSame checks that the TypeScript subscriber got exactly the items
// the Go subscriber got: offsets, topics, payload encoding and bytes, and
// (for JSON items) the same decoded value.
func requireSame(t *testing.T, goItems []workflowstreams.WorkflowStreamItem, tsItems []tsLine) {
	t.Helper()
	require.Len(t, tsItems, len(goItems))
	for i, g := range goItems {
		ts := tsItems[i]
		require.Equal(t, g.Offset, ts.Offset, "item %d", i)
		require.Equal(t, g.Topic, ts.Topic, "item %d", i)
		require.Equal(t, string(g.Data.GetMetadata()["encoding"]), ts.Encoding, "item %d", i)
		require.Equal(t, base64.StdEncoding.EncodeToString(g.Data.GetData()), ts.Data, "item %d: payload bytes", i)
		if ts.Encoding == "json/plain" {
			require.JSONEq(t, string(g.Data.GetData()), string(ts.Value), "item %d: decoded value", i)
		}
	}
}

// A Go workflow and a Go activity publish; the official TypeScript client
// subscribes (all topics, and a topic filter from an offset) and receives
// exactly what the Go subscriber receives, live, and ends when the
// workflow completes.
func TestTypeScriptSubscriberReadsGoStream(t *testing.T) {
	node := requireNode(t)
	srv, c, tq, ctx := setup(t, 2*time.Minute)

	in := StreamInput{Tokens: 40, LiveFirst: 5, Every: 5 * time.Millisecond, Extra: true, Linger: 2 * time.Second}
	id := "ws-ts-" + uuid.NewString()
	gate := newGate(id, "ts", "go")
	addr := []string{"--address", srv.FrontendHostPort(), "--workflow-id", id}
	all := runTS(t, ctx, node, append([]string{"subscribe"}, addr...)...)
	filtered := runTS(t, ctx, node, append([]string{"subscribe", "--topics", "status,extra", "--from", "1"}, addr...)...)
	run := startWorkflow(t, ctx, c, tq, id, StreamWorkflow, in)
	goDone := subscribeInBackground(t, ctx, c, id, workflowstreams.SubscribeOptions{}, gate, "go")

	tsAll := collectTS(t, all, gate)
	tsFiltered := collectTS(t, filtered, nil)
	g := <-goDone
	require.NoError(t, g.err)
	require.Equal(t, wantStream(in), g.items)
	require.NoError(t, run.Get(ctx, nil))

	requireSame(t, g.raw, tsAll)
	var wantFiltered []workflowstreams.WorkflowStreamItem
	for _, it := range g.raw {
		if it.Offset >= 1 && (it.Topic == "status" || it.Topic == "extra") {
			wantFiltered = append(wantFiltered, it)
		}
	}
	require.Len(t, wantFiltered, 5, "4 extra items and status:done")
	requireSame(t, wantFiltered, tsFiltered)

	// Started after the workflow completed: the official client ends at
	// once with nothing.
	late := collectTS(t, runTS(t, ctx, node, append([]string{"subscribe"}, addr...)...), nil)
	require.Empty(t, late)
}

// The official TypeScript subscriber follows a Go stream across
// continue-as-new (the Go workflow refuses polls with StreamDraining while
// it hands over, and the TypeScript client polls the next run).
func TestTypeScriptSubscriberFollowsContinueAsNew(t *testing.T) {
	node := requireNode(t)
	srv, c, tq, ctx := setup(t, 2*time.Minute)

	in := ChainInput{Runs: 3, PerRun: 4}
	id := "ws-ts-chain-" + uuid.NewString()
	startWorkflow(t, ctx, c, tq, id, ChainWorkflow, in)
	items := collectTS(t, runTS(t, ctx, node, "subscribe", "--address", srv.FrontendHostPort(), "--workflow-id", id), nil)
	var got []received
	for _, l := range items {
		var s string
		require.NoError(t, json.Unmarshal(l.Value, &s))
		got = append(got, received{Offset: l.Offset, Topic: l.Topic, Value: s})
	}
	require.Equal(t, wantChain(in), got)
}

// The official TypeScript publisher signals batches into a Go workflow; the
// Go subscriber receives every item once, in order.
func TestTypeScriptPublisherToGoWorkflow(t *testing.T) {
	node := requireNode(t)
	srv, c, tq, ctx := setup(t, 2*time.Minute)

	id := "ws-ts-pub-" + uuid.NewString()
	startWorkflow(t, ctx, c, tq, id, HostWorkflow)
	const n = 25
	pub := runTS(t, ctx, node, "publish", "--address", srv.FrontendHostPort(), "--workflow-id", id,
		"--topic", "from-ts", "--count", strconv.Itoa(n), "--prefix", "ts")
	var published int
	for l := range pub.lines {
		published = l.Published
	}
	require.NoError(t, <-pub.done, "stream.mjs: %s", pub.stderr.String())
	require.Equal(t, n, published)

	sc := workflowstreams.NewClient(c, id, workflowstreams.Options{})
	offset, err := sc.GetOffset(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, offset)

	got := subscribeUntil(t, ctx, c, id, workflowstreams.SubscribeOptions{Topics: []string{"from-ts"}}, func(got []received) bool {
		return len(got) == n
	})
	want := make([]received, n)
	for i := range want {
		want[i] = received{Offset: int64(i), Topic: "from-ts", Value: fmt.Sprintf("ts-%d", i)}
	}
	require.Equal(t, want, got)
	finish(t, ctx, c, id)
}
