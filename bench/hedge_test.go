package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestHedgeBenchmarkIntegration runs the hedge benchmark in miniature with
// half of the first model's requests slow: the unhedged policy never
// hedges and has the slow tail, the fixed-delay policy hedges and cuts it.
func TestHedgeBenchmarkIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunHedge(ctx, HedgeOptions{Temporal: srv.Client(), Calls: 16, Warmup: 4, Concurrency: 4, Tokens: 20, TailProbability: 0.5, Budget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(HedgeVariants) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(HedgeVariants))
	}
	plain, fixed := rep.Rows[0], rep.Rows[2]
	if plain.Hedged != 0 || plain.Failed != 0 || plain.ByModel["llama-8b"] != 0 {
		t.Errorf("not hedged: %+v", plain)
	}
	if fixed.Hedged == 0 || fixed.HedgeWon == 0 || fixed.Failed != 0 || fixed.ByModel["llama-8b"] != fixed.Hedged {
		t.Errorf("hedged after 700 ms: %+v", fixed)
	}
	if p, f := Percentile(plain.Latencies, 0.9), Percentile(fixed.Latencies, 0.9); f >= p {
		t.Errorf("p90 hedged %s, not hedged %s: the hedge did not cut the tail", f, p)
	}
	md := rep.Markdown(rep.Header("go test", ThisMachine(), time.Now()))
	for _, want := range []string{"| not hedged", "p99 ÷ not hedged", "p99 down ≥ 40 %"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
