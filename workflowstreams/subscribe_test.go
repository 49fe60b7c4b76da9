package workflowstreams

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// step is one scripted answer to a poll: updateErr fails UpdateWorkflow
// itself (as for a workflow that is already closed), getErr fails the
// outcome of an admitted poll (as when the run closes under it).
type step struct {
	run       string
	updateErr error
	getErr    error
	res       PollResult
}

// fakeClient scripts the calls Subscribe makes; the rest of client.Client
// is left nil and would panic if called.
type fakeClient struct {
	client.Client

	mu        sync.Mutex
	steps     []step
	polls     []PollInput
	status    map[string]enumspb.WorkflowExecutionStatus // by run id; "" is the latest run
	described []string
}

func (f *fakeClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o.UpdateName != PollUpdateName || o.WaitForStage != client.WorkflowUpdateStageAccepted || o.RunID != "" {
		panic("unexpected update options")
	}
	f.polls = append(f.polls, o.Args[0].(PollInput))
	if len(f.steps) == 0 {
		return nil, serviceerror.NewNotFound("workflow execution already completed")
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	if s.updateErr != nil {
		return nil, s.updateErr
	}
	return &fakeHandle{s: s}, nil
}

func (f *fakeClient) DescribeWorkflowExecution(_ context.Context, _, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.described = append(f.described, runID)
	st, ok := f.status[runID]
	if !ok {
		return nil, serviceerror.NewNotFound("no such run")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: st},
	}, nil
}

type fakeHandle struct{ s step }

func (h *fakeHandle) WorkflowID() string { return "wf" }
func (h *fakeHandle) RunID() string      { return h.s.run }
func (h *fakeHandle) UpdateID() string   { return "u" }
func (h *fakeHandle) Get(_ context.Context, v any) error {
	if h.s.getErr != nil {
		return h.s.getErr
	}
	*(v.(*PollResult)) = h.s.res
	return nil
}

func items(t *testing.T, from int64, vals ...string) []WireItem {
	out := []WireItem{}
	for i, v := range vals {
		out = append(out, WireItem{Topic: "t", Data: wire(t, v), Offset: from + int64(i)})
	}
	return out
}

type got struct {
	offsets []int64
	values  []string
	err     error
}

func collect(t *testing.T, f *fakeClient, opts SubscribeOptions) got {
	t.Helper()
	if opts.PollCooldown == 0 {
		opts.PollCooldown = time.Millisecond
	}
	c := &Client{c: f, workflowID: "wf"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var g got
	for it, err := range c.Subscribe(ctx, opts) {
		if err != nil {
			g.err = err
			break
		}
		g.offsets = append(g.offsets, it.Offset)
		g.values = append(g.values, string(it.Data.GetData()))
	}
	return g
}

var accepted = temporal.NewApplicationError("workflow completed before the update completed", "AcceptedUpdateCompletedWorkflow")

func TestSubscribeYieldsInOrderAndEndsWhenTheWorkflowCompletes(t *testing.T) {
	f := &fakeClient{
		steps: []step{
			{run: "r1", res: PollResult{Items: items(t, 0, "a", "b"), NextOffset: 2}},
			{run: "r1", res: PollResult{Items: items(t, 2, "c"), NextOffset: 3}},
			{run: "r1", getErr: accepted}, // parked when the run completed
		},
		status: map[string]enumspb.WorkflowExecutionStatus{"r1": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	}
	g := collect(t, f, SubscribeOptions{})
	require.NoError(t, g.err)
	require.Equal(t, []int64{0, 1, 2}, g.offsets)
	require.Equal(t, []string{`"a"`, `"b"`, `"c"`}, g.values)
	require.Equal(t, []int64{0, 2, 3}, []int64{f.polls[0].FromOffset, f.polls[1].FromOffset, f.polls[2].FromOffset})
	require.NotNil(t, f.polls[0].Topics, "topics go out as [] (the TypeScript workflow reads .length)")
	require.Equal(t, []string{"r1"}, f.described, "it describes the run the poll was admitted to")
}

func TestSubscribeAfterCompletionEndsWithoutItems(t *testing.T) {
	f := &fakeClient{ // no steps: every poll fails with NotFound, as on a real server
		status: map[string]enumspb.WorkflowExecutionStatus{"": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	}
	g := collect(t, f, SubscribeOptions{FromOffset: 7, Topics: []string{"x"}})
	require.NoError(t, g.err)
	require.Empty(t, g.offsets)
	require.Equal(t, []PollInput{{Topics: []string{"x"}, FromOffset: 7}}, f.polls)
}

func TestSubscribeEndsCleanlyOnEveryClosedStatus(t *testing.T) {
	for _, st := range []enumspb.WorkflowExecutionStatus{
		enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
		enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED,
		enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
	} {
		f := &fakeClient{status: map[string]enumspb.WorkflowExecutionStatus{"": st}}
		require.NoError(t, collect(t, f, SubscribeOptions{}).err, st.String())
	}
}

func TestSubscribeFollowsContinueAsNew(t *testing.T) {
	f := &fakeClient{
		steps: []step{
			{run: "r1", res: PollResult{Items: items(t, 0, "a"), NextOffset: 1}},
			{run: "r1", updateErr: temporal.NewApplicationError("draining", ErrTypeStreamDraining)},
			{run: "r1", getErr: accepted}, // r1 continued as new under the poll
			{run: "r2", res: PollResult{Items: items(t, 1, "b"), NextOffset: 2}},
			{run: "r2", getErr: accepted},
		},
		status: map[string]enumspb.WorkflowExecutionStatus{
			"r1": enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
			"r2": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		},
	}
	g := collect(t, f, SubscribeOptions{})
	require.NoError(t, g.err)
	require.Equal(t, []int64{0, 1}, g.offsets)
	require.Equal(t, []string{"r1", "r2"}, f.described)
	require.Len(t, f.polls, 5)
	require.EqualValues(t, 1, f.polls[3].FromOffset, "the new run is polled from where the old one left off")
}

func TestSubscribeRestartsAfterTruncation(t *testing.T) {
	f := &fakeClient{
		steps: []step{
			{run: "r1", getErr: temporal.NewNonRetryableApplicationError("gone", ErrTypeTruncatedOffset, nil)},
			{run: "r1", res: PollResult{Items: items(t, 5, "f"), NextOffset: 6}},
		},
		status: map[string]enumspb.WorkflowExecutionStatus{"r1": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	}
	g := collect(t, f, SubscribeOptions{FromOffset: 2})
	require.NoError(t, g.err)
	require.Equal(t, []int64{5}, g.offsets)
	require.EqualValues(t, 0, f.polls[1].FromOffset)
}

func TestSubscribeReportsErrorsWhileTheWorkflowRuns(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeClient{
		steps:  []step{{run: "r1", getErr: boom}},
		status: map[string]enumspb.WorkflowExecutionStatus{"r1": enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	}
	require.ErrorIs(t, collect(t, f, SubscribeOptions{}).err, boom)

	// Describing fails too (say, a wrong workflow id): the error is reported.
	f = &fakeClient{status: map[string]enumspb.WorkflowExecutionStatus{}}
	var nf *serviceerror.NotFound
	require.ErrorAs(t, collect(t, f, SubscribeOptions{}).err, &nf)
}

func TestSubscribeStopsWhenTheLoopBreaks(t *testing.T) {
	f := &fakeClient{
		steps: []step{
			{run: "r1", res: PollResult{Items: items(t, 0, "a", "b", "c"), NextOffset: 3}},
			{run: "r1", res: PollResult{Items: items(t, 3, "d"), NextOffset: 4}},
		},
	}
	c := &Client{c: f, workflowID: "wf"}
	n := 0
	for _, err := range c.Subscribe(context.Background(), SubscribeOptions{}) {
		require.NoError(t, err)
		if n++; n == 2 {
			break
		}
	}
	require.Len(t, f.polls, 1)
}

func TestSubscribeEndsWithTheContext(t *testing.T) {
	f := &fakeClient{steps: []step{{run: "r1", res: PollResult{Items: []WireItem{}, NextOffset: 0}}}}
	c := &Client{c: f, workflowID: "wf"}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var last error
	n := 0
	for _, err := range c.Subscribe(ctx, SubscribeOptions{PollCooldown: time.Hour}) {
		last = err
		n++
	}
	require.Equal(t, 1, n)
	require.ErrorIs(t, last, context.DeadlineExceeded)
}

func TestSubscribeSkipsTheCooldownWhenMoreIsReady(t *testing.T) {
	f := &fakeClient{
		steps: []step{
			{run: "r1", res: PollResult{Items: items(t, 0, "a"), NextOffset: 1, MoreReady: true}},
			{run: "r1", res: PollResult{Items: items(t, 1, "b"), NextOffset: 2}},
		},
		status: map[string]enumspb.WorkflowExecutionStatus{"r1": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	}
	start := time.Now()
	g := collect(t, f, SubscribeOptions{PollCooldown: 300 * time.Millisecond})
	require.NoError(t, g.err)
	require.Equal(t, []int64{0, 1}, g.offsets)
	el := time.Since(start)
	require.GreaterOrEqual(t, el, 300*time.Millisecond, "one cooldown, after the answer without more_ready")
	require.Less(t, el, 600*time.Millisecond, "no cooldown after more_ready")
}
