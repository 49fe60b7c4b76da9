package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
)

// StreamEventsOptions configure RunStreamEvents.
type StreamEventsOptions struct {
	// Temporal is a client of the dev server; required.
	Temporal client.Client
	// Intervals are the stream.batch_interval values to measure; default
	// 200, 350 and 500 ms.
	Intervals []time.Duration
	// Calls is the number of calls per setting, run at once; default 3.
	Calls int
	// Tokens is the length of every answer; default 500.
	Tokens int
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per phase (cmd/bench); nil: none.
	Meter *progress.Display
}

// StreamEventsRow is one setting's calls.
type StreamEventsRow struct {
	// Interval is the policy's stream.batch_interval; 0 for the calls
	// that did not ask to stream.
	Interval time.Duration
	// Stream reports stream: true; Subscriber a caller following the call
	// with llmclient.Stream (else it only waits for the result).
	Stream, Subscriber bool
	// Calls are the calls' history profiles; Generation their upstream
	// generation time (llmsim's time to first token + tokens × inter-token
	// latency), in the same order.
	Calls      []HistoryProfile
	Generation []time.Duration
	Failed     int
	Errors     []string
}

// StreamEventsReport is the history-events benchmark's result.
type StreamEventsReport struct {
	Options StreamEventsOptions
	Rows    []StreamEventsRow
}

// RunStreamEvents counts the history events of streamed calls of Tokens
// tokens (GetWorkflowHistory) per second of upstream generation, at each
// stream.batch_interval, with and without a subscriber, plus the same call
// not streamed for reference. Each setting gets its own in-process worker
// and llmsim (default models at their realistic speed); its Calls calls
// run at once.
func RunStreamEvents(ctx context.Context, o StreamEventsOptions) (*StreamEventsReport, error) {
	if len(o.Intervals) == 0 {
		o.Intervals = []time.Duration{200 * time.Millisecond, 350 * time.Millisecond, 500 * time.Millisecond}
	}
	if o.Calls <= 0 {
		o.Calls = 3
	}
	if o.Tokens <= 0 {
		o.Tokens = 500
	}
	progress := progressTo(o.Progress)
	rep := &StreamEventsReport{Options: o}
	type setting struct {
		interval           time.Duration
		stream, subscriber bool
	}
	sets := []setting{{interval: o.Intervals[0]}}
	for _, iv := range o.Intervals {
		sets = append(sets, setting{iv, true, false}, setting{iv, true, true})
	}
	for _, s := range sets {
		row := StreamEventsRow{Stream: s.stream, Subscriber: s.subscriber}
		if s.stream {
			row.Interval = s.interval
		}
		progress("stream events: %s", row.label())
		if err := runEventsSetting(ctx, o, s.interval, &row); err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

func runEventsSetting(ctx context.Context, o StreamEventsOptions, interval time.Duration, row *StreamEventsRow) error {
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: StreamScenario()})
	if err != nil {
		return err
	}
	defer sim.Close()
	cfg := config.DefaultConfig()
	cfg.Stream.BatchInterval = config.Duration(interval)
	lc, _, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{Config: cfg})
	if err != nil {
		return err
	}
	defer stop()
	ids := make([]string, o.Calls)
	errs := make([]error, o.Calls)
	step := o.Meter.Phase("stream events: "+row.label(), o.Calls)
	defer step.Done()
	var wg sync.WaitGroup
	for i := range o.Calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer step.Add(1)
			req := StreamRequest(lc.TaskQueue, i, o.Tokens, 2*time.Minute)
			// The text on the call's stream (stream_deltas), whose cost
			// the batch interval sets; live text costs no event per batch
			// (RunStreamScale).
			req.Stream, req.StreamDeltas = row.Stream, row.Stream
			ids[i], _ = llmclient.Key(req)
			cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			if row.Subscriber {
				_, errs[i] = lc.Stream(cctx, req, func(llmclient.StreamItem) error { return nil })
				return
			}
			_, errs[i] = lc.Call(cctx, req)
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil {
			row.Failed++
			if len(row.Errors) < 3 {
				row.Errors = append(row.Errors, errs[i].Error())
			}
			continue
		}
		p, err := historyProfile(ctx, o.Temporal, id, id)
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		var gen time.Duration
		for _, g := range sim.Generations(id) {
			gen += g.Service.D()
		}
		row.Calls = append(row.Calls, p)
		row.Generation = append(row.Generation, gen)
	}
	return ctx.Err()
}

func (r StreamEventsRow) label() string {
	switch {
	case !r.Stream:
		return "not streamed (reference)"
	case r.Subscriber:
		return fmt.Sprintf("streamed, batch_interval %s, with a subscriber", fmtDur(r.Interval))
	}
	return fmt.Sprintf("streamed, batch_interval %s, no subscriber", fmtDur(r.Interval))
}

// eventsStats are a row's means per call.
type eventsStats struct {
	events, signals, tasks, updates, bytes float64
	gen                                    time.Duration
	perSecond                              float64
}

func (r StreamEventsRow) stats() eventsStats {
	var s eventsStats
	n := float64(len(r.Calls))
	if n == 0 {
		return s
	}
	var gen time.Duration
	for i, p := range r.Calls {
		s.events += float64(p.Events)
		s.signals += float64(p.ByType["WorkflowExecutionSignaled"])
		s.tasks += float64(p.WorkflowTasks)
		s.updates += float64(p.ByType["WorkflowExecutionUpdateAccepted"])
		s.bytes += float64(p.Bytes)
		gen += r.Generation[i]
	}
	s.gen = gen / time.Duration(len(r.Calls))
	if gen > 0 {
		s.perSecond = s.events / gen.Seconds()
	}
	s.events, s.signals, s.tasks, s.updates, s.bytes = s.events/n, s.signals/n, s.tasks/n, s.updates/n, s.bytes/n
	return s
}

// PerSecond returns the mean history events per second of generation of
// the streamed row with this interval and subscriber, false if none.
func (r *StreamEventsReport) PerSecond(interval time.Duration, subscriber bool) (float64, bool) {
	for _, row := range r.Rows {
		if row.Stream && row.Interval == interval && row.Subscriber == subscriber && len(row.Calls) > 0 {
			return row.stats().perSecond, true
		}
	}
	return 0, false
}

// Header returns the report's header.
func (r *StreamEventsReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	return Header{Title: fmt.Sprintf("History events of a streamed call — a %d-token answer", o.Tokens), Command: command, Machine: m, Date: date, Params: []string{
		fmt.Sprintf("upstream: llmsim's default models at their default speed (time to first token about 300 ms, then %d tokens/s)", llmsim.DefaultTokensPerSecond),
		fmt.Sprintf("per setting: an in-process llmworker with the default policy but stream.batch_interval, a fresh llmsim, %d calls at once; streamed calls ask for stream_deltas (the text on the call's workflow stream, for Workflow Streams subscribers: the path whose cost the interval sets; the default live text costs no event per batch, see stream-scale.md)", o.Calls),
		"subscriber: the caller follows the call with llmclient.Stream (long-poll updates); without, it starts the call and waits for the result (the call still publishes its deltas)",
		"events: the whole workflow history (GetWorkflowHistory), per call; generation: llmsim's schedule for the call's request (time to first token + tokens × inter-token latency)",
	}}
}

// Table returns the events table.
func (r *StreamEventsReport) Table() Table {
	t := Table{Columns: []string{"call", "history events", "signals (delta batches)", "workflow tasks", "updates (polls)", "history bytes", "generation", "events / s of generation", "failed"}}
	for _, row := range r.Rows {
		s := row.stats()
		t.Rows = append(t.Rows, []string{row.label(), fmt.Sprintf("%.0f", s.events), fmt.Sprintf("%.0f", s.signals), fmt.Sprintf("%.0f", s.tasks),
			fmt.Sprintf("%.0f", s.updates), fmt.Sprintf("%.0f", s.bytes), fmtDur(s.gen), fmt.Sprintf("%.1f", s.perSecond), fmt.Sprint(row.Failed)})
	}
	return t
}

// Targets checks the events target of every streamed row.
func (r *StreamEventsReport) Targets() []string {
	var out []string
	for _, row := range r.Rows {
		if !row.Stream {
			continue
		}
		s := row.stats()
		v := "met"
		if len(row.Calls) == 0 || s.perSecond >= 25 || row.Failed > 0 {
			v = "MISSED"
		}
		out = append(out, fmt.Sprintf("%s: %.1f events per second of generation (target < 25) — %s", row.label(), s.perSecond, v))
	}
	return out
}

// Markdown renders the report.
func (r *StreamEventsReport) Markdown(h Header) string {
	b := reportHead(h, r.Table(), r.Targets())
	b.WriteString("\nEvent types per call (the first call of each setting):\n\n")
	for _, row := range r.Rows {
		if len(row.Calls) > 0 {
			b.WriteString("- " + row.label() + ": " + row.Calls[0].ByTypeString() + "\n")
		}
	}
	for _, row := range r.Rows {
		if row.Failed > 0 {
			fmt.Fprintf(b, "\n%s: %d calls failed, e.g. %s\n", row.label(), row.Failed, strings.Join(row.Errors, "; "))
		}
	}
	return b.String()
}
