package frontdoor_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// overSpent is a spend meter by which every tenant spent 5 today.
type overSpent struct{}

func (overSpent) Spent(string, time.Time) float64 { return 5 }

// tokenOf is the bearer token of tenant in the tests' tokens.
func tokenOf(t *testing.T, tenant string) string {
	t.Helper()
	for _, e := range strings.Split(tokens, ",") {
		if tok, name, ok := strings.Cut(strings.TrimSpace(e), "="); ok && name == tenant {
			return tok
		}
	}
	t.Fatalf("no token of %s in %q", tenant, tokens)
	return ""
}

// TestSpendCapIs429: a call of a tenant at its daily spend cap is
// answered 429 with an OpenAI-shaped error (code spend_cap) that says so,
// and a Retry-After of the time left to midnight UTC, when its calls are
// admitted again; no upstream request is made.
func TestSpendCapIs429(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	d := newDoorOn(t, rig.Options{
		QueuePrefix: "frontdoor-spend-",
		Policy: func(p *config.Config) {
			for i := range p.Models {
				p.Models[i].InputPrice, p.Models[i].OutputPrice = 1, 2
			}
			p.Spend.DailyCap = 1
		},
		Worker: func(o *llmworker.Options) { o.Spend = overSpent{} },
	}, nil)

	body := `{"model":"auto","messages":[{"role":"user","content":"Where is my order?"}]}`
	req, err := http.NewRequestWithContext(rig.Context(t, 2*time.Minute), http.MethodPost, d.ts.URL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokenOf(t, "acme"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Message, Code string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%+v", e)
	require.Equal(t, "spend_cap", e.Error.Code)
	require.Contains(t, e.Error.Message, `tenant "acme" has spent 5.0000 today, its daily cap is 1.0000`)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	now := time.Now().UTC()
	toMidnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now)
	require.InDelta(t, toMidnight.Seconds(), float64(secs), 5, "Retry-After is the time to midnight UTC")
	require.Zero(t, d.Sim.Stats().Totals.Arrivals, "a call over the cap reached the upstream")
}
