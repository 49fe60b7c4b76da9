package llmworker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
)

// TestSettingsPrintSaysWhatDiffers: the print hashes each shared setting
// apart, never shows a secret, survives a worker identity, and names what
// two processes do not share.
func TestSettingsPrintSaysWhatDiffers(t *testing.T) {
	cfg := config.DefaultConfig()
	env := map[string]string{"LLM_ID_SECRET": "s3cret-ids-0123456789", "LLM_PAYLOAD_KEYS": "k1:AAAA"}
	a := llmworker.PrintSettings(cfg, func(k string) string { return env[k] })
	for _, v := range env {
		require.NotContains(t, a.String(), v)
	}
	back, ok := llmworker.ParseSettingsPrint("4242@host " + a.String())
	require.True(t, ok)
	require.Equal(t, a, back)
	require.Empty(t, a.Differ(back))

	env["LLM_ID_SECRET"] = "another-secret-0123456789"
	b := llmworker.PrintSettings(cfg, func(k string) string { return env[k] })
	require.Equal(t, []string{"LLM_ID_SECRET"}, a.Differ(b))
	cfg.Models = cfg.Models[:1]
	c := llmworker.PrintSettings(cfg, func(string) string { return "" })
	require.Equal(t, []string{"the ladder (POLICY_FILE, LLM_MODELS)", "LLM_ID_SECRET", "LLM_PAYLOAD_KEYS"}, a.Differ(c))
}

// TestIntegrationFleetSettingsCompared: a worker polls with its settings'
// print in its identity; a process with the same settings finds nothing
// to say, one with another ID secret is told which setting and which
// worker.
func TestIntegrationFleetSettingsCompared(t *testing.T) {
	srv := shared.Server(t)
	cfg := config.DefaultConfig()
	env := map[string]string{"LLM_ID_SECRET": "workers-secret-0123456789abcdefghijklmnop"}
	getenv := func(k string) string { return env[k] }
	tq := "llm-settings-" + uuid.NewString()[:8]
	w, err := llmworker.New(srv.Client(), llmworker.Options{Config: cfg, TaskQueue: tq, Getenv: getenv, Worker: worker.Options{Identity: "worker-a"}})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	same := llmworker.PrintSettings(cfg, getenv)
	require.Eventually(t, func() bool {
		d, err := srv.Client().DescribeTaskQueue(ctx, tq, 1)
		return err == nil && len(d.GetPollers()) > 0
	}, 20*time.Second, 100*time.Millisecond, "the worker polls")
	diffs, err := llmworker.CompareFleetSettings(ctx, srv.Client(), tq, same)
	require.NoError(t, err)
	require.Empty(t, diffs)

	other := llmworker.PrintSettings(cfg, func(k string) string {
		if k == "LLM_ID_SECRET" {
			return "the-door-has-another-secret-0123456789"
		}
		return env[k]
	})
	diffs, err = llmworker.CompareFleetSettings(ctx, srv.Client(), tq, other)
	require.NoError(t, err)
	require.Len(t, diffs, 1, "%v", diffs)
	require.True(t, strings.HasPrefix(diffs[0], "LLM_ID_SECRET differs from that of the workers on "+tq+" (worker-a)"), diffs[0])
}
