package bench

import (
	"context"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestRefinerBenchmarkIntegration runs the context refiner benchmark and
// prints its tables: continue bills fewer completion tokens than
// bump_tokens in every case, and about as many tokens in all at most
// (fewer where bump_tokens needs more attempts), with every answer whole; the summary keeps the planted fact where plain pruning loses it,
// and the session's second call reuses the summary.
func TestRefinerBenchmarkIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunRefiner(ctx, RefinerOptions{Temporal: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Markdown())
	bump := map[TruncationCase]TruncationRow{}
	for _, r := range rep.Truncations {
		if r.Action == config.ActionBumpTokens {
			bump[r.Case] = r
			continue
		}
		if !r.Complete {
			t.Errorf("continue %+v: the answer is not the whole answer (%v)", r.Case, r.Decisions)
		}
		// The prefix a continuation sends back is prompt: billed about
		// the same where both need two attempts, less where bump_tokens
		// needs more.
		b := bump[r.Case]
		if r.Completion >= b.Completion || float64(r.Billed()) > 1.02*float64(b.Billed()) || r.Attempts > b.Attempts {
			t.Errorf("%+v: continue %d attempts, billed %d (completion %d); bump_tokens %d, %d (%d)",
				r.Case, r.Attempts, r.Billed(), r.Completion, b.Attempts, b.Billed(), b.Completion)
		}
	}
	plain, summarized := rep.Summaries[0], rep.Summaries[1]
	if plain.Recalled || plain.SecondRecalled || !summarized.Recalled || !summarized.SecondRecalled {
		t.Errorf("fact recalled: plain pruning %v (second call %v), summarized %v (second call %v)",
			plain.Recalled, plain.SecondRecalled, summarized.Recalled, summarized.SecondRecalled)
	}
	if summarized.SecondCallSummaries != 0 || summarized.Summary == 0 {
		t.Errorf("summary requests: first call cost %d tokens, second call made %d", summarized.Summary, summarized.SecondCallSummaries)
	}
}
