package workflowstreams

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// FlushTimeoutError says a batch could not be sent within MaxRetryDuration
// and was given up. If one of the failed sends did reach the workflow its
// items are in the stream; otherwise they are lost.
type FlushTimeoutError struct {
	msg string
}

func (e *FlushTimeoutError) Error() string { return e.msg }

// maxRetryGap caps the wait between two tries of a failing batch.
const maxRetryGap = 5 * time.Second

type bufItem struct {
	topic string
	value any
}

// batch is a batch that has a sequence number: once it has been tried it is
// resent unchanged (same publisher id and sequence) until it is confirmed,
// so the workflow drops the copies that did arrive.
type batch struct {
	entries  []PublishEntry
	seq      int64
	firstTry time.Time
}

// publisher is the publish half of a Client. Items wait in buf; a batch is
// taken from buf only when nothing is pending, so batches reach the workflow
// in sequence order (the workflow drops any batch whose sequence is not
// above the last one it took from the publisher).
//
// Timing: after a quiet spell (nothing sent for an interval) the first item
// goes out at once; items published while a send is recent wait and go out
// together one interval after it. forceFlush, a full MaxBatchSize, Flush
// and Close send at once.
//
// The sender is a goroutine only while there is something to send or a
// send is recent: after a quiet spell it ends, and the next publish starts
// another. A stream that has said what it had to say (a live attempt's one
// event) costs no goroutine while its attempt runs on.
type publisher struct {
	send     func(context.Context, PublishInput) error
	dc       converter.DataConverter
	id       string
	interval time.Duration
	maxBatch int
	maxRetry time.Duration

	mu           sync.Mutex
	buf          []bufItem
	pending      *batch
	confirmedSeq int64 // last sequence the workflow confirmed
	urgent       bool  // send without waiting for the interval
	err          error // kept for the next Flush or Close
	running      bool  // a sender goroutine runs (done closes when it ends)
	closed       bool

	sending    chan struct{} // one send at a time
	wake       chan struct{}
	stop       chan struct{}
	done       chan struct{}
	loopCtx    context.Context
	cancelLoop context.CancelFunc
}

func newPublisher(send func(context.Context, PublishInput) error, dc converter.DataConverter, opts Options) *publisher {
	p := &publisher{
		send:     send,
		dc:       dc,
		id:       newPublisherID(),
		interval: opts.BatchInterval,
		maxBatch: opts.MaxBatchSize,
		maxRetry: opts.MaxRetryDuration,
		sending:  make(chan struct{}, 1),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	if p.interval <= 0 {
		p.interval = DefaultBatchInterval
	}
	if p.maxRetry <= 0 {
		p.maxRetry = DefaultMaxRetryDuration
	}
	p.loopCtx, p.cancelLoop = context.WithCancel(context.Background())
	return p
}

// newPublisherID is 16 hex digits, the shape the official clients use.
func newPublisherID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (p *publisher) publish(topic string, value any, forceFlush bool) {
	p.mu.Lock()
	idle := p.pending == nil && len(p.buf) == 0
	p.buf = append(p.buf, bufItem{topic: topic, value: value})
	if forceFlush || (p.maxBatch > 0 && len(p.buf) >= p.maxBatch) {
		p.urgent = true
	}
	nudge := idle || p.urgent
	start := !p.running && !p.closed
	if start {
		p.running = true
		p.done = make(chan struct{})
	}
	closed := p.closed
	done := p.done
	p.mu.Unlock()
	if start {
		go p.run(done)
	}
	if nudge && !closed {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *publisher) hasWork() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending != nil || len(p.buf) > 0
}

// run is the background sender, started by a publish when none runs; it
// ends after a quiet spell.
func (p *publisher) run(done chan struct{}) {
	defer close(done)
	var last time.Time // start of the last send
	failures := 0
	for {
		p.mu.Lock()
		work := p.pending != nil || len(p.buf) > 0
		urgent := p.urgent && p.pending == nil
		quiet := time.Until(last.Add(p.interval))
		if !work && quiet <= 0 {
			// The next item would go at once anyway: a new sender can
			// send it.
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if !work {
			t := time.NewTimer(quiet)
			select {
			case <-p.wake:
			case <-t.C:
			case <-p.stop:
				t.Stop()
				return // close sends what is left
			}
			t.Stop()
			continue
		}
		gap := p.interval
		if failures > 0 {
			gap = min(p.interval<<min(failures, 16), maxRetryGap)
		}
		if wait := time.Until(last.Add(gap)); wait > 0 && (!urgent || failures > 0) {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.wake:
				t.Stop()
				continue
			case <-p.stop:
				t.Stop()
				return
			}
		}
		last = time.Now()
		err := p.sendOnce(p.loopCtx)
		var fte *FlushTimeoutError
		switch {
		case err == nil:
			failures = 0
		case errors.As(err, &fte):
			p.keepErr(err)
			failures = 0
		case p.loopCtx.Err() != nil:
			return
		default:
			failures++
		}
	}
}

// sendOnce sends the pending batch again, or else makes a batch of the
// buffer and sends it. It does nothing when there is nothing to send.
func (p *publisher) sendOnce(ctx context.Context) error {
	select {
	case p.sending <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sending }()

	p.mu.Lock()
	b := p.pending
	switch {
	case b != nil && time.Since(b.firstTry) > p.maxRetry:
		// Give it up, but never reuse its sequence number: the workflow may
		// have taken it, and would drop the next batch as a resend.
		p.confirmedSeq, p.pending = b.seq, nil
		p.mu.Unlock()
		return &FlushTimeoutError{msg: fmt.Sprintf(
			"workflowstreams: a batch of %d item(s) (sequence %d) could not be sent within %s and was dropped",
			len(b.entries), b.seq, p.maxRetry)}
	case b == nil && len(p.buf) > 0:
		entries, convErr := p.encode(p.buf)
		p.buf, p.urgent = nil, false
		if convErr != nil {
			p.err = errors.Join(p.err, convErr)
		}
		if len(entries) == 0 {
			p.mu.Unlock()
			return nil
		}
		b = &batch{entries: entries, seq: p.confirmedSeq + 1, firstTry: time.Now()}
		p.pending = b
	case b == nil:
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()

	if err := p.send(ctx, PublishInput{Items: b.entries, PublisherID: p.id, Sequence: b.seq}); err != nil {
		return err
	}
	p.mu.Lock()
	p.confirmedSeq, p.pending = b.seq, nil
	p.mu.Unlock()
	return nil
}

// encode converts buffered values to wire entries. A value the converters
// cannot convert is left out and reported (once) by Flush or Close.
func (p *publisher) encode(items []bufItem) ([]PublishEntry, error) {
	out := make([]PublishEntry, 0, len(items))
	var errs []error
	for _, it := range items {
		pl, ok := it.value.(*commonpb.Payload)
		if !ok {
			var err error
			if pl, err = p.dc.ToPayload(it.value); err != nil {
				errs = append(errs, fmt.Errorf("workflowstreams: topic %q: convert value (item dropped): %w", it.topic, err))
				continue
			}
		}
		data, err := EncodePayload(pl)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, PublishEntry{Topic: it.topic, Data: data})
	}
	return out, errors.Join(errs...)
}

func (p *publisher) keepErr(err error) {
	p.mu.Lock()
	p.err = errors.Join(p.err, err)
	p.mu.Unlock()
}

func (p *publisher) takeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}

// flush returns once every item published before the call has been
// confirmed by the server (later items may ride along).
func (p *publisher) flush(ctx context.Context) error {
	if err := p.takeErr(); err != nil {
		return err
	}
	p.mu.Lock()
	target := p.confirmedSeq
	if p.pending != nil {
		target = p.pending.seq
	}
	if len(p.buf) > 0 {
		target++
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		reached := p.confirmedSeq >= target
		p.mu.Unlock()
		if reached || !p.hasWork() {
			break
		}
		if err := p.sendOnce(ctx); err != nil {
			return err
		}
	}
	return p.takeErr()
}

// close stops the background sender and sends what is left.
func (p *publisher) close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.takeErr()
	}
	p.closed = true
	done := p.done
	p.mu.Unlock()
	close(p.stop)
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			p.cancelLoop()
			<-done
		}
	}
	p.cancelLoop()
	for p.hasWork() {
		if err := p.sendOnce(ctx); err != nil {
			return err
		}
	}
	return p.takeErr()
}
