package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestStreamHarness runs the streaming benchmark on the direct call alone
// (no Temporal server): short answers arrive token by token, the report
// and the chart are written.
func TestStreamHarness(t *testing.T) {
	rep, err := RunStream(context.Background(), StreamOptions{Contenders: []string{KeyStreamDirect}, Calls: 3, Tokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || len(rep.Rows[0].Calls) != 3 {
		t.Fatalf("rows %+v, want the direct call's 3 calls", rep.Rows)
	}
	for i, c := range rep.Rows[0].Calls {
		if c.Err != nil || c.Pieces != 12 || c.TTFT <= 0 || c.Last < c.TTFT || c.Total < c.Last || c.Upstream <= 0 {
			t.Errorf("call %d: %+v, want 12 pieces, TTFT ≤ last ≤ total and llmsim's schedule", i, c)
		}
		// llmsim streams 12 tokens 25 ms apart after its time to first
		// token: the direct call sees them as they come.
		if gen := c.Last - c.TTFT; gen < 200*time.Millisecond {
			t.Errorf("call %d: first to last token in %s, want the upstream's pace (11 × 25 ms)", i, gen)
		}
	}
	chart := filepath.Join(t.TempDir(), "stream.png")
	if err := WriteStreamChart(chart, rep); err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown(rep.Header("go test", ThisMachine(), time.Now()), "stream.png")
	for _, want := range []string{"| direct go-openai stream", "TTFT p50", "llmsim's own time to first token"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestStreamBenchmarksIntegration runs the streaming latency and history
// events benchmarks in miniature against the dev server: every contender
// answers, the durable paths deliver the text in batches, and a streamed
// call writes more history than one that is not.
func TestStreamBenchmarksIntegration(t *testing.T) {
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunStream(ctx, StreamOptions{Temporal: srv.Client(), Calls: 2, Tokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(StreamContenders) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(StreamContenders))
	}
	for _, row := range rep.Rows {
		for i, c := range row.Calls {
			if c.Err != nil || c.TTFT <= 0 || c.Arrivals == 0 {
				t.Errorf("%s call %d: %+v", row.Name, i, c)
			}
		}
	}
	for _, name := range []string{NameStreamClient, NameStreamFrontDoor, NameStreamFrontDoorEager} {
		if _, _, ok := rep.TTFTOverhead(name); !ok {
			t.Errorf("no TTFT overhead for %s", name)
		}
	}
	ev, err := RunStreamEvents(ctx, StreamEventsOptions{Temporal: srv.Client(), Intervals: []time.Duration{200 * time.Millisecond}, Calls: 1, Tokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Rows) != 3 {
		t.Fatalf("%d rows, want the reference and 2 streamed", len(ev.Rows))
	}
	plain, streamed := ev.Rows[0].stats(), ev.Rows[1].stats()
	if plain.events == 0 || streamed.signals == 0 || streamed.events <= plain.events || streamed.perSecond <= 0 {
		t.Errorf("not streamed %+v, streamed %+v: want signals and more events when streamed", plain, streamed)
	}
	if md := ev.Markdown(ev.Header("go test", ThisMachine(), time.Now())); !strings.Contains(md, "events per second of generation") {
		t.Errorf("report lacks its targets:\n%s", md)
	}
}
