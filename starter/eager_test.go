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
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// doorKill is a front door with a worker in its own process (`starter
// serve --worker`) in front of llmsim, and a client that asks it one
// question under one Idempotency-Key.
type doorKill struct {
	t        *testing.T
	srv      *testsuite.DevServer
	sim      *llmsim.Server
	env      []string
	token    string
	question string
	door     *exec.Cmd
	base     string
}

func newDoorKill(t *testing.T, question string) *doorKill {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	sim := rig.Sim(t, llmsim.Options{})
	token := strings.Repeat("e", frontdoor.MinTokenLen)
	k := &doorKill{t: t, srv: srv, sim: sim, token: token, question: question,
		env: []string{"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(), "LLM_BASE_URL=" + sim.BaseURL,
			"POLICY_FILE=" + policyFile(t, "call:\n  heartbeat_timeout: 2s\n"), "WORKER_TASK_QUEUE=door-eager-" + uuid.NewString()[:8],
			frontdoor.TokensEnv + "=" + token + "=acme"}}
	k.door, k.base = startDoorProc(t, "serve --worker --addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0", k.env)
	return k
}

func (k *doorKill) ask(url string) (*http.Response, error) {
	body := fmt.Sprintf(`{"model":"auto","messages":[{"role":"user","content":%q}]}`, k.question)
	req, err := http.NewRequest(http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	require.NoError(k.t, err)
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Idempotency-Key", "refund-42")
	return http.DefaultClient.Do(req)
}

// askUnread asks the door with a worker and never reads its answer: the
// caller does not have it when the door's process dies.
func (k *doorKill) askUnread() {
	go func() {
		if resp, err := k.ask(k.base); err == nil {
			resp.Body.Close()
		}
	}()
}

// call is the workflow of the question, once its first attempt reached
// the upstream.
func (k *doorKill) call() string {
	var id string
	require.Eventually(k.t, func() bool {
		for conv, c := range k.sim.Stats().Conversations {
			if c.Attempts == 1 {
				id = conv
				return true
			}
		}
		return false
	}, 30*time.Second, 5*time.Millisecond, "the call's first attempt never reached the upstream")
	return id
}

// history is what the call's history holds so far: whether its start was
// eager, the identities of the workers that took its workflow tasks, how
// many CallModel attempts completed, and its last event.
func (k *doorKill) history(id string) (eager bool, taskBy []string, completed int, last enumspb.EventType) {
	it := k.srv.Client().GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(k.t, err)
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			taskBy = append(taskBy, a.GetIdentity())
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			eager = a.GetEagerExecutionAccepted()
		}
		if ev.GetActivityTaskCompletedEventAttributes() != nil {
			completed++
		}
		last = ev.GetEventType()
	}
	return eager, taskBy, completed, last
}

// inDoor says whether a worker identity is the door's process's.
func (k *doorKill) inDoor(identity string) bool {
	return strings.HasPrefix(identity, fmt.Sprintf("%d@", k.door.Process.Pid))
}

// killAndRestart SIGKILLs the door's process, starts a worker, and
// returns the base URL of a door without one.
func (k *doorKill) killAndRestart() string {
	require.NoError(k.t, k.door.Process.Signal(syscall.SIGKILL))
	_, _ = k.door.Process.Wait()
	startWorkerProc(k.t, k.env)
	_, base := startDoorProc(k.t, "serve --addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0", k.env)
	return base
}

// answer is the client's retry under the same Idempotency-Key: the same
// call's one answer.
func (k *doorKill) answer(base, id string) string {
	resp, err := k.ask(base)
	require.NoError(k.t, err)
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	require.Equal(k.t, http.StatusOK, resp.StatusCode)
	require.NoError(k.t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(k.t, out.Choices, 1)
	require.Equal(k.t, id, resp.Header.Get(frontdoor.HeaderWorkflowID), "the retry reached the same call")
	require.NotEmpty(k.t, out.Choices[0].Message.Content)
	return out.Choices[0].Message.Content
}

// TestIntegrationDoorWithWorkerKilledMidCall: `starter serve --worker`
// starts a call eagerly on the worker in its own process, which takes the
// call's first workflow task and its attempt. The process is SIGKILLed
// while the upstream holds the attempt. A worker started afterwards runs
// the call on, and the client's retry with the same Idempotency-Key
// through a door without a worker gets the one answer: the attempt was
// resent once under its own key, and asked again, the call answers from
// its history with no new upstream request.
func TestIntegrationDoorWithWorkerKilledMidCall(t *testing.T) {
	k := newDoorKill(t, "[[sim fault=latency latency=30s times=1]] Is my refund processed?")
	k.askUnread()
	id := k.call()

	// The first workflow task ran in the door's process, and the attempt
	// is held there.
	eager, taskBy, _, _ := k.history(id)
	require.True(t, eager, "the door's start was not eager")
	require.NotEmpty(t, taskBy)
	require.True(t, k.inDoor(taskBy[0]), "the first workflow task ran in %v, not the door's process", taskBy)
	var attemptBy string
	require.Eventually(t, func() bool {
		attemptBy = testenv.PendingActivityWorker(context.Background(), k.srv.Client(), id, "CallModel")
		return attemptBy != ""
	}, 10*time.Second, 50*time.Millisecond, "no pending CallModel activity with a worker identity")
	require.True(t, k.inDoor(attemptBy), "the attempt is held by %s, not the door's process", attemptBy)

	base := k.killAndRestart()
	first := k.answer(base, id)
	up := k.sim.Stats().Conversations[id]
	require.Equal(t, 2, up.Attempts, "the attempt the killed process held, resent once: %+v", up.Requests)
	require.Equal(t, up.Requests[0].IdempotencyKey, up.Requests[1].IdempotencyKey, "the resend keeps its Idempotency-Key")

	require.Equal(t, first, k.answer(base, id), "asked again, the call answers the same")
	require.Equal(t, 2, k.sim.Stats().Conversations[id].Attempts, "and sends nothing upstream")
}

// TestIntegrationDoorWithWorkerKilledBeforeDelivery: the upstream answers
// the call's attempt in the door's process, and the process is SIGKILLed
// as soon as the history holds that answer, before the caller, who never
// read the first response, has it. The client's retry under the same
// Idempotency-Key gets the answer the history holds: one upstream
// request, one bill, whether the kill came before the workflow task that
// takes the answer (a new worker runs it) or after the call ended.
func TestIntegrationDoorWithWorkerKilledBeforeDelivery(t *testing.T) {
	k := newDoorKill(t, "[[sim fault=latency latency=1s times=1]] Is my refund processed?")
	k.askUnread()
	id := k.call()
	require.Eventually(t, func() bool {
		_, _, completed, _ := k.history(id)
		return completed == 1
	}, 30*time.Second, 2*time.Millisecond, "the attempt's answer never reached the history")
	base := k.killAndRestart()
	eager, taskBy, _, last := k.history(id)
	require.True(t, eager, "the door's start was not eager")
	require.True(t, k.inDoor(taskBy[0]), "the first workflow task ran in %v, not the door's process", taskBy)
	if last == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
		t.Skipf("the call had ended before the kill (workflow tasks by %v): not the case this test is for", taskBy)
	}
	t.Logf("killed after the answer, before the call ended: its history then ended with %s, workflow tasks by %v", last, taskBy)

	first := k.answer(base, id)
	require.Equal(t, 1, k.sim.Stats().Conversations[id].Attempts, "the answer the history held, with no second request upstream")
	require.Equal(t, first, k.answer(base, id), "asked again, the call answers the same")
	require.Equal(t, 1, k.sim.Stats().Conversations[id].Attempts, "and sends nothing upstream")
	_, _, completed, _ := k.history(id)
	require.Equal(t, 1, completed, "one attempt completed in the history")
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
