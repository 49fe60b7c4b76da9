package llmworker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationCacheDuringMaintenance: a model answers a question; when
// every model is under maintenance, the same question (asked another way,
// by another user) is answered from the cache with its age, before the
// FAQ; a question with an order number is never kept.
func TestIntegrationCacheDuringMaintenance(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := newStack(t, nil)
	res := s.Call(question("How long does shipping to Canada take?"))
	require.Equal(t, workflows.SourceModel, res.Source)
	answer := res.Content
	res = s.Call(question("My order 12345678 has not arrived, where is it?"))
	require.Equal(t, workflows.SourceModel, res.Source)

	require.NoError(t, s.Sim.SetScenario(&llmsim.Scenario{Name: "maintenance", Models: llmsim.InstantModels(), Phases: []llmsim.Phase{{
		Name: "maintenance", Faults: []llmsim.FaultSpec{{Kind: llmsim.FaultMaintenance}},
	}}}))
	time.Sleep(50 * time.Millisecond)
	res = s.Call(question("how long does SHIPPING to canada take"))
	require.Equal(t, workflows.SourceCache, res.Source, "%+v", res.Attempts)
	require.Equal(t, answer, res.Content)
	require.Equal(t, "qwen-72b", res.Model, "the cached answer names its model")
	require.Positive(t, res.CacheAgeMS)
	require.True(t, res.Degraded)
	require.Contains(t, res.Reason, "answered from the cache")

	res = s.Call(question("My order 12345678 has not arrived, where is it?"))
	require.NotEqual(t, workflows.SourceCache, res.Source, "an answer to a question with an order number was kept")
}
