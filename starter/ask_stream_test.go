package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/workflows"
)

// liveWriter records what ask prints and, at the first piece of answer
// text (a write that is not an event line), whether the call was still
// running.
type liveWriter struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	c         client.Client
	id        string
	sawText   bool
	whileLive bool
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	event := bytes.HasPrefix(p, []byte("[attempt ")) || bytes.HasPrefix(p, []byte("[waiting "))
	if !w.sawText && len(bytes.TrimSpace(p)) > 0 && !event {
		w.sawText = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		desc, err := w.c.DescribeWorkflowExecution(ctx, w.id, "")
		cancel()
		w.whileLive = err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	return w.buf.Write(p)
}

// TestIntegrationAskStream runs `starter ask --stream` against a real dev
// server, worker and llmsim: the answer is printed as it is generated,
// with the attempt events on lines of their own, through a cut stream
// that the next attempt continues; then the summary. --json --stream
// prints JSON lines of items and the result.
func TestIntegrationAskStream(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	srv, _ := askStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	result := func(id string) workflows.CallResult {
		var res workflows.CallResult
		require.NoError(t, srv.Client().GetWorkflow(ctx, id, "").Get(ctx, &res))
		return res
	}

	t.Run("text", func(t *testing.T) {
		q := "[[sim fault=cut_stream after=50 times=1]] [[sim tokens=150]] Where is parcel 9?"
		out := &liveWriter{c: srv.Client(), id: "ask-stream-1"}
		require.NoError(t, run(ctx, []string{"ask", "--stream", "--system", "", "--key", out.id, q}, out))
		printed := out.buf.String()
		t.Logf("starter ask --stream:\n%s", printed)
		require.True(t, out.whileLive, "the first text was printed while the call was running")

		res := result("ask-stream-1")
		require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 150), res.Content)
		live, summary, ok := strings.Cut(printed, "\n\nsource:   ")
		require.True(t, ok, "a summary follows the text")
		// [attempt 1 · qwen-72b]
		// <text of attempt 1>
		// [attempt 1 failed · stream_broken: …]
		// [attempt 2 · qwen-72b · resuming the answer]
		// <the rest of the text>
		before, after, ok := strings.Cut(live, "\n[attempt 1 failed · stream_broken: ")
		require.True(t, ok, live)
		part1, ok := strings.CutPrefix(before, "[attempt 1 · qwen-72b]\n")
		require.True(t, ok, live)
		_, part2, ok := strings.Cut(after, "]\n[attempt 2 · qwen-72b · resuming the answer]\n")
		require.True(t, ok, live)
		require.NotEmpty(t, part1)
		require.Equal(t, res.Content, part1+strings.TrimSuffix(part2, "\n"), "the printed text is the answer, every token once")
		require.True(t, strings.HasPrefix(summary, "model (qwen-72b)"), summary)
		require.Contains(t, summary, "call:     ask-stream-1")
		require.Contains(t, summary, "stream_broken")
		require.Contains(t, summary, "Web UI:")
		require.NotContains(t, summary, res.Content[:40], "the answer is not printed twice")
	})

	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"ask", "--stream", "--json", "--key", "ask-stream-2", "[[sim tokens=60]] What is my balance?"}, &out))
		var text strings.Builder
		var types []string
		var final struct {
			Result *workflows.CallResult `json:"result"`
		}
		sc := bufio.NewScanner(&out)
		lines := 0
		for sc.Scan() {
			lines++
			var item struct {
				Offset *int64           `json:"offset"`
				Delta  *workflows.Delta `json:"delta"`
				Event  *workflows.Event `json:"event"`
				Result json.RawMessage  `json:"result"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &item), sc.Text())
			if item.Result != nil {
				require.NoError(t, json.Unmarshal(sc.Bytes(), &final))
				continue
			}
			require.Nil(t, final.Result, "nothing after the result")
			require.NotNil(t, item.Offset, sc.Text())
			switch {
			case item.Delta != nil:
				text.WriteString(item.Delta.Text)
			case item.Event != nil:
				types = append(types, item.Event.Type)
			default:
				t.Fatalf("line with neither delta nor event: %s", sc.Text())
			}
		}
		require.NotNil(t, final.Result)
		require.Equal(t, final.Result.Content, text.String())
		require.Equal(t, result("ask-stream-2").Content, final.Result.Content)
		require.Equal(t, []string{workflows.EventAttemptStarted, workflows.EventDone}, types)
		require.Greater(t, lines, 5, "items, one per line")
	})
}
