package llmworker

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/workflows"
)

// GuardLink carries one worker's guard.Sync to the fleet's guard workflow
// and back (docs/how-it-works.md "Shared guards"): every interval it
// signals the report that is due, if any (signal-with-start, so the first
// worker starts the guard), and reads the fleet's view from the guard's
// memo with DescribeWorkflowExecution, which the server answers from the
// workflow's state: no workflow task, no history event, nothing that
// queues behind the guard's work. When the guard cannot be reached, the
// view goes stale and each guard decides from what this worker saw: a call
// never waits for the fleet.
type GuardLink struct {
	c        client.Client
	dc       converter.DataConverter
	sync     *guard.Sync
	id       string
	tq       string
	input    workflows.GuardInput
	interval time.Duration
	logger   *slog.Logger

	reports, reads atomic.Int64
}

// GuardLinkOptions build a GuardLink.
type GuardLinkOptions struct {
	// TaskQueue of the workers whose guards are shared.
	TaskQueue string
	// Input starts the guard when this worker is the first to report.
	Input workflows.GuardInput
	// Interval between two syncs; default 500 ms.
	Interval time.Duration
	// DataConverter of the client, to read the guard's memo (it may be
	// encrypted); default the SDK's.
	DataConverter converter.DataConverter
	// Logger of the link's own messages; default slog.Default().
	Logger *slog.Logger
}

// NewGuardLink links s to the guard of o.TaskQueue through c.
func NewGuardLink(c client.Client, s *guard.Sync, o GuardLinkOptions) *GuardLink {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.DataConverter == nil {
		o.DataConverter = converter.GetDefaultDataConverter()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	id := workflows.GuardID(o.TaskQueue)
	return &GuardLink{c: c, dc: o.DataConverter, sync: s, id: id, tq: o.TaskQueue, input: o.Input, interval: o.Interval,
		logger: o.Logger.With("component", "guard-sync", "guard", id)}
}

// Run syncs until ctx ends: every interval it sends the report that is
// due, if any, and it reads the fleet's view every
// guard.ReadEvery(workers, interval), so that a fleet's reads stay
// bounded whatever its size. It logs once when the guard cannot be
// reached and once when it can again.
func (l *GuardLink) Run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	failing := false
	var readAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		read := time.Since(readAt) >= guard.ReadEvery(l.sync.Workers(), l.interval)-l.interval/2
		err := l.reportAndRead(ctx, read)
		if read && err == nil {
			readAt = time.Now() // a failed read is tried again at the next tick
		}
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			l.logger.Warn("the fleet's guard cannot be reached; this worker's guards decide alone until it can", "error", err)
			failing = true
		case err == nil && failing:
			l.logger.Info("the fleet's guard is reachable again")
			failing = false
		}
	}
}

// Once sends the report that is due, if any, then reads the fleet's view.
func (l *GuardLink) Once(ctx context.Context) error {
	return l.reportAndRead(ctx, true)
}

// reportAndRead sends the report that is due, if any, then reads the fleet's view
// when read.
func (l *GuardLink) reportAndRead(ctx context.Context, read bool) error {
	ctx, cancel := context.WithTimeout(ctx, max(l.interval*2, 5*time.Second))
	defer cancel()
	if r, ok := l.sync.Cut(); ok {
		if err := l.send(ctx, r); err != nil {
			return err
		}
	}
	if !read {
		return nil
	}
	return l.Read(ctx)
}

// send signals r, starting the guard if need be; a report that cannot be
// sent goes out again, unchanged, with the next.
func (l *GuardLink) send(ctx context.Context, r guard.Report) error {
	_, err := l.c.SignalWithStartWorkflow(ctx, l.id, workflows.SignalGuardReport, r,
		client.StartWorkflowOptions{ID: l.id, TaskQueue: l.tq}, workflows.GuardWorkflowName, l.input)
	if err != nil {
		l.sync.Unsent(r)
		return err
	}
	l.reports.Add(1)
	return nil
}

// Read reads the fleet's view from the guard's memo. A guard not started
// yet, or one that has not published a view (a run of an older build,
// which continues as new on this one after its reports), is an empty
// view: this worker then announces itself, starting the guard if need
// be, and decides alone.
func (l *GuardLink) Read(ctx context.Context) error {
	asked := time.Now()
	d, err := l.c.DescribeWorkflowExecution(ctx, l.id, "")
	l.reads.Add(1)
	if err != nil {
		if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) {
			l.sync.SetView(guard.View{}, asked)
			return nil
		}
		return err
	}
	p := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.GuardMemo]
	if p == nil {
		l.sync.SetView(guard.View{}, asked)
		return nil
	}
	var v guard.View
	if err := l.dc.FromPayload(p, &v); err != nil {
		return err
	}
	l.sync.SetView(v, asked)
	return nil
}

// Leave tells the guard this worker stops (it is no longer counted in the
// fleet, whose other workers take its share of the floor), with what its
// guards saw last.
func (l *GuardLink) Leave(ctx context.Context) error {
	return l.send(ctx, l.sync.Leave(time.Now()))
}

// Sent is how many reports the link delivered; Reads how many times it
// read the view.
func (l *GuardLink) Sent() int64  { return l.reports.Load() }
func (l *GuardLink) Reads() int64 { return l.reads.Load() }
