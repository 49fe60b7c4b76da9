package agent_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/examples/agent"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
)

// updateGolden re-records testdata/agent-tools.json from the integration
// test's run: go test ./examples/agent -run TestIntegrationAgent -update-golden
var updateGolden = flag.Bool("update-golden", false, "record testdata/agent-tools.json from the integration run")

const goldenFile = "testdata/agent-tools.json"

var shared testenv.Shared

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

var orders = map[string]agent.Order{"12": {Status: "shipped", Carrier: "DHL", Tracking: "DHL-0012"}}

// startCallsWorker starts llmsim and a durable-llm worker (the default
// policy against it) on a task queue of its own, both stopped when the
// test ends.
func startCallsWorker(t *testing.T, c client.Client) (*llmsim.Server, string) {
	t.Helper()
	s := rig.New(t, rig.Options{Client: c})
	return s.Sim, s.TaskQueue
}

// A tool-using conversation runs to its final answer on a real dev server,
// durable-llm worker and llmsim: one model call asks for lookup_order,
// the tool runs as an activity, the second model call answers from its
// result. llmsim sees exactly one request per turn. The run's history then
// replays against this build, and fails to replay against an agent that
// skips the tool.
func TestIntegrationAgent(t *testing.T) {
	srv := shared.Server(t)
	c := srv.Client()
	sim, callsQueue := startCallsWorker(t, c)

	agentQueue := "agent-test-" + uuid.NewString()[:8]
	aw := worker.New(c, agentQueue, worker.Options{})
	agent.Register(aw, c, &agent.Tools{Orders: orders})
	require.NoError(t, aw.Start())
	t.Cleanup(aw.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := "agent-example-" + uuid.NewString()[:8]
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: agentQueue}, agent.WorkflowName,
		agent.Input{UserID: "u-42", SessionID: "s-7", Question: "Where is my order 12?", CallsQueue: callsQueue})
	require.NoError(t, err)
	var out agent.Output
	require.NoError(t, run.Get(ctx, &out))

	require.Equal(t, []string{agent.ToolLookupOrder}, out.Tools)
	require.Contains(t, out.Answer, "lookup_order says order 12 is shipped with DHL, tracking DHL-0012", "answered from the tool's result")
	require.Len(t, out.Calls, 2, "two turns: the tool call, the answer")
	st := sim.Stats()
	require.Equal(t, 2, st.Totals.Arrivals, "one model request per turn")
	for _, call := range out.Calls {
		require.True(t, strings.HasPrefix(call, id+"/llm-"), "the call %s is scoped by its agent", call)
		require.Equal(t, 1, st.Conversations[call].Attempts, "call %s", call)
	}

	h, err := replay.Fetch(ctx, c, id, run.GetRunID())
	require.NoError(t, err)
	require.NoError(t, replayAgent(h, agent.Agent))
	err = replayAgent(h, skipsTools)
	require.Error(t, err, "a changed agent must not replay the recorded history")
	require.True(t, replay.IsNonDeterminism(err), "%v", err)

	if *updateGolden {
		data, err := replay.Marshal(h)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenFile), 0o755))
		require.NoError(t, os.WriteFile(goldenFile, data, 0o644))
		t.Logf("recorded %s (%d events)", goldenFile, len(h.GetEvents()))
	}
}

// The committed history of a tool-using conversation replays against this
// build: a change to the agent or to llmworkflow.Call that would break
// running agents fails here, without a server.
func TestReplayGolden(t *testing.T) {
	h, err := replay.LoadFile(goldenFile)
	require.NoError(t, err, "record it: go test ./examples/agent -run TestIntegrationAgent -update-golden")
	require.NoError(t, replayAgent(h, agent.Agent))
}

// replayAgent replays h against wf registered as the agent, under the
// recorded agent's workflow ID (the calls' IDs derive from it).
func replayAgent(h *historypb.History, wf func(workflow.Context, agent.Input) (agent.Output, error)) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: agent.WorkflowName})
	id, err := agentID(h)
	if err != nil {
		return err
	}
	return r.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), h,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}})
}

// agentID is the recorded agent's workflow ID: its calls' IDs up to their
// last '/'.
func agentID(h *historypb.History) (string, error) {
	for _, e := range h.GetEvents() {
		if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			if i := strings.LastIndex(a.GetWorkflowId(), "/"); i > 0 {
				return a.GetWorkflowId()[:i], nil
			}
		}
	}
	return "", fmt.Errorf("the history starts no LLM call")
}

// blockAfter is the first code block in lang of the Markdown file path
// after heading: the code a doc shows, for a test to compare with its own.
func blockAfter(t *testing.T, path, heading, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), heading)
	require.True(t, ok, "%s has the section %q", path, heading)
	_, block, ok := strings.Cut(section, "```"+lang+"\n")
	require.True(t, ok, "%s's section %q has a %s block", path, heading, lang)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok, "%s's %s block ends", path, lang)
	return block
}

// skipsTools is the agent changed so that it answers without tools: its
// first call's request differs, so its call's ID does too.
func skipsTools(ctx workflow.Context, in agent.Input) (agent.Output, error) {
	in.Question = "Answer without tools: " + in.Question
	return agent.Agent(ctx, in)
}

// docs/calling.md's "From a Temporal workflow (Go)" shows the agent's loop
// as this package has it.
func TestDocsShowTheLoop(t *testing.T) {
	block := blockAfter(t, "../../docs/calling.md", "## From a Temporal workflow (Go)\n", "go")
	src, err := os.ReadFile("agent.go")
	require.NoError(t, err)
	indented := "\t" + strings.ReplaceAll(strings.TrimSuffix(block, "\n"), "\n", "\n\t")
	indented = strings.ReplaceAll(indented, "\n\t\n", "\n\n")
	require.Contains(t, string(src), indented, "docs/calling.md's loop is agent.go's")
}
