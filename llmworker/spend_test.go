package llmworker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationSpendCapIsTheFleets: a tenant's daily spend cap counts
// what the whole fleet spent for it. Worker A answers acme's first call,
// whose price is over acme's cap, and flushes its usage; worker B, which
// never ran an acme call, refuses acme's next call at admission (type
// spend_cap, naming the tenant, its spend and its cap, no upstream
// request) and still answers globex, which has no cap.
func TestIntegrationSpendCapIsTheFleets(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := openStore(t)

	s := newStackWith(t, llmsim.Options{Scenario: &llmsim.Scenario{Name: "instant", Models: llmsim.InstantModels()}}, func(c *config.Config) {
		for i := range c.Models {
			c.Models[i].InputPrice, c.Models[i].OutputPrice = 1000, 2000 // per million tokens: a call costs about 0.1
		}
		c.Spend = config.SpendConfig{Tenants: []config.TenantSpend{{Name: "acme", DailyCap: 0.01}}}
	})
	s.Worker.Stop() // the stack's own worker meters nothing
	worker := func() (*llmworker.Usage, func()) { return s.storeWorker(st, 100*time.Millisecond, true) }
	ask := func(tenant, q string) (workflows.CallResult, error) {
		req := question(q)
		req.Tenant = tenant
		return s.Calls.Call(ctx, req)
	}

	_, stopA := worker()
	res, err := ask("acme", "Where is my order?")
	require.NoError(t, err)
	require.Equal(t, workflows.SourceModel, res.Source)
	stopA() // flushes acme's spend to the usage table

	b, stopB := worker()
	defer stopB()
	require.Eventually(t, func() bool { return b.Spent("acme", time.Now()) >= 0.01 }, 10*time.Second, 50*time.Millisecond,
		"worker B never read acme's spend from the store")
	requests := s.Sim.Stats().Totals.Arrivals
	_, err = ask("acme", "And my other order?")
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "acme over its cap: %v", err)
	require.Equal(t, activities.SpendCapError, app.Type())
	require.Contains(t, app.Error(), `tenant "acme" has spent`)
	require.Contains(t, app.Error(), "its daily cap is 0.0100")
	require.Equal(t, requests, s.Sim.Stats().Totals.Arrivals, "a call over the cap reached the upstream")

	res, err = ask("globex", "Where is my order?")
	require.NoError(t, err, "a tenant without a cap was refused")
	require.Equal(t, workflows.SourceModel, res.Source)
}
