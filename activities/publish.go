package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

// flushTimeout bounds the final flush of an attempt's deltas.
const flushTimeout = 5 * time.Second

// callPublisher streams one attempt's text to the caller through the
// call's workflow stream, when the call asked to stream. A nil
// *callPublisher publishes nothing.
//
// A live attempt (the worker serves live text, and the call did not ask
// for stream_deltas) publishes only one event on the stream, where to
// follow it (EventLive), and hands its text to its followers through the
// worker's live registry (liveAttempt): the call's history then holds no
// batch of tokens. Otherwise the deltas go on the stream in batches.
type callPublisher struct {
	c       *workflowstreams.Client
	deltas  *workflowstreams.TopicHandle
	live    *liveAttempt
	liveURL string        // the worker's live base URL
	tokens  *atomic.Int64 // the attempt's tokens so far, for live heartbeats
	// liveAt is where to follow the attempt live, published once
	// (liveSaid) unless withdrawn first (withdrawLive).
	liveMu   sync.Mutex
	liveAt   LiveEvent
	liveSaid bool
	attempt  int
	model    string
	any      bool
	closed   bool
	ok       bool
	// lost: its rival's first token came first (a first-token race decided
	// in this process); it publishes nothing more.
	lost bool
}

// publisher returns the attempt's publisher, nil when the caller did not
// ask to stream (or the stream cannot be reached: the answer then still
// comes in the result). cancel cuts the attempt when a live attempt's
// heartbeat says the call cancelled it.
func (a *Activities) publisher(ctx context.Context, in CallInput, m config.ModelConfig, cancel func()) *callPublisher {
	if !in.Request.Stream {
		return nil
	}
	c, err := workflowstreams.NewClientFromActivity(ctx, workflowstreams.Options{BatchInterval: a.cfg.Stream.BatchInterval.D()})
	if err != nil {
		activity.GetLogger(ctx).Warn("no workflow stream: the answer comes in the result only", "error", err)
		return nil
	}
	p := &callPublisher{c: c, deltas: c.Topic(TopicDelta), attempt: in.Attempt, model: m.Name}
	if a.live != nil && !in.Request.StreamDeltas {
		p.live = a.newLiveAttempt(ctx, in.Attempt, activity.GetInfo(ctx).HeartbeatTimeout, cancel)
		p.liveURL = a.live.URL
		p.liveAt = LiveEvent{Type: EventLive, Attempt: in.Attempt, Model: m.Name, URL: p.liveURL + "/live/" + p.live.att.ID}
		if !in.Hedge {
			// Where to follow it, at once: the follower connects while the
			// upstream prepares its first token. An attempt that may be
			// hedged is the call's only one until it says it is late; it
			// then withdraws this event before any text (withdrawLive).
			p.announceLive()
		}
		// A hedge, and a late attempt, say where to follow them with their
		// first text, after their first-token note: the call's stream drops
		// the event of a racer that did not win, as it drops its deltas.
	}
	return p
}

// announceLive publishes the live attempt's event, once.
func (p *callPublisher) announceLive() {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	if p.liveSaid {
		return
	}
	p.liveSaid = true
	p.c.Topic(TopicEvent).Publish(p.liveAt, true)
}

// withdrawLive takes back the live event of an attempt that is about to
// say it is late (so a hedge may race it), while it has no text: its
// followers see that live stream end empty, and the attempt announces a new
// one with its first text, after its first-token note, as a hedge does.
func (p *callPublisher) withdrawLive() {
	if p == nil || p.live == nil {
		return
	}
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	if !p.liveSaid {
		return
	}
	if id, ok := p.live.reopen(); ok {
		p.liveAt.URL = p.liveURL + "/live/" + id
		p.liveSaid = false
	}
}

// text publishes a piece of the answer: the first at once, later ones in
// batches.
func (p *callPublisher) text(t string) {
	if p == nil || t == "" || p.closed || p.lost {
		return
	}
	if p.live != nil {
		p.announceLive()
		n := 0
		if p.tokens != nil {
			n = int(p.tokens.Load())
		}
		p.live.addText(t, n)
	} else {
		p.deltas.Publish(Delta{Attempt: p.attempt, Model: p.model, Text: t}, false)
	}
	p.any = true
}

// toolCalls publishes an answer's tool calls, whole, as one delta.
func (p *callPublisher) toolCalls(calls []request.ToolCall) {
	if p == nil || len(calls) == 0 || p.closed || p.lost {
		return
	}
	if p.live != nil {
		p.announceLive()
		p.live.addToolCalls(calls)
	} else {
		p.deltas.Publish(Delta{Attempt: p.attempt, Model: p.model, ToolCalls: calls}, false)
	}
	p.any = true
}

// close flushes what was published and stops the sender; it reports
// whether some text was published and all of it was accepted by the
// workflow, or held by a live attempt's last heartbeat (the caller has
// then seen it, or will).
func (p *callPublisher) close(ctx context.Context) bool {
	if p == nil {
		return false
	}
	if !p.closed {
		p.closed = true
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		liveOK := true
		if p.live != nil {
			liveOK = p.live.close(fctx)
		}
		p.ok = p.c.Close(fctx) == nil && liveOK
	}
	return p.ok && p.any
}

// loseRace: the attempt lost its first-token race; its text is not the
// call's, so none of it goes out.
func (p *callPublisher) loseRace() {
	if p != nil {
		p.lost = true
	}
}

// heartbeats reports whether the publisher sends the attempt's heartbeats
// (a live attempt does; no other heartbeat may overwrite its text).
func (p *callPublisher) heartbeats() bool { return p != nil && p.live != nil }

// cancelled: a live attempt's heartbeat said the call cancelled it.
func (p *callPublisher) cancelled() bool { return p != nil && p.live != nil && p.live.cancelled() }
