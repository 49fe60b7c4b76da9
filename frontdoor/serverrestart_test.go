package frontdoor_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestBackgroundStreamSurvivesTemporalRestart: the Temporal server
// (file-backed, so that it keeps its state) stops while a streamed
// background response is generating, after the caller has left with three
// deltas, and starts again on the same file and port. The caller resumes
// with starting_after: the events repeat nothing and lose nothing, the
// text is the call's answer, and the model was asked once.
func TestBackgroundStreamSurvivesTemporalRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hostPort := l.Addr().String()
	require.NoError(t, l.Close())
	start := func() interface{ Stop() error } {
		s, err := testenv.StartServer(context.Background(), workflows.SearchAttributes, testenv.ServerOptions{DBFile: db, HostPort: hostPort})
		require.NoError(t, err, "start the dev server on %s with %s", hostPort, db)
		return s
	}
	srv := start()
	t.Cleanup(func() { _ = srv.Stop() })

	// Our own client (the server's dies with it): it reconnects.
	c, err := client.Dial(client.Options{HostPort: hostPort, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	d := openDoor(t, rig.New(t, rig.Options{Client: c, QueuePrefix: "frontdoor-server-restart-",
		Worker: func(o *llmworker.Options) { o.Logger = slog.New(slog.DiscardHandler) }}), nil)
	ctx := rig.Context(t, 2*time.Minute)

	var seqs []int64
	var pieces []string
	var id string
	s := d.openai(tokAcme).Responses.NewStreaming(ctx, backgroundParams("[[sim tokens=600]] Tell me a long story. (server restart)"))
	for len(pieces) < 3 && s.Next() {
		ev := s.Current()
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			pieces = append(pieces, ev.Delta)
		}
	}
	require.NoError(t, s.Close())
	require.Len(t, pieces, 3)
	wid := strings.TrimPrefix(id, "resp_")

	require.True(t, d.running(ctx, wid), "the call ended before the stop: make it longer")
	down := time.Now()
	require.NoError(t, srv.Stop())
	time.Sleep(time.Second)
	srv = start()
	t.Logf("Temporal down and back on the same file in %s", time.Since(down).Round(time.Millisecond))

	r := d.openai(tokAcme).Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(seqs[len(seqs)-1])})
	var final *responses.Response
	for r.Next() {
		ev := r.Current()
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			pieces = append(pieces, ev.Delta)
		case "response.completed":
			resp := ev.Response
			final = &resp
		}
	}
	require.NoError(t, r.Err())
	require.NotNil(t, final, "the stream ends with response.completed")
	res := d.result(ctx, wid)
	require.Equal(t, res.Content, strings.Join(pieces, ""), "the text is the call's final answer")
	require.Equal(t, res.Content, final.OutputText())
	requireEveryEventOnce(t, res.Content, pieces, seqs)
	conv := d.Sim.Stats().Conversations[wid]
	t.Logf("upstream requests %d, decisions %v", conv.Attempts, workflows.CallResult.Decisions(res))
	require.Equal(t, 1, conv.Attempts, "the model was asked once: the attempt streamed on while Temporal was down")
}
