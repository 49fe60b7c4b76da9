package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationDoorWithWorkerKilledMidCall: `starter serve --worker`
// starts a call eagerly on the worker in its own process, which takes the
// call's first workflow task and its attempt. The process is SIGKILLed
// while the upstream holds the attempt. A worker started afterwards runs
// the call on, and the client's retry with the same Idempotency-Key
// through a door without a worker gets the one answer: the attempt was
// resent once under its own key, and asked again, the call answers from
// its history with no new upstream request.
func TestIntegrationDoorWithWorkerKilledMidCall(t *testing.T) {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	sim := rig.Sim(t, llmsim.Options{})
	token := strings.Repeat("e", frontdoor.MinTokenLen)
	env := []string{"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(), "LLM_BASE_URL=" + sim.BaseURL,
		"POLICY_FILE=" + policyFile(t, "call:\n  heartbeat_timeout: 2s\n"), "WORKER_TASK_QUEUE=door-eager-" + uuid.NewString()[:8],
		frontdoor.TokensEnv + "=" + token + "=acme"}

	door, base := startDoorProc(t, "serve --worker --addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0", env)
	ask := func(url string) (*http.Response, error) {
		body := `{"model":"auto","messages":[{"role":"user","content":"[[sim fault=latency latency=30s times=1]] Is my refund processed?"}]}`
		req, err := http.NewRequest(http.MethodPost, url+"/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "refund-42")
		return http.DefaultClient.Do(req)
	}
	go func() {
		if resp, err := ask(base); err == nil {
			resp.Body.Close() // the door dies before it answers
		}
	}()
	var id string
	require.Eventually(t, func() bool {
		for conv, c := range sim.Stats().Conversations {
			if c.Attempts == 1 {
				id = conv
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the call's first attempt never reached the upstream")

	// The first workflow task ran in the door's process, and the attempt
	// is held there.
	c := srv.Client()
	var taskBy []string
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			taskBy = append(taskBy, a.GetIdentity())
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			require.True(t, a.GetEagerExecutionAccepted(), "the door's start was not eager")
		}
	}
	pid := fmt.Sprintf("%d@", door.Process.Pid)
	require.NotEmpty(t, taskBy)
	require.True(t, strings.HasPrefix(taskBy[0], pid), "the first workflow task ran in %v, not the door's process %s", taskBy, pid)
	var attemptBy string
	require.Eventually(t, func() bool {
		attemptBy = testenv.PendingActivityWorker(context.Background(), c, id, "CallModel")
		return attemptBy != ""
	}, 10*time.Second, 50*time.Millisecond, "no pending CallModel activity with a worker identity")
	require.True(t, strings.HasPrefix(attemptBy, pid), "the attempt is held by %s, not the door's process %s", attemptBy, pid)
	require.NoError(t, door.Process.Signal(syscall.SIGKILL))
	_, _ = door.Process.Wait()

	startWorkerProc(t, env)
	_, base = startDoorProc(t, "serve --addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0", env)
	answer := func() string {
		resp, err := ask(base)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Len(t, out.Choices, 1)
		require.Equal(t, id, resp.Header.Get(frontdoor.HeaderWorkflowID), "the retry reached the same call")
		return out.Choices[0].Message.Content
	}
	first := answer()
	require.NotEmpty(t, first)
	up := sim.Stats().Conversations[id]
	require.Equal(t, 2, up.Attempts, "the attempt the killed process held, resent once: %+v", up.Requests)
	require.Equal(t, up.Requests[0].IdempotencyKey, up.Requests[1].IdempotencyKey, "the resend keeps its Idempotency-Key")

	require.Equal(t, first, answer(), "asked again, the call answers the same")
	require.Equal(t, 2, sim.Stats().Conversations[id].Attempts, "and sends nothing upstream")
}

// startDoorProc runs `starter <args>` as a process of its own with env and
// returns it with the base URL it prints (http://ADDR/v1).
func startDoorProc(t *testing.T, args string, env []string) (*exec.Cmd, string) {
	t.Helper()
	cmd, lines := startServe(t, args, env...)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("starter %s exited before listening", args)
			}
			if _, rest, found := strings.Cut(line, "front door listening on "); found {
				return cmd, strings.Fields(rest)[0]
			}
		case <-timeout:
			t.Fatalf("starter %s: no \"front door listening\" line within 60 s", args)
		}
	}
}

// startWorkerProc builds and runs the worker command with env; it is killed
// when the test ends.
func startWorkerProc(t *testing.T, env []string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	out, err := exec.Command("go", "build", "-o", bin, "../worker").CombinedOutput()
	require.NoError(t, err, "go build ../worker:\n%s", out)
	cmd := exec.Command(bin)
	cmd.Env = append(append(cmd.Environ(), "METRICS_ADDR=127.0.0.1:0", "LOG_LEVEL=warn"), env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("worker output:\n%s", log.String())
		}
	})
}

func TestDoorWorkerRefusesWhatOnlyTheWorkerCommandDoes(t *testing.T) {
	none := func(string) string { return "" }
	cfg := config.DefaultConfig()
	require.NoError(t, doorWorkerAllowed(cfg, none))
	shared := config.DefaultConfig()
	shared.Store.Kind = config.StorePostgres
	require.ErrorContains(t, doorWorkerAllowed(shared, none), "shares a store")
	capped := config.DefaultConfig()
	capped.Spend.DailyCap = 5
	require.ErrorContains(t, doorWorkerAllowed(capped, none), "caps tenants' spend")
	require.ErrorContains(t, doorWorkerAllowed(cfg, func(k string) string {
		if k == "WORKER_DEPLOYMENT" {
			return "llm"
		}
		return ""
	}), "does not follow worker versioning")
}
