package frontdoor_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestCancelCutsTheUpstreamRequestWithTypeScriptClient: the official
// OpenAI JavaScript client (testdata/openai-ts/cancel.mjs) creates a
// background response whose answer streams for about 30 s upstream, and
// cancels it 1.5 s later. Cancel exists to stop the spend: the upstream
// must see its request cut (the client gone before the answer ended)
// within 2 s of the cancel, whatever the response's status says. So it
// is for a response created with stream: true (its text served live by
// the worker), for one cancelled while its request waits for a first
// token, and for a chat completion that is not streamed (Prefer:
// respond-async, cancelled with DELETE /v1/calls/{id}), hedged or not,
// each cancelled between two of the attempt's heartbeats as they were
// spaced before (every 3.3 s, the SDK's every 5 s): with a hedge racing
// its first attempt, the call's workflow ends without waiting for them,
// and both requests are cut.
func TestCancelCutsTheUpstreamRequestWithTypeScriptClient(t *testing.T) {
	node, dir := requireTS(t, "the OpenAI JavaScript client", "openai")
	var mu sync.Mutex
	ended := map[string][]llmsim.Record{} // by conversation: the upstream's record of each request, once it ended
	sim := llmsim.Options{OnRequest: func(r llmsim.Record) {
		mu.Lock()
		ended[r.Conversation] = append(ended[r.Conversation], r)
		mu.Unlock()
	}}
	d := newDoorOn(t, rig.Options{Sim: sim}, nil)
	// Hedged: llama-8b answers the same question 500 ms into qwen-72b's wait.
	hedged := newDoorOn(t, rig.Options{Sim: sim, Policy: func(c *config.Config) {
		c.Hedge.After, c.Hedge.Model, c.Hedge.Budget = "500ms", "llama-8b", 1
	}}, nil)
	ctx := rig.Context(t, 3*time.Minute)
	// 1,200 tokens at qwen-72b's 40 tokens/s: 30 s of answer.
	const long = "[[sim tokens=1200]] Tell me everything about my order, slowly."
	for _, c := range []struct {
		name, question, mode string
		delay                time.Duration
		door                 *door
		requests             int
	}{
		{"background", long, "plain", 1500 * time.Millisecond, d, 1},
		{"background streamed", long, "stream", 1500 * time.Millisecond, d, 1},
		{"waiting for its first token", "[[sim fault=latency latency=20s tokens=1200]] Where is my parcel, slowly?", "plain", 4 * time.Second, d, 1},
		{"chat completion not streamed", long, "chat", 4 * time.Second, d, 1},
		{"chat completion hedged", "[[sim fault=latency latency=40s model=qwen-72b tokens=1200]] Where is my refund, slowly?", "chat", 4500 * time.Millisecond, hedged, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.door
			var wid string
			var cancelAt time.Time
			if c.mode == "chat" {
				wid, cancelAt = cancelChatCall(t, d, c.question, c.delay)
			} else {
				out := runTS(t, ctx, node, dir, nil, "cancel.mjs", d.ts.URL+"/v1", tokAcme, "u-ts-cancel-"+c.mode,
					c.question+" ("+c.name+")", c.mode, strconv.Itoa(int(c.delay.Milliseconds())))
				var got struct {
					ID           string `json:"id"`
					CancelStatus string `json:"cancel_status"`
					CancelSentMS int64  `json:"cancel_sent_ms"`
				}
				require.NoError(t, json.Unmarshal(out, &got), string(out))
				require.Equal(t, "cancelled", got.CancelStatus)
				wid, cancelAt = strings.TrimPrefix(got.ID, "resp_"), time.UnixMilli(got.CancelSentMS)
			}

			var recs []llmsim.Record
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				recs = append(recs[:0], ended[wid]...)
				return len(recs) == c.requests
			}, time.Until(cancelAt.Add(10*time.Second)), 20*time.Millisecond,
				"of the %d upstream requests of %s, %d ended in the 10 s after the cancel: nothing cut the others", c.requests, wid, len(recs))
			gens := d.Sim.Generations(wid)
			require.Len(t, gens, c.requests, "llmsim's generations of %s", wid)
			for _, g := range gens {
				var rec llmsim.Record
				for _, r := range recs {
					if r.Attempt == g.Attempt {
						rec = r
					}
				}
				cut := rec.Time.Add(rec.Duration)
				t.Logf("%s request %d (%s): ran %v (outcome %s, end %s, %d of %d tokens sent); cancel to cut %v", wid, g.Attempt, g.Model,
					rec.Duration.Round(time.Millisecond), rec.Outcome, g.End, g.SentTokens, g.CompletionTokens, cut.Sub(cancelAt).Round(time.Millisecond))
				require.Equal(t, llmsim.EndClientGone, g.End, "request %d answered to its end: it was not cut", g.Attempt)
				require.Less(t, g.SentTokens, g.CompletionTokens)
				require.LessOrEqual(t, cut.Sub(cancelAt), 2*time.Second, "request %d was cut %v after the cancel", g.Attempt, cut.Sub(cancelAt))
			}
			require.Equal(t, c.requests, d.Upstream(wid).Attempts, "the cancelled call sent another request")
		})
	}
}

// cancelChatCall starts a chat completion that is not streamed (Prefer:
// respond-async) and cancels it with DELETE /v1/calls/{id} delay later; it
// returns the call's ID and when the cancel was sent.
func cancelChatCall(t *testing.T, d *door, question string, delay time.Duration) (string, time.Time) {
	t.Helper()
	do := func(method, path, body string) *http.Response {
		req, err := http.NewRequest(method, d.ts.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tokAcme)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "respond-async")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	body, err := json.Marshal(map[string]any{"model": "auto", "user": "u-cancel-chat",
		"messages": []map[string]string{{"role": "user", "content": question + " (chat)"}}})
	require.NoError(t, err)
	started := time.Now()
	resp := do(http.MethodPost, "/v1/chat/completions", string(body))
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var call struct{ ID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&call))
	time.Sleep(time.Until(started.Add(delay)))
	cancelAt := time.Now()
	resp = do(http.MethodDelete, "/v1/calls/"+call.ID, "")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	return call.ID, cancelAt
}
