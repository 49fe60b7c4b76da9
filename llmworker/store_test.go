package llmworker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/store"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationSharedStore: with store.kind postgres, an answer one
// worker got from a model is served from the cache by another worker
// (whose memory never saw it) during maintenance, and the tokens both
// workers' calls spent are in the usage table, as the metrics count them.
func TestIntegrationSharedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := openStore(t)

	s := newStack(t, func(c *config.Config) {
		c.Store = config.StoreConfig{Kind: config.StorePostgres, DSNEnv: "LLM_STORE_DSN", UsageFlush: config.Duration(time.Hour)}
	})
	s.Worker.Stop() // the stack's own worker does not use the store
	since := time.Now().Add(-time.Minute)
	worker := func() (*llmworker.Usage, func()) { return s.storeWorker(st, time.Hour, false) }

	_, stop1 := worker()
	first := s.Call(question("How long does shipping to Canada take?"))
	require.Equal(t, workflows.SourceModel, first.Source)
	stop1() // flushes its usage

	require.NoError(t, s.Sim.SetScenario(&llmsim.Scenario{Name: "maintenance", Models: llmsim.InstantModels(), Phases: []llmsim.Phase{{
		Name: "maintenance", Faults: []llmsim.FaultSpec{{Kind: llmsim.FaultMaintenance}},
	}}}))
	u2, stop2 := worker()
	res := s.Call(question("how long does SHIPPING to canada take"))
	require.Equal(t, workflows.SourceCache, res.Source, "%+v", res.Attempts)
	require.Equal(t, first.Content, res.Content)
	require.Positive(t, res.CacheAgeMS)
	u2.Flush(ctx)
	stop2()

	rows, err := st.Usage(ctx, since)
	require.NoError(t, err)
	got := map[string]int64{}
	for _, r := range rows {
		require.Equal(t, "qwen-72b", r.Model)
		got[r.Kind] += r.Tokens
	}
	require.Equal(t, map[string]int64{
		"prompt":     int64(first.Usage.PromptTokens),
		"completion": int64(first.Usage.CompletionTokens),
		"failed":     int64(res.Usage.FailedAttemptTokens),
	}, got, "the usage table disagrees with the calls' usage")
}

// storeWorker starts a worker of s with its own memory on the shared store
// st, its usage added every flush and, with spend, its spend metered for
// the policy's caps; s.Calls calls through it. The func stops it (flushing
// its usage).
func (s *stack) storeWorker(st *store.Postgres, flush time.Duration, spend bool) (*llmworker.Usage, func()) {
	s.t.Helper()
	u := llmworker.NewUsage(st, flush, slog.Default())
	o := llmworker.Options{Config: s.Config, TaskQueue: s.TaskQueue, SharedCache: st, Worker: worker.Options{}}
	if spend {
		u.PriceWith(func(model, kind string, n int64) float64 { c, _ := s.Config.TokenCost(model, kind, n); return c })
		o.Spend = u
	}
	c, err := client.NewClientFromExisting(s.Client, client.Options{MetricsHandler: u.Handler(client.MetricsNopHandler)})
	require.NoError(s.t, err)
	w, err := llmworker.New(c, o)
	require.NoError(s.t, err)
	require.NoError(s.t, w.Start())
	s.Calls = &llmclient.Client{Temporal: c, TaskQueue: s.TaskQueue}
	return u, func() { w.Stop(); u.Close(); c.Close() }
}

// openStore opens the shared store on a new database of the tests'
// PostgreSQL, closed when t ends.
func openStore(t *testing.T) *store.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, postgres.Database(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}
