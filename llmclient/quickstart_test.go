package llmclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// workerOnCallsQueue runs a worker against llmsim on workflows.TaskQueue
// (llm-calls), the queue README's first calls use; no other test of this
// package polls it.
func workerOnCallsQueue(t *testing.T) client.Client {
	t.Helper()
	return rig.New(t, rig.Options{Shared: &shared, TaskQueue: workflows.TaskQueue}).Client
}

// TestQuickStartGo runs README's first call from Go as README shows it.
// README's block dials the address of make run (the "connect:" line
// below); the test dials its own dev server instead and runs the rest as
// written. The docs package's TestQuickStartIsWhatTheTestsRun checks that
// README's block is these lines.
func TestQuickStartGo(t *testing.T) {
	dev := workerOnCallsQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// quick start: go
	// connect: c, _ := client.Dial(client.Options{})           // or envconfig.LoadDefaultClientOptions()
	c := dev
	lc := &llmclient.Client{Temporal: c}
	res, err := lc.Call(ctx, workflows.CallRequest{
		UserID: "u-42", SessionID: "s-7", Scenario: "customer_service",
		Messages: []workflows.Message{{Role: "user", Content: "Where is my order?"}},
	})
	fmt.Println(res.Content, res.Source, res.Degraded)
	// end quick start

	require.NoError(t, err)
	require.Equal(t, "model", string(res.Source), res.Reason)
	require.False(t, res.Degraded)
	require.Contains(t, res.Content, "Where is my order?")
}

// anySDKInput is README's JSON input for a call started from any Temporal
// SDK, as README shows it.
const anySDKInput = `
{"user_id":"u-42","session_id":"s-7","scenario":"customer_service","model":"",
 "messages":[{"role":"system","content":"…"},{"role":"user","content":"…"}],
 "max_tokens":512,"temperature":0.7,"deadline_ms":60000}
`

// TestQuickStartAnySDK starts LLMCall the way README tells any Temporal
// SDK to: by its type name on llm-calls, with a workflow ID of the
// caller's choice, an execution timeout of the deadline plus a margin and
// README's JSON as the input, and reads the result as JSON.
func TestQuickStartAnySDK(t *testing.T) {
	c := workerOnCallsQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "quickstart-" + uuid.NewString(), TaskQueue: "llm-calls",
		WorkflowExecutionTimeout: 60*time.Second + time.Minute,
	}, "LLMCall", json.RawMessage(anySDKInput))
	require.NoError(t, err)
	var res map[string]any
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, "model", res["source"], res["reason"])
	require.NotEmpty(t, res["content"])
	require.Equal(t, false, res["degraded"])
	for _, k := range []string{"model", "usage", "attempts"} {
		require.Contains(t, res, k)
	}
}
