package frontdoor_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestStreamHundredAtOnce: 100 streamed calls at once through one front
// door and one worker, the tenant's limits lifted. Every caller gets its
// whole answer once and in order: the chunks add up to the call's content
// (and to what the model generated), and each chunk's id counts exactly
// the bytes sent before it plus its own, so no chunk was repeated, lost or
// moved.
func TestStreamHundredAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	d := newDoor(t, func(o *frontdoor.Options) {
		tenants, err := frontdoor.ParseTenantsFile([]byte(
			"defaults: {requests_per_minute: 0, tokens_per_minute: 0, max_in_flight: 0, validation_ms_per_minute: 0}\n"+
				"tenants: [{name: acme, tokens: ["+tokAcme+"]}]\n"), "test tenants")
		require.NoError(t, err)
		o.Tenants = tenants
	})
	ctx := rig.Context(t, 2*time.Minute)
	const calls, tokens = 100, 80
	run := uuid.NewString()[:8] // -count=N reuses the dev server
	type got struct {
		id, question, text string
		chunks             int
		err                error
	}
	results := make([]got, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			q := fmt.Sprintf("[[sim tokens=%d]] Tell me about order %d.", tokens, i)
			results[i] = got{question: q}
			results[i].id, results[i].text, results[i].chunks, results[i].err = streamOnce(ctx, d, streamBody(fmt.Sprintf("u-many-%d", i), q), "many-"+run+"-"+strconv.Itoa(i))
		})
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.err, "call %d", i)
		require.Equal(t, request.ScopedKey("acme", "many-"+run+"-"+strconv.Itoa(i)), r.id)
		res := d.result(ctx, r.id)
		require.Equal(t, res.Content, r.text, "call %d: the chunks add up to the content, each once, in order", i)
		require.Equal(t, llmsim.AnswerTokens("qwen-72b", r.question, tokens), r.text, "call %d", i)
		require.Greater(t, r.chunks, 10, "call %d: the text came in many chunks, as generated", i)
	}
	d.requireSubscriptionsClosed()
}

// streamOnce sends one streamed request with an idempotency key and reads
// it to its end; an error says what was wrong (safe off the test's
// goroutine). Each content chunk's id is OFFSET:BYTES, BYTES the text sent
// so far: it must grow by exactly the chunk's length.
func streamOnce(ctx context.Context, d *door, body, key string) (id, text string, chunks int, err error) {
	resp, err := d.sendStream(ctx, body, map[string]string{"Idempotency-Key": key})
	if err != nil {
		return "", "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var b strings.Builder
	var bad error
	ended := false
	serr := scanSSE(resp.Body, func(e sseEvent) bool {
		if e.Data == "[DONE]" {
			ended = true
			return false
		}
		c, cerr := chunkContent(e.Data)
		if cerr != nil {
			bad = cerr
			return false
		}
		if c == "" {
			return true
		}
		b.WriteString(c)
		chunks++
		if _, n, ok := strings.Cut(e.ID, ":"); !ok || n != strconv.Itoa(b.Len()) {
			bad = fmt.Errorf("chunk %d: id %q after %d bytes", chunks, e.ID, b.Len())
			return false
		}
		return true
	})
	if bad == nil {
		bad = serr
	}
	if bad == nil && !ended {
		bad = fmt.Errorf("the stream ended without [DONE] after %d bytes", b.Len())
	}
	return resp.Header.Get("X-Workflow-Id"), b.String(), chunks, bad
}
