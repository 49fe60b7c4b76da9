package workflowstreams

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// hostInput drives hostWorkflow, the stream host of the unit tests.
type hostInput struct {
	State *WorkflowStreamState
	// Publish is published by the workflow itself on topic "wf" at start.
	Publish []string
	// Linger is passed to Drain after the "finish" signal.
	Linger time.Duration
	// ContinueAsNew makes the "finish" signal hand over to a new run.
	ContinueAsNew bool
}

const finishSignal = "finish"

// hostWorkflow hosts a stream until the finish signal, then drains (or
// continues as new) and returns the stream's offset.
func hostWorkflow(ctx workflow.Context, in hostInput) (int64, error) {
	s, err := NewWorkflowStream(ctx, in.State)
	if err != nil {
		return 0, err
	}
	for _, v := range in.Publish {
		if err := s.Topic("wf").Publish(v); err != nil {
			return 0, err
		}
	}
	workflow.GetSignalChannel(ctx, finishSignal).Receive(ctx, nil)
	if in.ContinueAsNew {
		return 0, s.NewContinueAsNewError(ctx, hostWorkflow, func(st *WorkflowStreamState) []any {
			return []any{hostInput{State: st}}
		})
	}
	if err := s.Drain(ctx, in.Linger); err != nil {
		return 0, err
	}
	return s.Offset(), nil
}

func wire(t *testing.T, v any) string {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	s, err := EncodePayload(p)
	require.NoError(t, err)
	return s
}

func batchOf(t *testing.T, publisher string, seq int64, topicValues ...string) PublishInput {
	t.Helper()
	in := PublishInput{PublisherID: publisher, Sequence: seq, Items: []PublishEntry{}}
	for i := 0; i < len(topicValues); i += 2 {
		in.Items = append(in.Items, PublishEntry{Topic: topicValues[i], Data: wire(t, topicValues[i+1])})
	}
	return in
}

// pollRecord is what the test environment reported for one poll.
type pollRecord struct {
	accepted, rejected, completed bool
	err                           error
	res                           PollResult
}

func pollAt(env *testsuite.TestWorkflowEnvironment, in PollInput) *pollRecord {
	r := &pollRecord{}
	env.UpdateWorkflow(PollUpdateName, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { r.accepted = true },
		OnReject: func(err error) { r.rejected, r.err = true, err },
		OnComplete: func(v any, err error) {
			r.completed, r.err = true, err
			if err == nil {
				r.res = v.(PollResult)
			}
		},
	}, in)
	return r
}

// at runs f at workflow time d after the start.
func at(env *testsuite.TestWorkflowEnvironment, d time.Duration, f func()) {
	env.RegisterDelayedCallback(f, d)
}

func values(t *testing.T, items []WireItem) []string {
	t.Helper()
	out := []string{}
	for _, it := range items {
		p, err := DecodePayload(it.Data)
		require.NoError(t, err)
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &s))
		out = append(out, it.Topic+":"+s)
	}
	return out
}

func offsets(items []WireItem) []int64 {
	out := []int64{}
	for _, it := range items {
		out = append(out, it.Offset)
	}
	return out
}

func queryOffset(t *testing.T, env *testsuite.TestWorkflowEnvironment) int64 {
	t.Helper()
	v, err := env.QueryWorkflow(OffsetQueryName)
	require.NoError(t, err)
	var n int64
	require.NoError(t, v.Get(&n))
	return n
}

// quiet is a test suite whose environments log nothing (the SDK's test
// logger prints every timer at DEBUG).
func quiet() *testsuite.WorkflowTestSuite {
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return &ts
}

func newEnv() *testsuite.TestWorkflowEnvironment {
	env := quiet().NewTestWorkflowEnvironment()
	env.RegisterWorkflow(hostWorkflow)
	return env
}

func TestPublishFromWorkflowAndPollFromOffsets(t *testing.T) {
	env := newEnv()
	var fromZero, fromTwo, fromEnd, fromFuture *pollRecord
	var offsetBefore, offsetAfter int64
	at(env, time.Millisecond, func() {
		offsetBefore = queryOffset(t, env)
		fromZero = pollAt(env, PollInput{Topics: []string{}, FromOffset: 0})
		fromTwo = pollAt(env, PollInput{FromOffset: 2})
		fromEnd = pollAt(env, PollInput{FromOffset: 3})
		fromFuture = pollAt(env, PollInput{FromOffset: 4})
	})
	at(env, 2*time.Millisecond, func() {
		require.True(t, fromEnd.accepted)
		require.False(t, fromEnd.completed, "a poll at the end of the log parks")
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 1, "ext", "d"))
	})
	at(env, 3*time.Millisecond, func() {
		require.False(t, fromFuture.completed, "offset 4 does not exist yet")
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 2, "ext", "e"))
	})
	at(env, 4*time.Millisecond, func() {
		offsetAfter = queryOffset(t, env)
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{Publish: []string{"a", "b", "c"}})
	require.NoError(t, env.GetWorkflowError())

	require.EqualValues(t, 3, offsetBefore)
	require.EqualValues(t, 5, offsetAfter)
	require.Equal(t, []string{"wf:a", "wf:b", "wf:c"}, values(t, fromZero.res.Items))
	require.Equal(t, []int64{0, 1, 2}, offsets(fromZero.res.Items))
	require.EqualValues(t, 3, fromZero.res.NextOffset)
	require.False(t, fromZero.res.MoreReady)
	require.Equal(t, []string{"wf:c"}, values(t, fromTwo.res.Items))
	require.Equal(t, []int64{2}, offsets(fromTwo.res.Items))

	require.True(t, fromEnd.completed)
	require.Equal(t, []string{"ext:d"}, values(t, fromEnd.res.Items))
	require.Equal(t, []int64{3}, offsets(fromEnd.res.Items))
	require.EqualValues(t, 4, fromEnd.res.NextOffset)
	require.Equal(t, []string{"ext:e"}, values(t, fromFuture.res.Items))
	require.Equal(t, []int64{4}, offsets(fromFuture.res.Items))

	var result int64
	require.NoError(t, env.GetWorkflowResult(&result))
	require.EqualValues(t, 5, result)
}

func TestResentBatchIsDropped(t *testing.T) {
	env := newEnv()
	var all *pollRecord
	at(env, time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 1, "t", "x", "t", "y"))
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 1, "t", "x", "t", "y")) // resend
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p2", 1, "t", "v"))           // another publisher, same seq
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 2, "t", "z"))
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 1, "t", "late")) // older than the last taken
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 2, "t", "z"))    // resend
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p3", 0, "t", "zero")) // sequences start at 1
		env.SignalWorkflow(PublishSignalName, batchOf(t, "", 0, "t", "anon"))   // no publisher id: no dedup
		env.SignalWorkflow(PublishSignalName, batchOf(t, "", 0, "t", "anon"))
	})
	at(env, 2*time.Millisecond, func() {
		all = pollAt(env, PollInput{})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"t:x", "t:y", "t:v", "t:z", "t:anon", "t:anon"}, values(t, all.res.Items))
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5}, offsets(all.res.Items))
}

func TestMalformedItemIsLeftOut(t *testing.T) {
	env := newEnv()
	var all *pollRecord
	at(env, time.Millisecond, func() {
		in := batchOf(t, "p1", 1, "t", "ok1")
		in.Items = append(in.Items, PublishEntry{Topic: "t", Data: "%%% not base64"}, PublishEntry{Topic: "t", Data: wire(t, "ok2")})
		env.SignalWorkflow(PublishSignalName, in)
	})
	at(env, 2*time.Millisecond, func() {
		all = pollAt(env, PollInput{})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"t:ok1", "t:ok2"}, values(t, all.res.Items))
}

func TestTopicFilters(t *testing.T) {
	env := newEnv()
	var onlyA, aAndC, parkedB, none *pollRecord
	at(env, time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 1, "a", "1", "b", "2", "a", "3", "c", "4"))
	})
	at(env, 2*time.Millisecond, func() {
		onlyA = pollAt(env, PollInput{Topics: []string{"a"}})
		aAndC = pollAt(env, PollInput{Topics: []string{"c", "a"}, FromOffset: 1})
		parkedB = pollAt(env, PollInput{Topics: []string{"b"}, FromOffset: 4})
		none = pollAt(env, PollInput{Topics: []string{"zzz"}, FromOffset: 0})
	})
	at(env, 3*time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 2, "a", "5"))
	})
	at(env, 4*time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 3, "b", "6"))
	})
	at(env, 5*time.Millisecond, func() { env.SignalWorkflow(finishSignal, nil) })
	env.ExecuteWorkflow(hostWorkflow, hostInput{})
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, []string{"a:1", "a:3"}, values(t, onlyA.res.Items))
	require.Equal(t, []int64{0, 2}, offsets(onlyA.res.Items))
	require.EqualValues(t, 4, onlyA.res.NextOffset, "next_offset skips past the items filtered out")
	require.Equal(t, []string{"a:3", "c:4"}, values(t, aAndC.res.Items))
	require.Equal(t, []int64{2, 3}, offsets(aAndC.res.Items))

	// A filtered poll is answered as soon as any item arrives (the protocol
	// does so), possibly with no item of its topics: it then moves on.
	require.Empty(t, none.res.Items)
	require.EqualValues(t, 4, none.res.NextOffset)
	require.True(t, parkedB.completed)
	require.Empty(t, parkedB.res.Items, "the 'a' item woke it with nothing for 'b'")
	require.EqualValues(t, 5, parkedB.res.NextOffset)
}

func TestValidatorRefusesNegativeOffset(t *testing.T) {
	env := newEnv()
	var bad *pollRecord
	at(env, time.Millisecond, func() {
		bad = pollAt(env, PollInput{FromOffset: -1})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{})
	require.NoError(t, env.GetWorkflowError())
	require.True(t, bad.rejected)
	require.False(t, bad.accepted)
}

func TestPollAfterCompletion(t *testing.T) {
	env := newEnv()
	var parked *pollRecord
	at(env, time.Millisecond, func() {
		parked = pollAt(env, PollInput{FromOffset: 1})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{Publish: []string{"a"}})
	require.NoError(t, env.GetWorkflowError(), "a poll still parked does not keep the workflow from completing")
	require.True(t, parked.accepted)
	require.False(t, parked.completed, "the parked poll is abandoned; the server fails it and the client ends")

	// The test environment serves nothing once the workflow is done (a real
	// server fails the update with NotFound; subscribe_test.go and the
	// integration tests cover how clients take that).
	after := pollAt(env, PollInput{FromOffset: 0})
	require.False(t, after.accepted || after.completed)
}

func TestDrainWaitsForLingerSinceLastItem(t *testing.T) {
	for _, tc := range []struct {
		name      string
		quietFor  time.Duration // between the last item and the finish signal
		linger    time.Duration
		wantTimer bool
	}{
		{"recent item: waits the rest of linger", 200 * time.Millisecond, time.Second, true},
		{"quiet stream: returns at once", 2 * time.Second, time.Second, false},
		{"no linger", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv()
			timers := 0
			env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
			start := env.Now()
			at(env, time.Second, func() {
				env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 1, "t", "last"))
			})
			at(env, time.Second+tc.quietFor, func() { env.SignalWorkflow(finishSignal, nil) })
			env.ExecuteWorkflow(hostWorkflow, hostInput{Linger: tc.linger})
			require.NoError(t, env.GetWorkflowError())
			ended := env.Now()
			require.Equal(t, tc.wantTimer, timers > 0, "timers: %d", timers)
			want := time.Second + max(tc.quietFor, tc.linger)
			require.InDelta(t, want.Seconds(), ended.Sub(start).Seconds(), 0.05)
		})
	}
}

func TestDrainRestartsWhenItemsArrive(t *testing.T) {
	env := newEnv()
	start := env.Now()
	at(env, time.Millisecond, func() { env.SignalWorkflow(finishSignal, nil) })
	// Items keep arriving while Drain waits: each restarts the linger.
	at(env, 500*time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 1, "t", "x"))
	})
	at(env, 1200*time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 2, "t", "y"))
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{Publish: []string{"a"}, Linger: time.Second})
	require.NoError(t, env.GetWorkflowError())
	ended := env.Now()
	require.InDelta(t, 2.2, ended.Sub(start).Seconds(), 0.05)
	var n int64
	require.NoError(t, env.GetWorkflowResult(&n))
	require.EqualValues(t, 3, n)
}

// truncateWorkflow publishes five items, truncates the first three and
// serves polls until finish.
func truncateWorkflow(ctx workflow.Context) (string, error) {
	s, err := NewWorkflowStream(ctx, nil)
	if err != nil {
		return "", err
	}
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		_ = s.Topic("t").Publish(v)
	}
	if err := s.Truncate(3); err != nil {
		return "", err
	}
	if err := s.Truncate(1); err != nil { // before the base: nothing to do
		return "", err
	}
	outOfRange := s.Truncate(99)
	workflow.GetSignalChannel(ctx, finishSignal).Receive(ctx, nil)
	var appErr *temporal.ApplicationError
	if errors.As(outOfRange, &appErr) {
		return appErr.Type(), nil
	}
	return "no error", nil
}

func TestTruncate(t *testing.T) {
	env := quiet().NewTestWorkflowEnvironment()
	var stale, zero, kept *pollRecord
	var offset int64
	at(env, time.Millisecond, func() {
		stale = pollAt(env, PollInput{FromOffset: 1})
		zero = pollAt(env, PollInput{FromOffset: 0})
		kept = pollAt(env, PollInput{FromOffset: 4})
		offset = queryOffset(t, env)
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(truncateWorkflow)
	require.NoError(t, env.GetWorkflowError())
	var outOfRange string
	require.NoError(t, env.GetWorkflowResult(&outOfRange))
	require.Equal(t, ErrTypeTruncateOutOfRange, outOfRange)

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, stale.err, &appErr)
	require.Equal(t, ErrTypeTruncatedOffset, appErr.Type())
	require.Equal(t, []string{"t:d", "t:e"}, values(t, zero.res.Items), "offset 0 means the oldest item kept")
	require.Equal(t, []int64{3, 4}, offsets(zero.res.Items))
	require.Equal(t, []int64{4}, offsets(kept.res.Items))
	require.EqualValues(t, 5, offset)
}

func TestContinueAsNewCarriesTheStream(t *testing.T) {
	env := newEnv()
	var parked *pollRecord
	at(env, time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 1, "t", "x"))
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p2", 4, "t", "y"))
	})
	at(env, 2*time.Millisecond, func() {
		parked = pollAt(env, PollInput{FromOffset: 3})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{Publish: []string{"a"}, ContinueAsNew: true})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.True(t, parked.completed, "DetachPollers releases parked polls")
	require.Empty(t, parked.res.Items)

	var next hostInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	st := next.State
	require.NotNil(t, st)
	require.EqualValues(t, 0, st.BaseOffset)
	require.Len(t, st.Log, 3)
	require.Equal(t, map[string]int64{"p1": 1, "p2": 4}, st.PublisherSeqs)
	require.Len(t, st.PublisherLastSeen, 2)

	// The next run: resends of the old batches are still dropped, offsets
	// go on, and a poll from an old offset still finds its items.
	env2 := newEnv()
	var fromOne *pollRecord
	var offset int64
	at(env2, time.Millisecond, func() {
		env2.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 1, "t", "x"))
		env2.SignalWorkflow(PublishSignalName, batchOf(t, "p2", 4, "t", "y"))
		env2.SignalWorkflow(PublishSignalName, batchOf(t, "p1", 2, "t", "z"))
	})
	at(env2, 2*time.Millisecond, func() {
		fromOne = pollAt(env2, PollInput{FromOffset: 1})
		offset = queryOffset(t, env2)
		env2.SignalWorkflow(finishSignal, nil)
	})
	env2.ExecuteWorkflow(hostWorkflow, next)
	require.NoError(t, env2.GetWorkflowError())
	require.EqualValues(t, 4, offset)
	require.Equal(t, []string{"t:x", "t:y", "t:z"}, values(t, fromOne.res.Items))
	require.Equal(t, []int64{1, 2, 3}, offsets(fromOne.res.Items))
}

// detachWorkflow detaches its pollers on "detach" and ends on finish.
func detachWorkflow(ctx workflow.Context) error {
	s, err := NewWorkflowStream(ctx, nil)
	if err != nil {
		return err
	}
	_ = s.Topic("t").Publish("a")
	workflow.GetSignalChannel(ctx, "detach").Receive(ctx, nil)
	s.DetachPollers()
	workflow.GetSignalChannel(ctx, finishSignal).Receive(ctx, nil)
	return nil
}

func TestDetachedStreamRefusesPollsAsDraining(t *testing.T) {
	env := quiet().NewTestWorkflowEnvironment()
	var parked, refused *pollRecord
	at(env, time.Millisecond, func() {
		parked = pollAt(env, PollInput{FromOffset: 1})
		env.SignalWorkflow("detach", nil)
	})
	at(env, 2*time.Millisecond, func() {
		refused = pollAt(env, PollInput{FromOffset: 0})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(detachWorkflow)
	require.NoError(t, env.GetWorkflowError())
	require.True(t, parked.completed)
	require.EqualValues(t, 1, parked.res.NextOffset)
	require.True(t, refused.rejected, "refused in the validator: no history event")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, refused.err, &appErr)
	require.Equal(t, ErrTypeStreamDraining, appErr.Type())
}

// payloadWorkflow publishes a ready Payload and a []byte through a
// byte-slice-only converter set, and reports whether a string was refused.
func payloadWorkflow(ctx workflow.Context) (bool, error) {
	s, err := NewWorkflowStream(ctx, nil, WithPayloadConverters(converter.NewByteSlicePayloadConverter()))
	if err != nil {
		return false, err
	}
	raw := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"raw"`)}
	if err := s.Topic("t").Publish(raw); err != nil {
		return false, err
	}
	if err := s.Topic("t").Publish([]byte("bytes")); err != nil {
		return false, err
	}
	refused := s.Topic("t").Publish("a string") != nil
	workflow.GetSignalChannel(ctx, finishSignal).Receive(ctx, nil)
	return refused, nil
}

func TestWorkflowPublishUsesPayloadConverters(t *testing.T) {
	env := quiet().NewTestWorkflowEnvironment()
	var all *pollRecord
	at(env, time.Millisecond, func() {
		all = pollAt(env, PollInput{})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(payloadWorkflow)
	require.NoError(t, env.GetWorkflowError())
	var refused bool
	require.NoError(t, env.GetWorkflowResult(&refused))
	require.True(t, refused)
	require.Len(t, all.res.Items, 2)
	first, err := DecodePayload(all.res.Items[0].Data)
	require.NoError(t, err)
	require.Equal(t, `"raw"`, string(first.GetData()))
	second, err := DecodePayload(all.res.Items[1].Data)
	require.NoError(t, err)
	require.Equal(t, "binary/plain", string(second.GetMetadata()["encoding"]))
	require.Equal(t, "bytes", string(second.GetData()))
}

func TestPollResponseIsCutAtTheSizeCap(t *testing.T) {
	env := newEnv()
	big := strings.Repeat("x", 300_000)
	var first, rest *pollRecord
	at(env, time.Millisecond, func() {
		env.SignalWorkflow(PublishSignalName, batchOf(t, "p", 1, "t", big, "t", big, "t", big, "t", big))
	})
	at(env, 2*time.Millisecond, func() { first = pollAt(env, PollInput{}) })
	at(env, 3*time.Millisecond, func() {
		rest = pollAt(env, PollInput{FromOffset: first.res.NextOffset})
		env.SignalWorkflow(finishSignal, nil)
	})
	env.ExecuteWorkflow(hostWorkflow, hostInput{})
	require.NoError(t, env.GetWorkflowError())
	require.True(t, first.res.MoreReady)
	require.Equal(t, []int64{0, 1}, offsets(first.res.Items), "two 400 kB items fit under 1 MB, three do not")
	require.EqualValues(t, 2, first.res.NextOffset)
	require.False(t, rest.res.MoreReady)
	require.Equal(t, []int64{2, 3}, offsets(rest.res.Items))
}
