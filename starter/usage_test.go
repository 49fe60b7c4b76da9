package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/store"
	"github.com/durable-llm/durable-llm/testkit/testenv"
)

var postgres testenv.SharedPostgres

func TestMain(m *testing.M) {
	code := m.Run()
	postgres.Stop()
	os.Exit(code)
}

func policyFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUsageCommand: `starter usage` sums the usage table since --since
// per tenant and model, prices it from the policy, and leaves out what is
// older.
func TestUsageCommand(t *testing.T) {
	dsn := postgres.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for _, add := range []struct {
		at   time.Time
		rows []store.Tokens
	}{
		{now.Add(-10 * time.Minute), []store.Tokens{{Tenant: "acme", Model: "qwen-72b", Kind: "prompt", Tokens: 1_000_000}, {Tenant: "acme", Model: "qwen-72b", Kind: "completion", Tokens: 500_000}}},
		{now.Add(-5 * time.Minute), []store.Tokens{{Tenant: "acme", Model: "qwen-72b", Kind: "failed", Tokens: 1_000_000}, {Tenant: "acme", Model: "qwen-72b", Kind: "duplicate", Tokens: 2_000}}},
		{now.Add(-3 * time.Minute), []store.Tokens{{Tenant: "globex", Model: "llama-8b", Kind: "prompt", Tokens: 100}}},
		{now.Add(-3 * time.Hour), []store.Tokens{{Tenant: "acme", Model: "qwen-72b", Kind: "prompt", Tokens: 9_000_000}}},
	} {
		if err := st.AddUsage(ctx, add.at, add.rows); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TEST_STORE_DSN", dsn)
	policy := policyFile(t, "store:\n  kind: postgres\n  dsn_env: TEST_STORE_DSN\n")
	var out bytes.Buffer
	if err := run(ctx, []string{"usage", "--since", "1h", "--policy", policy}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	// qwen-72b: (1M prompt + 1M failed) × $0.56 + 0.5M × $1.68 = $1.96;
	// llama-8b: 100 × $0.05 / 1M.
	for _, want := range []string{
		"acme      qwen-72b  1000000      500000  1000000       2000  $1.9600",
		"globex  llama-8b      100           0        0          0  $0.0000",
		"total               1000100      500000  1000000       2000  $1.9600",
	} {
		if !strings.Contains(squeeze(got), squeeze(want)) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// TestUsageCommandRefuses: without a shared store, or without its URL,
// the command says what to set.
func TestUsageCommandRefuses(t *testing.T) {
	ctx := context.Background()
	err := run(ctx, []string{"usage", "--policy", policyFile(t, "store:\n  kind: memory\n")}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "store.kind postgres") || !strings.Contains(err.Error(), "llm_tokens_total") {
		t.Errorf("memory store: %v", err)
	}
	t.Setenv("NO_SUCH_DSN", "")
	err = run(ctx, []string{"usage", "--policy", policyFile(t, "store:\n  kind: postgres\n  dsn_env: NO_SUCH_DSN\n")}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "NO_SUCH_DSN is not set") {
		t.Errorf("no URL: %v", err)
	}
	err = run(ctx, []string{"usage", "--since", "-1h"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--since must be a positive duration") {
		t.Errorf("negative --since: %v", err)
	}
}

// squeeze folds runs of spaces, so the test does not depend on column widths.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
