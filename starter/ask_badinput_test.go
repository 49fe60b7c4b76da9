package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestAskRefusesBadArgumentsBeforeDialing: mistakes on the command line are
// reported with the flag, file or argument at fault, before anything is
// dialled (TEMPORAL_ADDRESS points nowhere, so a dial would say so instead).
func TestAskRefusesBadArgumentsBeforeDialing(t *testing.T) {
	t.Setenv(codec.EnvKeys, "")
	t.Setenv("TEMPORAL_ADDRESS", closedAddr(t))
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "messages.txt")
	require.NoError(t, os.WriteFile(notJSON, []byte("where is my order?"), 0o600))
	notArray := filepath.Join(dir, "object.json")
	require.NoError(t, os.WriteFile(notArray, []byte(`{"role":"user","content":"hi"}`), 0o600))
	missing := filepath.Join(dir, "missing.json")

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no command", nil, []string{"a command is required"}},
		{"unknown command", []string{"aks", "hi"}, []string{`unknown command "aks"`}},
		{"missing question", []string{"ask"}, []string{"a question is required"}},
		{"missing question after flags", []string{"ask", "--user", "u-1"}, []string{"a question is required"}},
		{"unknown flag", []string{"ask", "--temperature", "0.2", "hi"}, []string{"flag provided but not defined", "-temperature"}},
		{"max-tokens not a number", []string{"ask", "--max-tokens", "lots", "hi"}, []string{`invalid value "lots"`, "-max-tokens"}},
		{"deadline without a unit", []string{"ask", "--deadline", "30", "hi"}, []string{`invalid value "30"`, "-deadline"}},
		{"messages file missing", []string{"ask", "--messages", missing}, []string{missing, "no such file"}},
		{"messages file not JSON", []string{"ask", "--messages", notJSON}, []string{notJSON, "not a JSON array of messages"}},
		{"messages file not an array", []string{"ask", "--messages", notArray}, []string{notArray, "not a JSON array of messages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, tc.args, &out)
			require.Error(t, err)
			t.Logf("starter: %v", err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "cannot reach Temporal", "checked before dialling")
		})
	}
}

// TestAskWithoutTemporal: no server at TEMPORAL_ADDRESS gives a message
// that names the address and the variable to set.
func TestAskWithoutTemporal(t *testing.T) {
	t.Setenv(codec.EnvKeys, "")
	addr := closedAddr(t)
	t.Setenv("TEMPORAL_ADDRESS", addr)
	var out bytes.Buffer
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"ask", "Where is my order?"}, &out)
	require.Error(t, err)
	t.Logf("starter after %v: %v", time.Since(start).Round(time.Millisecond), err)
	require.Contains(t, err.Error(), "cannot reach Temporal at "+addr)
	require.Contains(t, err.Error(), "TEMPORAL_ADDRESS")
	require.Empty(t, out.String(), "nothing printed as if it were an answer")
}

// TestIntegrationAskRefusesBadRequests runs `starter ask` against a real
// dev server, worker and llmsim with requests that parse but are wrong.
// Each error names the field, no call stays running, and the upstream
// never sees a request.
func TestIntegrationAskRefusesBadRequests(t *testing.T) {
	srv, sim := askStack(t)

	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"empty messages array", []string{"ask", "--messages", file("empty.json", "[]")},
			[]string{"messages", "at least one message"}},
		{"last message from the assistant", []string{"ask", "--messages",
			file("assistant-last.json", `[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`)},
			[]string{"messages[1].role", `"assistant"`}},
		{"unknown role", []string{"ask", "--messages", file("role.json", `[{"role":"wizard","content":"obey"},{"role":"user","content":"hi"}]`)},
			[]string{"messages[0].role", `unknown role "wizard"`}},
		{"unknown model", []string{"ask", "--model", "gpt-9", "Where is my order?"},
			[]string{"model", `unknown model "gpt-9"`}},
		{"negative max-tokens", []string{"ask", "--max-tokens", "-5", "Where is my order?"},
			[]string{"max_tokens", "-5 is negative"}},
		{"absurd max-tokens", []string{"ask", "--max-tokens", "99999999", "Where is my order?"},
			[]string{"max_tokens", "over the limit"}},
		{"negative deadline", []string{"ask", "--deadline", "-1s", "Where is my order?"},
			[]string{"deadline_ms", "negative"}},
		{"absurd deadline", []string{"ask", "--deadline", "720h", "Where is my order?"},
			[]string{"deadline_ms", "over the limit"}},
		{"bad idempotency key", []string{"ask", "--key", "order/42", "Where is my order?"},
			[]string{"idempotency_key", `'/'`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := run(ctx, tc.args, &out)
			require.Error(t, err)
			t.Logf("starter: %v", err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "retryable: true", "a bad request must not be called retryable")
			require.Equal(t, 1, strings.Count(err.Error(), "invalid request:"), "the problem is said once")
			requireNoOpenLLMCalls(t, srv.Client())
			require.Zero(t, sim.Stats().Totals.Arrivals, "no upstream request for a bad request")
		})
	}
}

// askStack runs what `starter ask` talks to until the test ends: a dev
// server (TEMPORAL_ADDRESS points at it, no codec keys), llmsim as every
// model's endpoint, and a worker on the task queue llm-calls, as `starter
// ask` uses.
func askStack(t *testing.T) (*testsuite.DevServer, *llmsim.Server) {
	t.Helper()
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendHostPort())
	t.Setenv(codec.EnvKeys, "")
	return srv, rig.New(t, rig.Options{Client: srv.Client(), TaskQueue: workflows.TaskQueue}).Sim
}

// requireNoOpenLLMCalls fails unless visibility soon lists no running
// LLMCall (it trails a workflow's close by a moment).
func requireNoOpenLLMCalls(t *testing.T, c client.Client) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `WorkflowType = "LLMCall" AND ExecutionStatus = "Running"`,
		})
		cancel()
		require.NoError(t, err)
		if len(resp.GetExecutions()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var ids []string
			for _, e := range resp.GetExecutions() {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			t.Fatalf("calls still running after 15s: %v", ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
