package workflowstreams_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// StreamInput drives StreamWorkflow.
type StreamInput struct {
	// Tokens is how many items PublishTokens publishes on "tokens".
	Tokens int
	// LiveFirst items wait, each, until every subscriber of the test's
	// liveGate has received it before the next one is published.
	LiveFirst int
	// Every is the pause between the other items.
	Every time.Duration
	// Extra items of other types, published by the activity on "extra".
	Extra bool
	// Linger is passed to Drain.
	Linger time.Duration
}

// StreamWorkflow hosts a stream: it publishes "started" on "status", runs
// PublishTokens (which publishes through the Go publisher), publishes
// "done", drains and returns the stream's offset.
func StreamWorkflow(ctx workflow.Context, in StreamInput) (string, error) {
	stream, err := workflowstreams.NewWorkflowStream(ctx, nil)
	if err != nil {
		return "", err
	}
	status := stream.Topic("status")
	if err := status.Publish("started"); err != nil {
		return "", err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	if err := workflow.ExecuteActivity(actx, PublishTokens, in).Get(ctx, nil); err != nil {
		return "", err
	}
	if err := status.Publish("done"); err != nil {
		return "", err
	}
	if err := stream.Drain(ctx, in.Linger); err != nil {
		return "", err
	}
	return fmt.Sprintf("published %d", stream.Offset()), nil
}

// ExtraValue is the struct item of the "extra" topic.
type ExtraValue struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	Ratio float64 `json:"ratio"`
}

// PublishTokens publishes tok-000 … through a Client made from the activity.
func PublishTokens(ctx context.Context, in StreamInput) error {
	c, err := workflowstreams.NewClientFromActivity(ctx, workflowstreams.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx) }()
	gate := gateFor(activity.GetInfo(ctx).WorkflowExecution.ID)
	tokens := c.Topic("tokens")
	for i := range in.Tokens {
		v := fmt.Sprintf("tok-%03d", i)
		tokens.Publish(v, false)
		if i < in.LiveFirst {
			if err := gate.wait(ctx, v); err != nil {
				return err
			}
		} else if in.Every > 0 {
			time.Sleep(in.Every)
		}
	}
	if in.Extra {
		extra := c.Topic("extra")
		extra.Publish(ExtraValue{Name: "ünïcødé ✓", Count: 3, Ratio: 0.25}, false)
		extra.Publish(42, false)
		extra.Publish([]byte{0, 1, 2, 250}, false)
		extra.Publish(map[string]any{"nested": []any{"a", 1.5, true, nil}}, false)
	}
	return c.Close(ctx)
}

// liveGate lets PublishTokens wait until the test's subscribers have
// received an item: the item reached them while the activity still runs.
type liveGate struct {
	mu   sync.Mutex
	subs []string
	seen map[string]map[string]bool // subscriber → values received
	ch   chan struct{}              // closed and replaced on every change
}

var gates sync.Map // workflow id → *liveGate

func newGate(workflowID string, subscribers ...string) *liveGate {
	g := &liveGate{subs: subscribers, seen: map[string]map[string]bool{}, ch: make(chan struct{})}
	for _, s := range subscribers {
		g.seen[s] = map[string]bool{}
	}
	gates.Store(workflowID, g)
	return g
}

func gateFor(workflowID string) *liveGate {
	if g, ok := gates.Load(workflowID); ok {
		return g.(*liveGate)
	}
	return &liveGate{seen: map[string]map[string]bool{}, ch: make(chan struct{})}
}

func (g *liveGate) saw(subscriber, value string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen[subscriber][value] = true
	close(g.ch)
	g.ch = make(chan struct{})
}

func (g *liveGate) wait(ctx context.Context, value string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		g.mu.Lock()
		all := true
		for _, s := range g.subs {
			all = all && g.seen[s][value]
		}
		ch := g.ch
		g.mu.Unlock()
		if all {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("subscribers did not receive %q live: %w", value, ctx.Err())
		}
	}
}

// connect returns the shared dev server, its client and a context that
// ends with the test (or after timeout).
func connect(t *testing.T, timeout time.Duration) (*testsuite.DevServer, client.Client, context.Context) {
	t.Helper()
	srv := shared.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return srv, srv.Client(), ctx
}

// setup is connect and startWorker: it returns the worker's task queue too.
func setup(t *testing.T, timeout time.Duration) (*testsuite.DevServer, client.Client, string, context.Context) {
	t.Helper()
	srv, c, ctx := connect(t, timeout)
	return srv, c, startWorker(t, c), ctx
}

// startWorkflow starts the workflow wf with the id id on the task queue tq.
func startWorkflow(t *testing.T, ctx context.Context, c client.Client, tq, id string, wf any, args ...any) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, wf, args...)
	require.NoError(t, err)
	return run
}

// finish sends the "finish" signal (HostWorkflow, OrderWorkflow) and waits
// for the workflow to complete.
func finish(t *testing.T, ctx context.Context, c client.Client, id string) {
	t.Helper()
	require.NoError(t, c.SignalWorkflow(ctx, id, "", "finish", nil))
	require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, nil))
}

// startWorker runs a worker for StreamWorkflow and HostWorkflow on a fresh
// task queue until the test ends.
func startWorker(t *testing.T, c client.Client) string {
	t.Helper()
	tq := "workflowstreams-" + uuid.NewString()
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflow(StreamWorkflow)
	w.RegisterWorkflow(HostWorkflow)
	w.RegisterWorkflow(ChainWorkflow)
	w.RegisterActivity(PublishTokens)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return tq
}

// HostWorkflow only hosts a stream, until the "finish" signal.
func HostWorkflow(ctx workflow.Context) error {
	if _, err := workflowstreams.NewWorkflowStream(ctx, nil); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return nil
}

// received is one item as a subscriber saw it.
type received struct {
	Offset int64
	Topic  string
	Value  string
}

func decodeString(t *testing.T, it workflowstreams.WorkflowStreamItem) string {
	t.Helper()
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(it.Data, &s); err != nil {
		return string(it.Data.GetData()) // not a string: its JSON
	}
	return s
}

// subscribeAll runs a Go subscriber until the stream ends, telling gate
// (if any) what it receives.
func subscribeAll(t *testing.T, ctx context.Context, c client.Client, workflowID string, opts workflowstreams.SubscribeOptions, gate *liveGate, name string) ([]received, []workflowstreams.WorkflowStreamItem, error) {
	var out []received
	var raw []workflowstreams.WorkflowStreamItem
	sc := workflowstreams.NewClient(c, workflowID, workflowstreams.Options{})
	for it, err := range sc.Subscribe(ctx, opts) {
		if err != nil {
			return out, raw, err
		}
		v := decodeString(t, it)
		out = append(out, received{Offset: it.Offset, Topic: it.Topic, Value: v})
		raw = append(raw, it)
		if gate != nil {
			gate.saw(name, v)
		}
	}
	return out, raw, nil
}

// subscription is what subscribeAll returned.
type subscription struct {
	items []received
	raw   []workflowstreams.WorkflowStreamItem
	err   error
}

// subscribeInBackground runs subscribeAll in a goroutine; its result comes
// on the channel.
func subscribeInBackground(t *testing.T, ctx context.Context, c client.Client, workflowID string, opts workflowstreams.SubscribeOptions, gate *liveGate, name string) <-chan subscription {
	done := make(chan subscription, 1)
	go func() {
		items, raw, err := subscribeAll(t, ctx, c, workflowID, opts, gate, name)
		done <- subscription{items, raw, err}
	}()
	return done
}

// subscribeUntil subscribes to the stream and returns what it received,
// up to the item after which enough(got) is true; an error fails the test.
func subscribeUntil(t *testing.T, ctx context.Context, c client.Client, workflowID string, opts workflowstreams.SubscribeOptions, enough func(got []received) bool) []received {
	t.Helper()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var got []received
	sc := workflowstreams.NewClient(c, workflowID, workflowstreams.Options{})
	for it, err := range sc.Subscribe(ctx, opts) {
		require.NoError(t, err)
		got = append(got, received{Offset: it.Offset, Topic: it.Topic, Value: decodeString(t, it)})
		if enough(got) {
			break
		}
	}
	return got
}

// wantStream is what StreamWorkflow publishes, in order.
func wantStream(in StreamInput) []received {
	out := []received{{Offset: 0, Topic: "status", Value: "started"}}
	for i := range in.Tokens {
		out = append(out, received{Offset: int64(len(out)), Topic: "tokens", Value: fmt.Sprintf("tok-%03d", i)})
	}
	if in.Extra {
		for _, v := range []string{`{"name":"ünïcødé ✓","count":3,"ratio":0.25}`, "42", "\x00\x01\x02\xfa", `{"nested":["a",1.5,true,null]}`} {
			out = append(out, received{Offset: int64(len(out)), Topic: "extra", Value: v})
		}
	}
	return append(out, received{Offset: int64(len(out)), Topic: "status", Value: "done"})
}

// historyNow returns the run's events as they are now.
func historyNow(t *testing.T, ctx context.Context, c client.Client, workflowID string) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		events = append(events, e)
	}
	return events
}

// history returns the run's events once no workflow task is pending.
func history(t *testing.T, ctx context.Context, c client.Client, workflowID string) []*historypb.HistoryEvent {
	t.Helper()
	var last []*historypb.HistoryEvent
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		events := historyNow(t, ctx, c, workflowID)
		settled := len(events) > 0 && len(events) == len(last)
		if n := len(events); n > 0 {
			switch events[n-1].GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			default:
				settled = false
			}
		}
		if settled {
			return events
		}
		last = events
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("history of %s did not settle", workflowID)
	return nil
}

func countTypes(events []*historypb.HistoryEvent) map[enumspb.EventType]int {
	m := map[enumspb.EventType]int{}
	for _, e := range events {
		m[e.GetEventType()]++
	}
	return m
}

// ChainInput drives ChainWorkflow.
type ChainInput struct {
	Run    int
	Runs   int
	PerRun int
	State  *workflowstreams.WorkflowStreamState
}

// ChainWorkflow publishes PerRun items per run ("run<r>-<i>" on "chain"),
// waits a moment and continues as new until Runs runs have published; the
// stream goes on across the runs.
func ChainWorkflow(ctx workflow.Context, in ChainInput) (string, error) {
	stream, err := workflowstreams.NewWorkflowStream(ctx, in.State)
	if err != nil {
		return "", err
	}
	for i := range in.PerRun {
		if err := stream.Topic("chain").Publish(fmt.Sprintf("run%d-%d", in.Run, i)); err != nil {
			return "", err
		}
	}
	// Subscribers fetch the items and park before the hand-over.
	if err := workflow.Sleep(ctx, 100*time.Millisecond); err != nil {
		return "", err
	}
	if in.Run+1 < in.Runs {
		return "", stream.NewContinueAsNewError(ctx, ChainWorkflow, func(st *workflowstreams.WorkflowStreamState) []any {
			return []any{ChainInput{Run: in.Run + 1, Runs: in.Runs, PerRun: in.PerRun, State: st}}
		})
	}
	if err := stream.Drain(ctx, time.Second); err != nil {
		return "", err
	}
	return fmt.Sprintf("runs %d offset %d", in.Runs, stream.Offset()), nil
}

func wantChain(in ChainInput) []received {
	var out []received
	for r := range in.Runs {
		for i := range in.PerRun {
			out = append(out, received{Offset: int64(len(out)), Topic: "chain", Value: fmt.Sprintf("run%d-%d", r, i)})
		}
	}
	return out
}

// OrderWorkflow runs OneItem (on actTaskQueue), then publishes "after" and
// waits for "finish".
func OrderWorkflow(ctx workflow.Context, actTaskQueue string) error {
	stream, err := workflowstreams.NewWorkflowStream(ctx, nil)
	if err != nil {
		return err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           actTaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	if err := workflow.ExecuteActivity(actx, OneItem).Get(ctx, nil); err != nil {
		return err
	}
	if err := stream.Topic("wf").Publish("after"); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return nil
}

// oneItemHold lets the test hold OneItem (by workflow id): OneItem closes
// started, then waits for release.
type oneItemHold struct{ started, release chan struct{} }

var oneItemHolds sync.Map // workflow id → oneItemHold

// OneItem waits for the test, publishes one item, flushes and returns.
func OneItem(ctx context.Context) error {
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	if h, ok := oneItemHolds.Load(id); ok {
		close(h.(oneItemHold).started)
		select {
		case <-h.(oneItemHold).release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c, err := workflowstreams.NewClientFromActivity(ctx, workflowstreams.Options{})
	if err != nil {
		return err
	}
	c.Topic("act").Publish("from the activity", false)
	return c.Close(ctx)
}
