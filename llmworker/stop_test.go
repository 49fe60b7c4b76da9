package llmworker_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
)

// stuck is an upstream transport and a spend meter that never return
// until released, whatever their contexts say: an attempt as busy as the
// spinning schema check of issue 30 was.
type stuck struct {
	release chan struct{}
	entered chan string
	once    sync.Map
}

func (s *stuck) enter(what string) {
	if _, again := s.once.LoadOrStore(what, true); !again {
		s.entered <- what
	}
	<-s.release
}

func (s *stuck) RoundTrip(*http.Request) (*http.Response, error) {
	s.enter("the call activity")
	return nil, http.ErrHandlerTimeout
}

func (s *stuck) Spent(string, time.Time) float64 {
	s.enter("the admission local activity")
	return 0
}

// TestIntegrationStopIsBoundedWhateverAttemptsDo: a worker whose
// activities ignore their cancelled contexts (one call stuck in its
// admission, a local activity, another in its upstream request) stops
// within its drain timeout and StopSlack. The SDK alone waits the drain
// timeout for each of its task workers in turn, three times here.
func TestIntegrationStopIsBoundedWhateverAttemptsDo(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.Spend = config.SpendConfig{Tenants: []config.TenantSpend{{Name: "metered", DailyCap: 1}}}
	})
	s.Worker.Stop() // only the worker below serves the calls
	busy := &stuck{release: make(chan struct{}), entered: make(chan string, 2)}
	t.Cleanup(func() { close(busy.release) })
	const drain = 10 * time.Second
	w, err := llmworker.New(s.Client, llmworker.Options{Config: s.Config, TaskQueue: s.TaskQueue, Transport: busy, Spend: busy,
		Worker: worker.Options{WorkerStopTimeout: drain}})
	require.NoError(t, err)
	require.Equal(t, drain, w.StopTimeout())
	require.NoError(t, w.Start())

	for _, tenant := range []string{"metered", "free"} {
		req := question("Where is my order?")
		req.Tenant = tenant
		_, err := s.Calls.Start(context.Background(), req)
		require.NoError(t, err)
	}
	for range 2 {
		select {
		case what := <-busy.entered:
			t.Logf("%s is stuck", what)
		case <-time.After(time.Minute):
			t.Fatal("the calls never reached their stuck activities")
		}
	}

	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(4 * drain):
		t.Fatal("Stop has not returned after four drain timeouts")
	}
	took := time.Since(start)
	t.Logf("Stop took %v (drain timeout %v, slack %v)", took, drain, llmworker.StopSlack)
	require.GreaterOrEqual(t, took, drain-time.Second, "Stop did not let the attempts drain")
	require.LessOrEqual(t, took, drain+llmworker.StopSlack+2*time.Second, "Stop took longer than its drain timeout and slack")
}
