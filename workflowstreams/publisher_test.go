package workflowstreams

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
)

// fakeSignal records the batches a publisher sends; fail decides whether
// the n-th send (from 0) fails, and delivered whether a failed send still
// reached the workflow (an ambiguous failure, e.g. a timeout).
type fakeSignal struct {
	mu        sync.Mutex
	sent      []sentBatch // every try, including failed ones
	fail      func(n int) bool
	delivered func(n int) bool
	log       []string                  // what a deduplicating workflow would keep
	lastSeq   map[string]int64          // that workflow's marks
	notify    chan struct{}             // a send happened
	block     func(ctx context.Context) // optional: called inside each send
}

type sentBatch struct {
	at time.Time
	in PublishInput
	ok bool
}

func newFakeSignal() *fakeSignal {
	return &fakeSignal{lastSeq: map[string]int64{}, notify: make(chan struct{}, 100)}
}

func (f *fakeSignal) send(ctx context.Context, in PublishInput) error {
	if f.block != nil {
		f.block(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.sent)
	failed := f.fail != nil && f.fail(n)
	f.sent = append(f.sent, sentBatch{at: time.Now(), in: in, ok: !failed})
	select {
	case f.notify <- struct{}{}:
	default:
	}
	if !failed || (f.delivered != nil && f.delivered(n)) {
		if in.Sequence > f.lastSeq[in.PublisherID] {
			f.lastSeq[in.PublisherID] = in.Sequence
			for _, e := range in.Items {
				p, err := DecodePayload(e.Data)
				if err != nil {
					panic(err)
				}
				var s string
				if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
					panic(err)
				}
				f.log = append(f.log, s)
			}
		}
	}
	if failed {
		return errors.New("fake: signal failed")
	}
	return ctx.Err()
}

func (f *fakeSignal) tries() []sentBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentBatch(nil), f.sent...)
}

func (f *fakeSignal) kept() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *fakeSignal) waitTries(t *testing.T, n int) []sentBatch {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if got := f.tries(); len(got) >= n {
			return got
		}
		select {
		case <-f.notify:
		case <-deadline:
			t.Fatalf("waited for %d sends, got %d", n, len(f.tries()))
		}
	}
}

func itemValues(t *testing.T, in PublishInput) []string {
	t.Helper()
	var out []string
	for _, e := range in.Items {
		p, err := DecodePayload(e.Data)
		require.NoError(t, err)
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &s))
		out = append(out, e.Topic+":"+s)
	}
	return out
}

func newTestPublisher(f *fakeSignal, opts Options) *publisher {
	return newPublisher(f.send, converter.GetDefaultDataConverter(), opts)
}

func TestPublisherSendsTheFirstItemAtOnceAndBatchesTheRest(t *testing.T) {
	f := newFakeSignal()
	// Wide enough that a busy machine's scheduling (tens of ms) cannot
	// blur "at once" and "after the interval".
	const interval = time.Second
	p := newTestPublisher(f, Options{BatchInterval: interval})
	start := time.Now()
	p.publish("t", "first", false)
	tries := f.waitTries(t, 1)
	require.Less(t, tries[0].at.Sub(start), interval/2, "the first item does not wait for the interval")
	require.Equal(t, []string{"t:first"}, itemValues(t, tries[0].in))
	require.EqualValues(t, 1, tries[0].in.Sequence)
	require.Len(t, tries[0].in.PublisherID, 16)

	for _, v := range []string{"b", "c", "d"} {
		p.publish("t", v, false)
	}
	tries = f.waitTries(t, 2)
	require.Len(t, tries, 2, "the items after the first go in one batch")
	require.Equal(t, []string{"t:b", "t:c", "t:d"}, itemValues(t, tries[1].in))
	require.EqualValues(t, 2, tries[1].in.Sequence)
	require.Equal(t, tries[0].in.PublisherID, tries[1].in.PublisherID)
	gap := tries[1].at.Sub(tries[0].at)
	require.GreaterOrEqual(t, gap, interval-10*time.Millisecond)
	require.Less(t, gap, interval+500*time.Millisecond)

	// After a quiet spell the sender has ended (an idle stream costs no
	// goroutine), and the next item goes out at once again.
	time.Sleep(interval + 100*time.Millisecond)
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.running
	}, 5*time.Second, 10*time.Millisecond, "the sender ended after a quiet spell")
	before := time.Now()
	p.publish("t", "after quiet", false)
	tries = f.waitTries(t, 3)
	require.Less(t, tries[2].at.Sub(before), interval/2)
	require.NoError(t, p.close(context.Background()))
	require.Equal(t, []string{"first", "b", "c", "d", "after quiet"}, f.kept())
}

func TestPublisherForceFlushAndMaxBatchSizeSendAtOnce(t *testing.T) {
	f := newFakeSignal()
	p := newTestPublisher(f, Options{BatchInterval: time.Hour, MaxBatchSize: 3})
	p.publish("t", "1", false)
	f.waitTries(t, 1)
	p.publish("t", "2", false)
	p.publish("t", "3", true) // forced, within the hour
	tries := f.waitTries(t, 2)
	require.Equal(t, []string{"t:2", "t:3"}, itemValues(t, tries[1].in))
	p.publish("t", "4", false)
	p.publish("t", "5", false)
	p.publish("t", "6", false) // the third waiting item fills the batch
	tries = f.waitTries(t, 3)
	require.Equal(t, []string{"t:4", "t:5", "t:6"}, itemValues(t, tries[2].in))
	require.NoError(t, p.close(context.Background()))
}

func TestPublisherResendsAFailedBatchWithTheSameSequence(t *testing.T) {
	f := newFakeSignal()
	// The 2nd and 3rd sends fail; the 2nd did reach the workflow (a
	// timeout after delivery), so the 3rd and 4th sends are resends.
	f.fail = func(n int) bool { return n == 1 || n == 2 }
	f.delivered = func(n int) bool { return n == 1 }
	p := newTestPublisher(f, Options{BatchInterval: 20 * time.Millisecond})
	p.publish("t", "a", false)
	f.waitTries(t, 1)
	p.publish("t", "b", false)
	p.publish("t", "c", false)
	f.waitTries(t, 4)
	p.publish("t", "d", false)
	require.NoError(t, p.flush(context.Background()))

	tries := f.tries()
	require.Len(t, tries, 5)
	for i, want := range []int64{1, 2, 2, 2, 3} {
		require.Equal(t, want, tries[i].in.Sequence, "try %d", i)
	}
	require.Equal(t, itemValues(t, tries[1].in), itemValues(t, tries[3].in), "a resend carries the same items")
	require.Equal(t, []string{"a", "b", "c", "d"}, f.kept(), "the delivered-then-failed batch is kept once")
	require.NoError(t, p.close(context.Background()))
}

func TestPublisherFlushWaitsForConfirmation(t *testing.T) {
	f := newFakeSignal()
	release := make(chan struct{})
	f.block = func(ctx context.Context) {
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	p := newTestPublisher(f, Options{BatchInterval: time.Hour})
	p.publish("t", "a", false)
	p.publish("t", "b", false)
	done := make(chan error, 1)
	go func() { done <- p.flush(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("flush returned before the send was confirmed: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-done)
	require.ElementsMatch(t, []string{"a", "b"}, f.kept())

	// Flush with nothing waiting returns at once; a Flush whose ctx ends
	// while a send is stuck returns the ctx error.
	require.NoError(t, p.flush(context.Background()))
	require.NoError(t, p.close(context.Background()))
}

func TestPublisherFlushHonoursContext(t *testing.T) {
	f := newFakeSignal()
	f.block = func(ctx context.Context) { <-ctx.Done() }
	p := newTestPublisher(f, Options{BatchInterval: time.Hour})
	p.publish("t", "a", false)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.flush(ctx), context.DeadlineExceeded)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	require.Error(t, p.close(ctx2))
}

func TestPublisherCloseSendsWhatIsLeft(t *testing.T) {
	f := newFakeSignal()
	p := newTestPublisher(f, Options{BatchInterval: time.Hour})
	p.publish("t", "a", false)
	f.waitTries(t, 1)
	p.publish("t", "b", false)
	p.publish("t", "c", false)
	require.NoError(t, p.close(context.Background()))
	require.Equal(t, []string{"a", "b", "c"}, f.kept())
	require.NoError(t, p.close(context.Background()), "a second Close is a no-op")

	// Nothing was published: Close sends nothing and starts nothing.
	f2 := newFakeSignal()
	require.NoError(t, newTestPublisher(f2, Options{}).close(context.Background()))
	require.Empty(t, f2.tries())
}

func TestPublisherGivesUpAfterMaxRetryDuration(t *testing.T) {
	f := newFakeSignal()
	failing := true
	var mu sync.Mutex
	f.fail = func(int) bool { mu.Lock(); defer mu.Unlock(); return failing }
	p := newTestPublisher(f, Options{BatchInterval: 10 * time.Millisecond, MaxRetryDuration: 100 * time.Millisecond})
	p.publish("t", "lost", false)
	time.Sleep(400 * time.Millisecond) // tries, backs off, gives up
	mu.Lock()
	failing = false
	mu.Unlock()
	var fte *FlushTimeoutError
	require.ErrorAs(t, p.flush(context.Background()), &fte, "the background failure is reported once")
	p.publish("t", "next", false)
	require.NoError(t, p.flush(context.Background()))
	tries := f.tries()
	last := tries[len(tries)-1]
	require.EqualValues(t, 2, last.in.Sequence, "the dropped batch's sequence is not reused")
	require.Equal(t, []string{"next"}, f.kept())
	require.NoError(t, p.close(context.Background()))
}

func TestPublisherReportsUnconvertibleValues(t *testing.T) {
	f := newFakeSignal()
	p := newTestPublisher(f, Options{BatchInterval: time.Hour})
	p.publish("t", "ok", false)
	p.publish("t", func() {}, false) // the JSON converter cannot take a func
	err := p.close(context.Background())
	require.ErrorContains(t, err, "convert value")
	require.Equal(t, []string{"ok"}, f.kept())
}
