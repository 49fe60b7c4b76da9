package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestIntegrationAskUsesTheDeploymentIDSecret: with LLM_ID_SECRET set, ask
// starts its call under the keyed workflow ID the front door and every
// other client of the deployment compute, never the plain SHA-256 one
// anyone can; its call has an execution timeout (deadline plus margin);
// a secret too short to be safe is refused before anything is dialled.
func TestIntegrationAskUsesTheDeploymentIDSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	srv, _ := askStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const secret = "the deployment's secret, 32 bytes"
	t.Setenv(request.EnvIDSecret, secret)

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"ask", "--json", "--user", "u-ids", "--deadline", "20s", "--system", "", "Where is parcel 12?"}, &out))
	var res workflows.CallResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	req := workflows.CallRequest{UserID: "u-ids", SessionID: "s-demo", Scenario: "customer_service", DeadlineMS: 20000,
		Messages: []request.Message{{Role: request.RoleUser, Content: "Where is parcel 12?"}}}
	ids, err := request.NewIDs([]byte(secret))
	require.NoError(t, err)
	require.Equal(t, ids.For(req), res.RequestID)
	require.NotEqual(t, request.KeyFor(req), res.RequestID)

	desc, err := srv.Client().DescribeWorkflowExecution(ctx, res.RequestID, "")
	require.NoError(t, err)
	require.Equal(t, 80*time.Second, desc.GetExecutionConfig().GetWorkflowExecutionTimeout().AsDuration(),
		"the 20 s deadline plus the 60 s margin")

	t.Setenv(request.EnvIDSecret, "short")
	err = run(ctx, []string{"ask", "Where is parcel 12?"}, &out)
	require.ErrorContains(t, err, request.EnvIDSecret)
	require.NotContains(t, err.Error(), "short")
}
