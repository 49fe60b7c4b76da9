package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// HedgeOptions configure RunHedge.
type HedgeOptions struct {
	// Temporal is a client of the dev server (required).
	Temporal client.Client
	// Calls per contender; default 400.
	Calls int
	// Concurrency is the number of closed-loop callers; default 8.
	Concurrency int
	// Tokens of every answer; default 40.
	Tokens int
	// TailProbability of a first-model request being slow (default 0.1),
	// TailFactor how many times slower its time to first token (default 10).
	TailProbability float64
	TailFactor      float64
	// Budget is hedge.budget of the hedged contenders; default 0.1.
	Budget float64
	// Warmup calls per contender before the measured ones (the adaptive
	// delay learns from them); default 40.
	Warmup int
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per phase (cmd/bench); nil: none.
	Meter *progress.Display
}

// HedgeVariant is one contender of the hedge benchmark: the default policy
// with After as hedge.after ("off": not hedged).
type HedgeVariant struct {
	Name, After string
}

// HedgeVariants are the contenders, side by side: not hedged, hedged
// after the first model's p90 time to first token, hedged after a fixed
// delay.
var HedgeVariants = []HedgeVariant{
	{Name: "not hedged", After: config.HedgeOff},
	{Name: "hedged, after: adaptive", After: config.HedgeAdaptive},
	{Name: "hedged, after: 700ms", After: "700ms"},
}

// HedgeRow is one contender's calls.
type HedgeRow struct {
	Variant HedgeVariant
	// Latencies of the calls answered by a model.
	Latencies []time.Duration
	Calls     int
	Failed    int
	// Upstream is llmsim's count of chat requests; ByModel per model.
	Upstream int
	ByModel  map[string]int
	// Hedged calls started a hedge; HedgeWon were answered by it.
	Hedged, HedgeWon int
	Errors           []string
}

// HedgeReport is the hedge benchmark's result.
type HedgeReport struct {
	Options  HedgeOptions
	Scenario *llmsim.Scenario
	Rows     []HedgeRow
}

// HedgeScenario is llmsim's default models at their realistic speed
// (time to first token lognormal, median 300 ms; 40 tokens/s) where a
// fraction p of qwen-72b's requests waits factor times its usual time to
// first token: a slow tail.
func HedgeScenario(p, factor float64) *llmsim.Scenario {
	extra := time.Duration((factor - 1) * float64(300*time.Millisecond))
	return &llmsim.Scenario{Name: "slow-tail", Seed: 11, Models: llmsim.DefaultModels(), Phases: []llmsim.Phase{{
		Name: "slow tail",
		Faults: []llmsim.FaultSpec{{Kind: llmsim.FaultLatency, Model: "qwen-72b", Probability: p,
			Latency: llmsim.Fixed(extra)}},
	}}}
}

// RunHedge measures hedged calls against an upstream with a slow tail:
// the same closed-loop load of non-streamed calls for each contender, each
// with its own llmsim and in-process worker; latency percentiles and the
// upstream requests each made.
func RunHedge(ctx context.Context, o HedgeOptions) (*HedgeReport, error) {
	if o.Temporal == nil {
		return nil, fmt.Errorf("hedge: a Temporal client is required")
	}
	o.Calls, o.Concurrency, o.Tokens = orDefault(o.Calls, 400), orDefault(o.Concurrency, 8), orDefault(o.Tokens, 40)
	o.Warmup = orDefault(o.Warmup, 40)
	if o.TailProbability <= 0 {
		o.TailProbability = 0.1
	}
	if o.TailFactor <= 1 {
		o.TailFactor = 10
	}
	if o.Budget <= 0 {
		o.Budget = 0.1
	}
	progress := progressTo(o.Progress)
	rep := &HedgeReport{Options: o, Scenario: HedgeScenario(o.TailProbability, o.TailFactor)}
	for _, v := range HedgeVariants {
		row, err := runHedgeVariant(ctx, o, v, progress)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func runHedgeVariant(ctx context.Context, o HedgeOptions, v HedgeVariant, progress func(string, ...any)) (HedgeRow, error) {
	row := HedgeRow{Variant: v}
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: HedgeScenario(o.TailProbability, o.TailFactor)})
	if err != nil {
		return row, err
	}
	defer sim.Close()
	lc, _, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{Mutate: func(c *config.Config) {
		c.Hedge.After, c.Hedge.Model, c.Hedge.Budget = v.After, "llama-8b", o.Budget
	}})
	if err != nil {
		return row, err
	}
	defer stop()

	run := randomID()
	// Warm-up: the adaptive delay learns from the first model's first
	// tokens; not measured.
	warm := o.Warmup
	progress("hedge: %s — %d warm-up calls, then %d calls from %d callers", v.Name, warm, o.Calls, o.Concurrency)
	call := func(ctx context.Context, i int) (workflows.CallResult, error) {
		req := DurableRequest(run, i, 30*time.Second)
		req.Messages[len(req.Messages)-1].Content = StreamQuestion(i, o.Tokens)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return lc.Call(cctx, req)
	}
	if err := closedLoopN(ctx, o.Concurrency, 0, warm, func(ctx context.Context, i int) error {
		_, err := call(ctx, i)
		return err
	}); err != nil {
		return row, fmt.Errorf("hedge: %s: warm-up: %w", v.Name, err)
	}
	before := sim.Stats()
	step := o.Meter.Phase("hedge: "+v.Name, o.Calls)
	defer step.Done()
	var hedged, won atomic.Int64
	var lat = make([]time.Duration, o.Calls)
	var failed = make([]error, o.Calls)
	_ = closedLoopN(ctx, o.Concurrency, warm, o.Calls, func(ctx context.Context, i int) error {
		began := time.Now()
		res, err := call(ctx, i)
		k := i - warm
		lat[k] = time.Since(began)
		step.Add(1)
		if err == nil && res.Source != workflows.SourceModel && res.Source != workflows.SourceFallbackModel {
			err = fmt.Errorf("answered from %s: %s", res.Source, res.Reason)
		}
		failed[k] = err
		for _, a := range res.Attempts {
			if a.Hedge && a.Decision != "skip" {
				hedged.Add(1)
				if a.Decision == "answer" {
					won.Add(1)
				}
			}
		}
		return nil
	})
	after := sim.Stats()
	row.Calls = o.Calls
	for k, err := range failed {
		if err != nil {
			row.Failed++
			if len(row.Errors) < 3 {
				row.Errors = append(row.Errors, err.Error())
			}
			continue
		}
		row.Latencies = append(row.Latencies, lat[k])
	}
	row.Upstream = after.Totals.Arrivals - before.Totals.Arrivals
	row.ByModel = map[string]int{}
	for m, c := range after.Models {
		row.ByModel[m] = c.Arrivals - before.Models[m].Arrivals
	}
	row.Hedged, row.HedgeWon = int(hedged.Load()), int(won.Load())
	return row, ctx.Err()
}

// closedLoopN runs calls first … first+n-1 from workers callers, each
// taking the next call when its last one ends; the first error stops it.
func closedLoopN(ctx context.Context, workers, first, n int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	next.Store(int64(first))
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= first+n || ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
				if err := fn(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var firstErr error
	for range workers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// Header returns the report's header.
func (r *HedgeReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	return Header{Title: "Hedged calls — a slow tail, hedged and not", Command: command, Machine: m, Date: date, Params: []string{
		fmt.Sprintf("upstream: llmsim's default models (time to first token lognormal, median 300 ms; 40 tokens/s), answers of %d tokens; %.0f %% of qwen-72b's requests have a %.0f× time to first token (%s more), seeded", o.Tokens, o.TailProbability*100, o.TailFactor, fmtDur(time.Duration((o.TailFactor-1)*float64(300*time.Millisecond)))),
		fmt.Sprintf("load: %d non-streamed calls per contender from %d closed-loop callers, after %d warm-up calls (the adaptive delay learns from them); each contender has its own llmsim and in-process worker (default policy) on one dev server", o.Calls, o.Concurrency, o.Warmup),
		fmt.Sprintf("hedged contenders: hedge.model llama-8b, hedge.budget %.0f %%, hedge.initial 2 s", o.Budget*100),
		"latency: from the start of the call to its result, calls answered by a model; upstream requests counted by llmsim",
	}}
}

// Table returns the hedge table.
func (r *HedgeReport) Table() Table {
	t := Table{Columns: []string{"policy", "p50", "p95", "p99", "max", "p99 ÷ not hedged", "upstream requests per call", "extra requests", "hedged calls", "won by the hedge", "failed"}}
	base := r.Rows[0]
	for _, row := range r.Rows {
		p99 := Percentile(row.Latencies, 0.99)
		ratio := ""
		if b := Percentile(base.Latencies, 0.99); b > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(p99)/float64(b))
		}
		t.Rows = append(t.Rows, []string{row.Variant.Name,
			fmtDur(Percentile(row.Latencies, 0.5)), fmtDur(Percentile(row.Latencies, 0.95)), fmtDur(p99), fmtDur(Percentile(row.Latencies, 1)),
			ratio, fmt.Sprintf("%.3f", float64(row.Upstream)/float64(row.Calls)), pct(row.extra(base) * 100),
			fmt.Sprint(row.Hedged), fmt.Sprint(row.HedgeWon), fmt.Sprint(row.Failed)})
	}
	return t
}

// extra is the share of upstream requests row made beyond base's.
func (row HedgeRow) extra(base HedgeRow) float64 {
	if base.Upstream == 0 {
		return 0
	}
	return float64(row.Upstream)/float64(base.Upstream)*float64(base.Calls)/float64(row.Calls) - 1
}

// Targets checks the target for each hedged contender.
func (r *HedgeReport) Targets() []string {
	base := r.Rows[0]
	bp99 := Percentile(base.Latencies, 0.99)
	var out []string
	for _, row := range r.Rows[1:] {
		down := 1 - float64(Percentile(row.Latencies, 0.99))/float64(bp99)
		extra := row.extra(base)
		verdict := "MISSED"
		if down >= 0.4 && extra <= 0.1 {
			verdict = "met"
		}
		out = append(out, fmt.Sprintf("%s: p99 down ≥ 40 %% for ≤ 10 %% more requests: p99 down %s for %s more requests — %s", row.Variant.Name, pct(down*100), pct(extra*100), verdict))
	}
	return out
}

// Markdown renders the report.
func (r *HedgeReport) Markdown(h Header) string {
	b := reportHead(h, r.Table(), r.Targets())
	for _, row := range r.Rows {
		models := make([]string, 0, len(row.ByModel))
		for _, m := range sortedKeys(row.ByModel) {
			models = append(models, fmt.Sprintf("%s %d", m, row.ByModel[m]))
		}
		fmt.Fprintf(b, "\n- %s: upstream requests by model: %s", row.Variant.Name, strings.Join(models, ", "))
		if row.Failed > 0 {
			fmt.Fprintf(b, "; %d calls not answered by a model, e.g. %s", row.Failed, strings.Join(row.Errors, "; "))
		}
	}
	b.WriteString("\n")
	return b.String()
}
