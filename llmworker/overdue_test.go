package llmworker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/workflows"
)

// shortFirstToken sets every model's first_token_timeout to d.
func shortFirstToken(d time.Duration) func(*config.Config) {
	return func(c *config.Config) {
		for i := range c.Models {
			c.Models[i].FirstTokenTimeout = config.Duration(d)
		}
	}
}

// TestIntegrationALateFirstTokenIsAnswered: an upstream whose every answer
// starts late, past first_token_timeout (1 s) but well within the
// deadline, at low traffic (a call every 700 ms). Each call is answered by
// the model, in one request: nothing answers sooner (every request is as
// late and there is no other endpoint), so the request is kept open, never
// cut for a retry that could only be slower. Before, the attempt was cut
// at the first-token timeout and calls ended in the placeholder.
func TestIntegrationALateFirstTokenIsAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, shortFirstToken(time.Second))
	const calls = 5
	results := make([]workflows.CallResult, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := question(fmt.Sprintf("[[sim fault=latency latency=2500ms times=always]] Where is order %d?", i))
			req.DeadlineMS = 15000
			results[i] = s.Call(req)
		}()
		time.Sleep(700 * time.Millisecond)
	}
	wg.Wait()
	for i, res := range results {
		require.Equal(t, workflows.SourceModel, res.Source, "call %d: %v", i, res.Decisions())
		require.Contains(t, res.Content, "["+res.Model+"]", "call %d: a model's answer", i)
		up := s.Upstream(res.RequestID).Attempts
		require.LessOrEqual(t, up, 2, "call %d: upstream requests (%v)", i, res.Decisions())
		for _, a := range res.Attempts {
			require.NotEqual(t, string(failure.ReadTimeout), a.Class, "call %d: a request cut for its late first token (%v)", i, res.Decisions())
			if a.Decision != "answer" {
				require.True(t, a.Hedge || a.Decision == "cancelled", "call %d: a second request that is no hedge (%v)", i, res.Decisions())
			}
		}
	}
}

// TestIntegrationALostRequestIsHedged: a call's request hangs (lost), while
// the endpoint answers a request sent after it at once. Once its first
// token is overdue, a hedge goes to the same model, since its endpoint
// answers newer requests in time; the hedge answers and the lost request is
// cancelled, well before the attempt's timeout. Two upstream requests.
func TestIntegrationALostRequestIsHedged(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, shortFirstToken(time.Second))
	done := make(chan workflows.CallResult, 1)
	start := time.Now()
	go func() { done <- s.Call(question("[[sim fault=hang times=1]] Where is my parcel?")) }()
	time.Sleep(300 * time.Millisecond)
	other := s.Call(question("Where is my refund?"))
	require.Equal(t, workflows.SourceModel, other.Source)
	res := <-done
	took := time.Since(start)
	require.Equal(t, []string{"qwen-72b:ok:cancelled", "qwen-72b:ok:answer"}, res.Decisions(), "reasons: %+v", res.Attempts)
	require.True(t, res.Attempts[1].Hedge, "the answer is the hedge's")
	require.Equal(t, workflows.SourceModel, res.Source)
	require.Equal(t, 2, s.Upstream(res.RequestID).Attempts)
	require.Less(t, took, 10*time.Second, "the call waited for its lost request's timeout")
}
