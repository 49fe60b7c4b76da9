package llmworker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
)

// streamed is what a subscriber saw of a streamed call.
type streamed struct {
	text       string
	deltas     int
	events     []string
	firstDelta time.Time
}

func (s *stack) stream(ctx context.Context, req workflows.CallRequest) (workflows.CallResult, streamed, time.Time) {
	s.t.Helper()
	var got streamed
	res, err := s.Calls.Stream(ctx, req, func(it llmclient.StreamItem) error {
		switch {
		case it.Delta != nil:
			if got.deltas == 0 {
				got.firstDelta = time.Now()
			}
			got.deltas++
			got.text += it.Delta.Text
		case it.Event != nil:
			ev := it.Event.Type
			if it.Event.Class != "" {
				ev += ":" + it.Event.Class
			}
			got.events = append(got.events, ev)
		}
		return nil
	})
	require.NoError(s.t, err)
	return res, got, time.Now()
}

// TestIntegrationStreamedCall: a caller that asks to stream gets the
// answer's text live through the workflow stream, and the text it gets is
// the result's content.
func TestIntegrationStreamedCall(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, got, ended := s.stream(ctx, question("[[sim tokens=120]] Tell me about my order 17."))
	require.Equal(t, res.Content, got.text, "the deltas add up to the content")
	require.Equal(t, workflows.SourceModel, res.Source)
	require.Greater(t, got.deltas, 1, "the text came in several deltas")
	require.True(t, got.firstDelta.Before(ended.Add(-time.Second)), "the first delta came while the model was still generating")
	require.Equal(t, []string{workflows.EventAttemptStarted, workflows.EventDone}, got.events)
	// Stream returned at the done event, before the call closed; the result
	// it carried is the one the call then returned.
	final, err := s.Calls.Result(ctx, res.RequestID)
	require.NoError(t, err)
	require.Equal(t, final, res)
}

// TestIntegrationStreamResumes: a stream cut after 50 tokens is continued
// by the next attempt; the subscriber sees every token once.
func TestIntegrationStreamResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, got, _ := s.stream(ctx, question("[[sim fault=cut_stream after=50 times=1]] [[sim tokens=150]] Where is parcel 9?"))
	require.Equal(t, res.Content, got.text, "delivered text equals the content: nothing repeated, nothing lost")
	require.Equal(t, []string{"qwen-72b:stream_broken:resume (continue)", "qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, []string{workflows.EventAttemptStarted, workflows.EventAttemptFailed + ":stream_broken", workflows.EventResumed, workflows.EventDone}, got.events)
	full := s.Sim.Generated(res.RequestID) // what llmsim generated for this conversation
	require.Equal(t, full, res.Content)
	require.False(t, strings.Contains(res.Content, "  "), "no seam in the continued text")
}

// TestIntegrationTypeScriptSubscriber: an agent backend in TypeScript
// follows a call's tokens with Temporal's official Workflow Streams client
// and gets the result's content, live.
func TestIntegrationTypeScriptSubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	dir, err := filepath.Abs("../workflowstreams/testdata/tsclient")
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH (Node 20 or later is needed)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@temporalio", "workflow-streams")); err != nil {
		t.Skipf("the TypeScript client is not installed: npm ci --prefix %s", dir)
	}
	s := newStack(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := question("[[sim tokens=120]] What does the warranty cover?")
	req.Stream, req.StreamDeltas = true, true // the text on the stream itself
	run, err := s.Calls.Start(ctx, req)
	require.NoError(t, err)

	cmd := exec.CommandContext(ctx, node, "stream.mjs", "subscribe", "--address", shared.Server(t).FrontendHostPort(),
		"--workflow-id", run.GetID(), "--topics", workflows.TopicDelta)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var text strings.Builder
	var firstAt time.Time
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Value *workflows.Delta `json:"value"`
			End   bool             `json:"end"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		if line.Value != nil {
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
			text.WriteString(line.Value.Text)
		}
	}
	require.NoError(t, cmd.Wait(), stderr.String())
	var res workflows.CallResult
	require.NoError(t, run.Get(ctx, &res))
	desc, err := s.Client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	closed := desc.WorkflowExecutionInfo.CloseTime.AsTime()
	require.Equal(t, res.Content, text.String(), "the TypeScript subscriber got the content")
	require.True(t, firstAt.Before(closed.Add(-time.Second)), "the first delta reached TypeScript %v before the call closed", closed.Sub(firstAt))
}

// TestIntegrationLongGeneration: a healthy model that takes 20 s to write
// an 800-token answer is answered by the first attempt with one upstream
// request (the first-token timeout measures the queue, not generation).
func TestIntegrationLongGeneration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	start := time.Now()
	res := s.Call(question("[[sim tokens=800]] Write the full returns policy."))
	took := time.Since(start)
	require.Equal(t, []string{"qwen-72b:ok:answer"}, workflows.CallResult.Decisions(res))
	require.Equal(t, 800, res.Usage.CompletionTokens)
	require.Equal(t, 1, s.Sim.Stats().Conversations[res.RequestID].Attempts, "one upstream request")
	require.Greater(t, took, 19*time.Second, "llmsim generated at its default 40 tokens/s")
}
