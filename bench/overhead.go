package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/durable-llm/durable-llm/llmsim"
)

// OverheadOptions configure RunOverhead.
type OverheadOptions struct {
	// Temporal is a client of the dev server; required.
	Temporal client.Client
	// Calls is the number of sequential calls per contender at concurrency
	// 1; default 150.
	Calls int
	// Concurrency is the number of closed-loop callers of the throughput
	// run; default 30.
	Concurrency int
	// Window is the length of each contender's throughput run, split in four
	// rounds that alternate with the other contenders'; default 12 s.
	Window time.Duration
	// Durable configures the durable-llm contender (its Deadline is
	// ignored).
	Durable DurableOptions
	// ServerPID is the dev server's process (DevServerPID), whose CPU time
	// each contender's throughput rounds are charged; 0: not measured.
	ServerPID int
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per phase (cmd/bench); nil: none.
	Meter *progress.Display
}

// OverheadRow is one contender's overhead numbers.
type OverheadRow struct {
	Name, About string
	// P50 and P99 are latencies at concurrency 1.
	P50, P99 time.Duration
	// Throughput is calls answered per second at the options' concurrency;
	// LoadedP50 the median latency then.
	Throughput float64
	LoadedP50  time.Duration
	LoadedMax  time.Duration
	// ServerCPU is the dev server's CPU time over the throughput rounds,
	// per call answered in them (0: not measured).
	ServerCPU time.Duration
	// Failed counts calls that did not answer; Errors keeps the first few
	// errors.
	Failed int
	Errors []string
}

func (row *OverheadRow) fail(o Outcome) {
	row.Failed++
	if len(row.Errors) < 3 {
		e := "no answer"
		if o.Err != nil {
			e = o.Err.Error()
		}
		row.Errors = append(row.Errors, fmt.Sprintf("after %s: %s", fmtDur(o.Latency), e))
	}
}

// HistoryProfile is what one call costs in Temporal history.
type HistoryProfile struct {
	Workflow        string
	Events          int
	WorkflowTasks   int
	LocalActivities int
	Activities      int
	Upserts         int
	Bytes           int
	// ByType counts every event type.
	ByType map[string]int
}

// OverheadReport is the overhead benchmark's result.
type OverheadReport struct {
	Options  OverheadOptions
	Rows     []OverheadRow
	Profiles []HistoryProfile
	// Steps are where the sequential calls' milliseconds went, the floor's
	// and durable-llm's, from their histories.
	Steps []StepProfile
}

// rounds is the number of alternating throughput rounds per contender.
const rounds = 4

// RunOverhead measures calls against a zero-latency llmsim: a direct
// go-openai call, the bare one-activity workflow (Temporal's floor on this
// machine) and durable-llm, on the same dev server. Latency is measured at
// concurrency 1 with the contenders' calls interleaved (so background load
// hits them alike), throughput with closed-loop callers in alternating
// rounds.
func RunOverhead(ctx context.Context, o OverheadOptions) (*OverheadReport, error) {
	if o.Calls <= 0 {
		o.Calls = 150
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 30
	}
	if o.Window <= 0 {
		o.Window = 12 * time.Second
	}
	// Instant models: llmsim generates at a realistic speed by default,
	// and this benchmark measures everything but the upstream.
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{Name: "instant", Models: llmsim.InstantModels()}})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	direct := NewDirect(sim.BaseURL)
	defer direct.Close()
	floor, err := NewFloor(o.Temporal, sim.BaseURL)
	if err != nil {
		return nil, err
	}
	defer floor.Close()
	o.Durable.Deadline = 0
	durable, err := NewDurable(o.Temporal, sim.BaseURL, o.Durable)
	if err != nil {
		return nil, err
	}
	defer durable.Close()
	door, err := NewDurableDoor(o.Temporal, sim.BaseURL, o.Durable)
	if err != nil {
		return nil, err
	}
	defer door.Close()
	eo := o.Durable
	eo.EagerStart = true
	eager, err := NewDurableDoor(o.Temporal, sim.BaseURL, eo)
	if err != nil {
		return nil, err
	}
	defer eager.Close()
	cons := []*Contender{direct, floor, durable, door, eager}
	progress := progressTo(o.Progress)

	// Distinct call numbers per phase, so no idempotency key repeats.
	next := 0
	take := func(n int) int { b := next; next += n; return b }

	progress("overhead: warm-up")
	base := take(20)
	for i := 0; i < 20; i++ {
		for _, c := range cons {
			c.Call(ctx, base+i)
		}
	}
	rep := &OverheadReport{Options: o, Rows: make([]OverheadRow, len(cons))}
	progress("overhead: %d sequential calls per contender, interleaved", o.Calls)
	lat := make([][]time.Duration, len(cons))
	keys := make([]string, len(cons))
	ids := make([][]string, len(cons))
	base = take(o.Calls)
	step := o.Meter.Phase("overhead: sequential calls", o.Calls*len(cons))
	for i := 0; i < o.Calls; i++ {
		for k, c := range cons {
			t := time.Now()
			r := c.Call(ctx, base+i)
			lat[k] = append(lat[k], time.Since(t))
			step.Add(1)
			keys[k] = r.Key
			ids[k] = append(ids[k], r.Key)
			if r.Err != nil || !r.Answered {
				rep.Rows[k].fail(Outcome{Result: r, Latency: lat[k][len(lat[k])-1]})
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	step.Done()
	for k, c := range cons {
		rep.Rows[k].Name, rep.Rows[k].About = c.Name, c.About
		rep.Rows[k].P50, rep.Rows[k].P99 = Percentile(lat[k], 0.5), Percentile(lat[k], 0.99)
	}
	progress("overhead: throughput with %d callers, %d rounds of %s per contender", o.Concurrency, rounds, fmtDur(o.Window/rounds))
	answered := make([]int, len(cons))
	loaded := make([][]time.Duration, len(cons))
	cpu := make([]time.Duration, len(cons))
	cpuOK := o.ServerPID > 0
	for round := 0; round < rounds; round++ {
		for k, c := range cons {
			b := take(1_000_000)
			win := o.Window / rounds
			cpu0, err0 := procCPU(o.ServerPID)
			outs := ClosedLoop(ctx, o.Concurrency, win, func(ctx context.Context, i int) Result { return c.Call(ctx, b+i) })
			cpu1, err1 := procCPU(o.ServerPID)
			cpuOK = cpuOK && err0 == nil && err1 == nil
			cpu[k] += cpu1 - cpu0
			for _, out := range outs {
				switch {
				case !out.Answered:
					rep.Rows[k].fail(out)
				case out.Start+out.Latency <= win:
					answered[k]++ // finished within the window
				}
			}
			loaded[k] = append(loaded[k], Latencies(outs)...)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	for k := range cons {
		rep.Rows[k].Throughput = float64(answered[k]) / o.Window.Seconds()
		rep.Rows[k].LoadedP50 = Percentile(loaded[k], 0.5)
		rep.Rows[k].LoadedMax = Percentile(loaded[k], 1)
		if cpuOK && answered[k] > 0 {
			rep.Rows[k].ServerCPU = cpu[k] / time.Duration(answered[k])
		}
	}
	progress("overhead: history of one call each")
	for k, c := range cons[1:] {
		if p, err := historyProfile(ctx, o.Temporal, c.Name, keys[k+1]); err == nil {
			rep.Profiles = append(rep.Profiles, p)
		} else {
			progress("overhead: history of %s: %v", keys[k+1], err)
		}
	}
	progress("overhead: where the sequential calls' time went, from their histories")
	for k, c := range cons[1:] {
		if p, err := stepProfile(ctx, o.Temporal, c.Name, ids[k+1], lat[k+1], stepCalls); err == nil {
			rep.Steps = append(rep.Steps, p)
		} else {
			progress("overhead: steps of %s: %v", c.Name, err)
		}
	}
	return rep, nil
}

// stepCalls bounds the histories read for the step breakdown.
const stepCalls = 100

// historyProfile counts what the workflow with this ID wrote to history.
func historyProfile(ctx context.Context, c client.Client, name, id string) (HistoryProfile, error) {
	p := HistoryProfile{Workflow: name, ByType: map[string]int{}}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return p, err
		}
		p.Events++
		p.Bytes += proto.Size(ev)
		t := ev.GetEventType()
		p.ByType[strings.TrimPrefix(t.String(), "EVENT_TYPE_")]++
		switch t {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			p.WorkflowTasks++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			p.LocalActivities++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			p.Activities++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			p.Upserts++
		}
	}
	return p, nil
}

// ByTypeString lists the event types by count.
func (p HistoryProfile) ByTypeString() string {
	keys := make([]string, 0, len(p.ByType))
	for k := range p.ByType {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", strings.ToLower(k), p.ByType[k])
	}
	return strings.Join(parts, ", ")
}

// row returns the row of the named contender.
func (r *OverheadReport) row(name string) *OverheadRow {
	for i := range r.Rows {
		if r.Rows[i].Name == name {
			return &r.Rows[i]
		}
	}
	return nil
}

// Ratios returns durable-llm's p50 latency and throughput as multiples of
// the floor's.
func (r *OverheadReport) Ratios() (p50, throughput float64) {
	f, d := r.row(NameFloor), r.row(NameDurable)
	if f == nil || d == nil || f.P50 == 0 || f.Throughput == 0 {
		return 0, 0
	}
	return float64(d.P50) / float64(f.P50), d.Throughput / f.Throughput
}

// Header returns the report's header.
func (r *OverheadReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	return Header{Title: "Overhead — durable-llm vs Temporal's floor vs a direct call", Command: command, Machine: m, Date: date, Params: []string{
		"upstream: llmsim with zero latency and unlimited capacity (every call answers at once)",
		fmt.Sprintf("latency: %d sequential calls per contender at concurrency 1, the contenders' calls interleaved", o.Calls),
		fmt.Sprintf("throughput: %d closed-loop callers, %d rounds of %s per contender alternating with the others; calls answered within the rounds per second", o.Concurrency, rounds, fmtDur(o.Window/rounds)),
		"floor: a bare workflow with one activity making the same go-openai call, on the same dev server and the same kind of worker (SDK defaults)",
		"durable-llm: LLMCall via llmclient on an in-process llmworker with the default policy",
	}}
}

// Table returns the overhead table.
func (r *OverheadReport) Table() Table {
	t := Table{Columns: []string{"contender", "p50 (c=1)", "p99 (c=1)", "p50 ÷ floor", "p99 ÷ floor",
		fmt.Sprintf("throughput (c=%d)", r.Options.Concurrency), "÷ floor", fmt.Sprintf("p50 (c=%d)", r.Options.Concurrency), fmt.Sprintf("max (c=%d)", r.Options.Concurrency),
		"server CPU per call", "failed"}}
	f := r.row(NameFloor)
	for _, row := range r.Rows {
		rp50, rp99, rtp := "", "", ""
		if f != nil && f.P50 > 0 && f.Throughput > 0 {
			rp50 = fmt.Sprintf("%.2f×", float64(row.P50)/float64(f.P50))
			rp99 = fmt.Sprintf("%.2f×", float64(row.P99)/float64(f.P99))
			rtp = fmt.Sprintf("%.2f×", row.Throughput/f.Throughput)
		}
		t.Rows = append(t.Rows, []string{row.Name, fmtDur(row.P50), fmtDur(row.P99), rp50, rp99,
			fmt.Sprintf("%.1f/s", row.Throughput), rtp, fmtDur(row.LoadedP50), fmtDur(row.LoadedMax), cpuPerCall(row.ServerCPU), fmt.Sprint(row.Failed)})
	}
	return t
}

// ProfileTable returns what one call of each workflow costs in history.
func (r *OverheadReport) ProfileTable() Table {
	t := Table{Columns: []string{"workflow (one call)", "history events", "workflow tasks", "local activities", "activities", "search-attribute upserts", "history bytes"}}
	for _, p := range r.Profiles {
		t.Rows = append(t.Rows, []string{p.Workflow, fmt.Sprint(p.Events), fmt.Sprint(p.WorkflowTasks), fmt.Sprint(p.LocalActivities),
			fmt.Sprint(p.Activities), fmt.Sprint(p.Upserts), fmt.Sprint(p.Bytes)})
	}
	return t
}

// Targets checks the overhead targets.
func (r *OverheadReport) Targets() []string {
	p50, tp := r.Ratios()
	v := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	out := []string{
		fmt.Sprintf("durable-llm p50 latency ≤ 1.15× the floor: %.2f× — %s", p50, v(p50 > 0 && p50 <= 1.15)),
		fmt.Sprintf("durable-llm throughput ≥ 0.85× the floor: %.2f× — %s", tp, v(tp >= 0.85)),
	}
	for _, name := range []string{NameDurableDoor, NameDurableDoorEager} {
		if d, f := r.row(NameDirect), r.row(name); d != nil && f != nil && f.P50 > 0 {
			added := f.P50 - d.P50
			out = append(out, fmt.Sprintf("added latency at p50 through the front door (%s), one call at a time, over a direct request ≤ 30 ms: %s — %s",
				name, fmtDur(added), v(added <= 30*time.Millisecond)))
		}
	}
	return out
}

// cpuPerCall writes a server CPU time per call for the table: empty when
// not measured.
func cpuPerCall(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmtDur(d)
}

// Markdown renders the report.
func (r *OverheadReport) Markdown(h Header, notes []string) string {
	b := reportHead(h, r.Table(), r.Targets())
	if len(r.Profiles) > 0 {
		b.WriteString("\nWhat one call costs in Temporal history (a call answered at the first attempt):\n\n" + r.ProfileTable().Markdown() + "\n")
		for _, p := range r.Profiles {
			b.WriteString("- " + p.Workflow + ": " + p.ByTypeString() + "\n")
		}
	}
	if len(r.Steps) > 0 {
		b.WriteString("\nWhere a call's milliseconds go, one call at a time: each step's median over the sequential calls " +
			"answered at one attempt, from the event times of their histories (the server's clock) and the caller's latency " +
			"(outside the history: the start request and the result's way back to the caller, the latency less the history's " +
			"start to close):\n\n" + r.StepTable().Markdown() + "\n")
	}
	for _, row := range r.Rows {
		if row.Failed > 0 {
			fmt.Fprintf(b, "\n%s: %d calls failed, e.g. %s\n", row.Name, row.Failed, strings.Join(row.Errors, "; "))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString(n + "\n")
		}
	}
	return b.String()
}
