package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/testkit/cluster"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// binaries returns a directory with every program a cluster runs: ours,
// built now, beside Temporal's from the repository's bin (make
// cluster-bin). Without those the test skips, or fails under CI's
// DURABLE_LLM_REQUIRE_POSTGRES=1.
func binaries(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	for _, b := range []string{cluster.TemporalServerBin, cluster.SQLToolBin, cluster.UIServerBin} {
		src := filepath.Join(root, "bin", b)
		if _, err := os.Stat(src); err != nil {
			msg := fmt.Sprintf("%s is not built: run make cluster-bin", src)
			if os.Getenv(testenv.RequirePostgresEnv) == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		require.NoError(t, os.Symlink(src, filepath.Join(dir, b)))
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./worker", "./starter", "./llmsim/cmd/llmsim")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return dir
}

// stateDir is a directory PostgreSQL's own user can reach when the test
// runs as root (t.TempDir's are its owner's only).
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "durable-llm-cluster-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster's logs are kept in %s/logs", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// reply is what a test reads of a front door's answer.
type reply struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Resilience frontdoor.Resilience `json:"x_resilience"`
}

// asker sends chat completions to the cluster's front doors, each request
// with its own Idempotency-Key; when a front door is gone it sends the
// same request, same key, to the next one, as a client with a list of
// endpoints would.
type asker struct {
	c     *cluster.Cluster
	doors int
	token string
	http  *http.Client

	mu      sync.Mutex
	retried map[string]int // key → front doors that failed it
}

func (a *asker) ask(ctx context.Context, first int, key, prompt string) (reply, error) {
	body, _ := json.Marshal(map[string]any{
		"model":    "auto",
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	var errs []string
	for i := range 2 * a.doors {
		door := (first + i) % a.doors
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.c.FrontDoorURL(door)+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(frontdoor.HeaderIdempotencyKey, key)
		resp, err := a.http.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			var r reply
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			return r, err
		}
		if err == nil {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
			resp.Body.Close()
		}
		errs = append(errs, fmt.Sprintf("front door %d: %v", door+1, err))
		a.mu.Lock()
		a.retried[key]++
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return reply{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return reply{}, fmt.Errorf("no front door answered %s: %s", key, strings.Join(errs, "; "))
}

// TestClusterSurvivesKills runs the production topology (Temporal's
// server on PostgreSQL, three workers, two front doors, each its own
// process) and, while calls are in flight, kills a worker that is running
// attempts, kills a front door that holds requests open, and kills and
// restarts the Temporal server. Every call is answered, each by exactly
// one workflow run; the guards are shared by the workers (one breaker, one
// view with every worker's reports); the Web UI's visibility queries work
// on PostgreSQL.
func TestClusterSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, Temporal's server and seven processes (not in -short)")
	}
	bin := binaries(t)
	ports, err := cluster.FreePorts(3, 2)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{
		Dir: stateDir(t), Bin: bin, Workers: 3, FrontDoors: 2, Ports: ports, Scenario: "healthy",
		Env: []string{"LOG_LEVEL=warn"},
	})
	if err != nil && strings.Contains(err.Error(), "PostgreSQL is not installed") && os.Getenv(testenv.RequirePostgresEnv) != "1" {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	tc, err := c.Client(ctx)
	require.NoError(t, err)
	defer tc.Close()
	workerPids := waitForWorkers(t, ctx, tc, c, 3)
	requireOwnMetrics(t, c, 2)

	a := &asker{c: c, doors: 2, token: c.Token("acme"), http: &http.Client{Timeout: 3 * time.Minute}, retried: map[string]int{}}

	// Long answers (about 10 s at qwen-72b's 40 tokens/s), half through
	// each front door.
	const n = 12
	type result struct {
		key string
		r   reply
		err error
	}
	results := make(chan result, n)
	for i := range n {
		key := fmt.Sprintf("cluster-call-%d", i)
		go func() {
			r, err := a.ask(ctx, i%2, key, fmt.Sprintf("[[sim tokens=400]] Tell me all about order %d.", i))
			results <- result{key, r, err}
		}()
	}

	// A worker that is running attempts right now dies.
	victim := ""
	for victim == "" {
		require.NoError(t, ctx.Err(), "no worker ever ran an attempt")
		victim = busyWorker(ctx, tc, workerPids)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("killing %s (pid %d) mid-attempt", victim, c.Pid(victim))
	require.NoError(t, c.Kill(victim))
	// So does front door 1, which holds half of the requests open.
	require.NoError(t, c.Kill("frontdoor-1"))
	// Then Temporal's server, killed and started again.
	time.Sleep(time.Second)
	require.NoError(t, c.Kill("temporal"))
	time.Sleep(2 * time.Second)
	require.NoError(t, c.Restart(ctx, "temporal"))

	answered := map[string]reply{}
	for range n {
		res := <-results
		require.NoError(t, res.err)
		require.NotEmpty(t, res.r.Choices, "call %s has no choice", res.key)
		require.NotEmpty(t, res.r.Choices[0].Message.Content, "call %s has an empty answer", res.key)
		require.Equal(t, "completed", res.r.Resilience.Status, "call %s", res.key)
		require.Equal(t, "model", res.r.Resilience.Source, "call %s was not answered by a model: %v", res.key, decisions(res.r))
		answered[res.key] = res.r
		t.Logf("%s: %s, %s (retried at another front door %d times)", res.key, res.r.Resilience.Source, decisions(res.r), a.retried[res.key])
	}
	lost := 0
	for _, r := range answered {
		for _, d := range decisions(r) {
			if strings.Contains(d, ":worker_lost:") {
				lost++
			}
		}
	}
	require.Positive(t, lost, "no attempt was lost with the killed worker: the kill came too late to test anything")
	retried := 0
	for _, k := range a.retried {
		retried += k
	}
	require.Positive(t, retried, "no request was cut by the killed front door: the kill came too late to test anything")

	// Answered once: one workflow run per call, completed, and the
	// retried requests were answered by the same run as the first one.
	ids := map[string]bool{}
	for key, r := range answered {
		id := r.Resilience.WorkflowID
		require.NotEmpty(t, id, "call %s", key)
		require.False(t, ids[id], "two calls answered by one workflow %s", id)
		ids[id] = true
		eventuallyLists(t, ctx, tc, fmt.Sprintf("WorkflowId = %q", id), []string{id}) // one run, no second
		desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	}
	// Every call runs once more as a request with the same key: it is
	// answered by its recorded result, and no new run starts.
	again, err := a.ask(ctx, 1, "cluster-call-0", "[[sim tokens=400]] Tell me all about order 0.")
	require.NoError(t, err)
	require.Equal(t, answered["cluster-call-0"].Resilience.WorkflowID, again.Resilience.WorkflowID)
	require.Equal(t, answered["cluster-call-0"].Choices[0].Message.Content, again.Choices[0].Message.Content)
	eventuallyLists(t, ctx, tc, `WorkflowType = "LLMCall"`, slices.Collect(maps.Keys(ids)))

	// Shared guards: qwen-72b fails every request until a breaker opens;
	// the guard's view then holds it open for the fleet, and the next calls,
	// on whichever worker, skip the model without a request.
	for i := 0; ; i++ {
		require.Less(t, i, 12, "the breaker of qwen-72b never opened")
		r, err := a.ask(ctx, i%2, fmt.Sprintf("cluster-breaker-%d", i), fmt.Sprintf("[[sim fault=server_error model=qwen-72b times=always]] order %d?", i))
		require.NoError(t, err)
		if slices.Contains(decisions(r), "qwen-72b:breaker_open:switch_model") {
			break
		}
	}
	// The open period starts short (it grows only while trials fail, up to
	// half the outage so far): a view read after it ended sees the model
	// half-open, and one that ends within openAhead would end during the
	// calls below, so each look that does not find it open for that long
	// sends another failing call, a trial that fails and grows the period.
	// The looks do not wait for those calls' answers: a call whose trial
	// failed has spent its first request on the endpoint every model here
	// shares, and the retry budget, spent by the calls above, may keep it
	// waiting for its next one (rule budget) for up to the budget's window.
	var view guard.View
	const openAhead = 5 * time.Second
	looks := 0
	require.Eventually(t, func() bool {
		v, err := tc.QueryWorkflow(ctx, workflows.GuardID(workflows.TaskQueue), "", workflows.QueryGuardView, time.Now())
		if err != nil || v.Get(&view) != nil {
			return false
		}
		// Open long enough for the wait below and the four calls after it:
		// a period that ends in between would rightly let a trial out.
		if until, open := view.Open["qwen-72b"]; open && time.Until(until) > openAhead {
			return true
		}
		looks++
		go a.ask(ctx, looks%2, fmt.Sprintf("cluster-trial-%d", looks), fmt.Sprintf("[[sim fault=server_error model=qwen-72b times=always]] trial %d?", looks))
		return false
	}, 45*time.Second, 500*time.Millisecond, "the fleet's guard never held qwen-72b's breaker open")
	require.GreaterOrEqual(t, view.Workers, 2, "the guard counts %d worker(s)", view.Workers)
	// Each worker reads the fleet's view every 500 ms: three intervals
	// later every one of them holds the breaker open.
	time.Sleep(1500 * time.Millisecond)
	for i := range 4 {
		r, err := a.ask(ctx, i%2, fmt.Sprintf("cluster-open-%d", i), fmt.Sprintf("[[sim fault=server_error model=qwen-72b times=always]] parcel %d?", i))
		require.NoError(t, err)
		require.Contains(t, decisions(r), "qwen-72b:breaker_open:switch_model", "call %d did not honour the fleet's open breaker", i)
	}

	// The Web UI's visibility queries, on PostgreSQL.
	var limited []string
	for i := range 2 {
		r, err := a.ask(ctx, i, fmt.Sprintf("cluster-limited-%d", i), fmt.Sprintf("[[sim fault=rate_limited times=always]] invoice %d?", i))
		require.NoError(t, err)
		require.True(t, r.Resilience.Degraded, "a call every model refuses is answered by the fallback")
		limited = append(limited, r.Resilience.WorkflowID)
	}
	query := `LlmOutcome = "degraded" AND LlmClasses = "rate_limited"`
	eventuallyLists(t, ctx, tc, query, limited)
	count, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
	require.NoError(t, err)
	require.EqualValues(t, 2, count.GetCount())
}

// requireOwnMetrics: each of the cluster's front doors serves its own
// /metrics, at the address its start-up lines name (a door that cannot
// take its address runs without metrics and says "metrics: off").
func requireOwnMetrics(t *testing.T, c *cluster.Cluster, doors int) {
	t.Helper()
	said := regexp.MustCompile(`\bmetrics: (\S+);`)
	owner := map[string]string{}
	for i := range doors {
		name := fmt.Sprintf("frontdoor-%d", i+1)
		at := ""
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(c.LogPath(name))
			if m := said.FindSubmatch(b); m != nil {
				at = string(m[1])
			}
			return at != ""
		}, 10*time.Second, 50*time.Millisecond, "%s never said where its metrics are; its log ends:\n%s", name, logTail(c, name))
		require.NotEqual(t, "off", at, "%s runs without metrics; its log ends:\n%s", name, logTail(c, name))
		require.Equal(t, c.FrontDoorMetricsURL(i), at, "%s serves its metrics elsewhere than the cluster says", name)
		require.Empty(t, owner[at], "%s and %s name one metrics address, %s", owner[at], name, at)
		owner[at] = name
		resp, err := http.Get(at)
		require.NoError(t, err, "%s's metrics", name)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s's metrics at %s", name, at)
		require.Contains(t, string(body), "durable_llm_frontdoor_", "%s's metrics at %s are not a front door's", name, at)
		t.Logf("%s: metrics at %s", name, at)
	}
}

// waitForWorkers waits until n worker processes poll the task queue and
// returns their names by the pid each polls with.
func waitForWorkers(t *testing.T, ctx context.Context, tc client.Client, c *cluster.Cluster, n int) map[int]string {
	t.Helper()
	pids := map[int]string{}
	for _, name := range c.Names() {
		if strings.HasPrefix(name, "worker-") {
			pids[c.Pid(name)] = name
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := map[int]bool{}
		if d, err := tc.DescribeTaskQueue(ctx, workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY); err == nil {
			for _, p := range d.GetPollers() {
				if pid := identityPid(p.GetIdentity()); pids[pid] != "" {
					seen[pid] = true
				}
			}
		}
		if len(seen) == n {
			return pids
		}
		// A worker that exited will never poll: say why at once.
		for _, name := range pids {
			select {
			case <-c.Exited(name):
				t.Fatalf("%s exited before it polled %s; its log ends:\n%s", name, workflows.TaskQueue, logTail(c, name))
			default:
			}
		}
		if time.Now().After(deadline) {
			var tails []string
			for pid, name := range pids {
				if !seen[pid] {
					tails = append(tails, fmt.Sprintf("%s (pid %d) log ends:\n%s", name, pid, logTail(c, name)))
				}
			}
			t.Fatalf("%d of %d workers poll %s after 60 s:\n%s", len(seen), n, workflows.TaskQueue, strings.Join(tails, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logTail is the end of process name's log, for a failure message.
func logTail(c *cluster.Cluster, name string) string {
	b, err := os.ReadFile(c.LogPath(name))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// identityPid is the pid of an SDK worker identity ("pid@host@…").
func identityPid(identity string) int {
	pid, _ := strconv.Atoi(strings.SplitN(identity, "@", 2)[0])
	return pid
}

// busyWorker is the name of a worker that is running an attempt of a
// running call now ("" when none is).
func busyWorker(ctx context.Context, tc client.Client, pids map[int]string) string {
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowType = "LLMCall" AND ExecutionStatus = "Running"`})
	if err != nil {
		return ""
	}
	for _, e := range resp.GetExecutions() {
		d, err := tc.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), "")
		if err != nil {
			continue
		}
		for _, act := range d.GetPendingActivities() {
			if act.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				if name := pids[identityPid(act.GetLastWorkerIdentity())]; name != "" {
					return name
				}
			}
		}
	}
	return ""
}

// listIDs lists the IDs of the workflow runs query selects.
func listIDs(ctx context.Context, tc client.Client, query string) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ids, nil
		}
	}
}

// eventuallyLists waits until query lists exactly want (visibility is
// written after the run, within moments).
func eventuallyLists(t *testing.T, ctx context.Context, tc client.Client, query string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if got, err = listIDs(ctx, tc, query); err == nil {
			slices.Sort(got)
			if slices.Equal(got, want) {
				return
			}
		}
	}
	t.Fatalf("%s lists %v (error %v), want %v", query, got, err, want)
}

func decisions(r reply) []string {
	var d []string
	for _, at := range r.Resilience.Attempts {
		c := at.Class
		if c == "" {
			c = "ok"
		}
		d = append(d, at.Model+":"+c+":"+at.Decision)
	}
	return d
}
