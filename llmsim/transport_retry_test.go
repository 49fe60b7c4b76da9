package llmsim_test

import (
	"context"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

// TestTransportResendsIdempotentRequestAfterReset documents a trap for
// classifiers: net/http silently resends a request that carries an
// Idempotency-Key when a reused keep-alive connection is reset, so one
// client call becomes two upstream attempts and a single reset is never
// seen by the caller. Without the header the reset surfaces.
func TestTransportResendsIdempotentRequestAfterReset(t *testing.T) {
	srv := start(t, llmsim.Options{})
	ctx := context.Background()
	for _, withKey := range []bool{true, false} {
		var headers []string
		key := "noidem"
		if withKey {
			key = "idem"
			headers = []string{"Idempotency-Key", key + "/1"}
		}
		srv.ResetStats()
		cl, _ := goClient(srv, 5*time.Second, headers...)
		// Warm a keep-alive connection, then reset it once.
		if _, err := cl.CreateChatCompletion(ctx, ask("qwen-14b", "warm "+key)); err != nil {
			t.Fatal(err)
		}
		_, err := cl.CreateChatCompletion(ctx, ask("qwen-72b", "reset once "+key+" [[sim fault=reset times=1]]"))
		attempts := srv.Stats().Models["qwen-72b"].Arrivals
		if withKey && (err != nil || attempts != 2) {
			t.Errorf("with Idempotency-Key: err %v, %d upstream attempts; want a silent resend (nil, 2)", err, attempts)
		}
		if !withKey && (err == nil || attempts != 1) {
			t.Errorf("without Idempotency-Key: err %v, %d upstream attempts; want the reset (error, 1)", err, attempts)
		}
	}
}
