package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/request"
)

// TestServeRefusesPredictableIDsBeyondLoopback: without LLM_ID_SECRET the
// front door refuses to listen where other machines reach it (its
// workflow IDs would be plain SHA-256 of the requests), naming the
// variable, before it dials anything.
func TestServeRefusesPredictableIDsBeyondLoopback(t *testing.T) {
	t.Setenv(request.EnvIDSecret, "")
	t.Setenv("TEMPORAL_ADDRESS", closedAddr(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"serve", "--addr", "0.0.0.0:0"}, &out)
	require.ErrorContains(t, err, "LLM_ID_SECRET is not set")
	require.ErrorContains(t, err, "0.0.0.0:0")
	require.Empty(t, out.String(), "nothing listened")
}
