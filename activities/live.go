package activities

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/livestream"
	"github.com/durable-llm/durable-llm/policies/request"
)

// Live is where a worker serves its attempts' text while they generate
// (package livestream), outside the call's history.
type Live struct {
	// Registry holds the attempts this process runs.
	Registry *livestream.Registry
	// URL is the base the followers reach Registry.Handler at
	// (http://host:port).
	URL string
	// Beat records an attempt's heartbeat and returns once the server has
	// it; default the worker's client (activity.GetClient), by the
	// attempt's task token. Tests replace it.
	Beat func(ctx context.Context, details Progress) error
}

// EventLive is the event a live attempt publishes on its call's stream
// first: where its text can be followed (URL).
const EventLive = "live"

// LiveEvent is EventLive's item on the event topic (workflows.Event's
// fields).
type LiveEvent struct {
	Type    string `json:"type"`
	Attempt int    `json:"attempt"`
	Model   string `json:"model"`
	URL     string `json:"url"`
}

// liveAttempt hands one attempt's text to its followers through the
// worker's live registry, each piece only once a heartbeat holding the text
// up to its end is confirmed by the server: a follower never has text the
// call would not continue after this worker is lost (the workflow reads
// the last heartbeat's text). The heartbeats are the attempt's own (it
// sends no other): one at once for the first text, then one when text is
// waiting and the gap since the last has passed (stream.batch_interval,
// longer against a slow server: checkpointShare), else one per every
// (beatTimes: at most a second, so that a cancel reaches the attempt in
// time; longer against a slow server, up to alive). Between heartbeats it
// holds a timer, not a goroutine.
type liveAttempt struct {
	reg      *livestream.Registry
	beat     func(context.Context, Progress) error
	ctx      context.Context // the heartbeats' (not cancelled with the attempt)
	attempt  int
	interval time.Duration
	every    time.Duration
	alive    time.Duration
	// cancel cuts the attempt when a heartbeat says the call cancelled it,
	// or that it is gone (beatStops).
	cancel func()

	mu        sync.Mutex
	att       *livestream.Attempt
	text      strings.Builder // the text received
	cuts      []int           // where each piece received ends in text, past confirmed
	tokens    int
	tools     json.RawMessage // tool calls to hand over once the text is
	confirmed int             // bytes of text the server holds, handed over
	toolsSent bool
	failed    error
	// The heartbeats' schedule: the next is due gap after last (text
	// waiting) or every after it (keep-alive; nextBeat of the last one's
	// round trip, rtt); timer fires it; busy while one is on its way;
	// stopped once the attempt closes.
	last    time.Time
	gap     time.Duration
	rtt     time.Duration
	timer   *time.Timer
	busy    bool
	stopped bool
	beats   sync.WaitGroup
}

// checkpointShare is the largest share of an attempt's time its
// checkpoints may spend waiting on the server: the next checkpoint waits at
// least (checkpointShare − 1) times the last one's round trip. A busy
// server answers heartbeats slowly, and then hears from each attempt less
// often (self-clocking, as TCP's acknowledgements pace a sender); the
// follower's text comes in larger pieces, not later as a whole.
const checkpointShare = 5

// newLiveAttempt registers an attempt and schedules its heartbeats.
func (a *Activities) newLiveAttempt(ctx context.Context, attempt int, heartbeatTimeout time.Duration, cancel func()) *liveAttempt {
	beat := a.live.Beat
	if beat == nil {
		info := activity.GetInfo(ctx)
		c := activity.GetClient(ctx)
		beat = func(bctx context.Context, p Progress) error {
			return c.RecordActivityHeartbeat(bctx, info.TaskToken, p)
		}
	}
	l := &liveAttempt{
		reg: a.live.Registry, att: a.live.Registry.Open(), beat: beat, ctx: context.WithoutCancel(ctx),
		attempt: attempt, cancel: cancel,
		interval: max(a.cfg.Stream.BatchInterval.D(), 10*time.Millisecond),
		last:     time.Now(), // gap 0: the first text goes at once
	}
	l.every, l.alive = beatTimes(heartbeatTimeout)
	if heartbeatTimeout <= 0 {
		l.every, l.alive = time.Hour, time.Hour
	}
	l.timer = time.AfterFunc(l.every, l.fire)
	return l
}

// addText takes a piece of the answer; tokens is the count so far.
func (l *liveAttempt) addText(t string, tokens int) {
	l.mu.Lock()
	l.text.WriteString(t)
	l.cuts = append(l.cuts, l.text.Len())
	l.tokens = max(l.tokens, tokens)
	l.scheduleLocked()
	l.mu.Unlock()
}

// addToolCalls takes the answer's tool calls, handed over after its text.
func (l *liveAttempt) addToolCalls(calls []request.ToolCall) {
	b, err := json.Marshal(calls)
	if err != nil {
		return
	}
	l.mu.Lock()
	l.tools = b
	l.scheduleLocked()
	l.mu.Unlock()
}

// scheduleLocked sets the timer to the next heartbeat (l.mu held): gap
// after the last when text is waiting, every after it otherwise. While a
// heartbeat is on its way, fire schedules the next when it returns.
func (l *liveAttempt) scheduleLocked() {
	if l.busy || l.stopped {
		return
	}
	l.timer.Reset(max(time.Until(l.dueLocked()), 0))
}

// dueLocked is when the next heartbeat is due (l.mu held).
func (l *liveAttempt) dueLocked() time.Time {
	after := nextBeat(l.every, l.alive, l.rtt)
	if l.pendingLocked() {
		after = min(after, l.gap)
	}
	return l.last.Add(after)
}

// fire sends a heartbeat (the timer's function) and schedules the next.
// A firing that is not due (the timer was reset while an earlier firing
// waited for the lock) only reschedules.
func (l *liveAttempt) fire() {
	l.mu.Lock()
	if l.busy || l.stopped {
		l.mu.Unlock()
		return
	}
	if time.Now().Before(l.dueLocked()) {
		l.scheduleLocked()
		l.mu.Unlock()
		return
	}
	l.busy = true
	l.beats.Add(1)
	l.mu.Unlock()
	defer l.beats.Done()
	start := time.Now()
	l.checkpoint(l.ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy, l.last, l.rtt = false, start, time.Since(start)
	l.gap = max(l.interval, (checkpointShare-1)*l.rtt)
	l.scheduleLocked()
}

// pending: text or tool calls not yet handed over.
func (l *liveAttempt) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pendingLocked()
}

func (l *liveAttempt) pendingLocked() bool {
	return l.failed == nil && (l.text.Len() > l.confirmed || (l.tools != nil && !l.toolsSent))
}

// checkpoint records a heartbeat with the text so far and, once the
// server has it, hands the new text (and tool calls) to the followers.
func (l *liveAttempt) checkpoint(ctx context.Context) bool {
	l.mu.Lock()
	if l.failed != nil {
		l.mu.Unlock()
		return false
	}
	text, tokens, tools := l.text.String(), l.tokens, l.tools
	l.mu.Unlock()
	bctx, cancel := context.WithTimeout(ctx, max(l.alive, time.Second))
	err := l.beat(bctx, Progress{Attempt: l.attempt, Tokens: tokens, Text: text, Live: true})
	cancel()
	if err != nil {
		if beatStops(err) {
			l.mu.Lock()
			l.failed = err
			l.mu.Unlock()
			l.cancel()
		}
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The pieces as they came (a chunk each for the caller, as the
	// upstream sent them), up to what the heartbeat holds.
	for len(l.cuts) > 0 && l.cuts[0] <= len(text) {
		l.att.Text(text[l.confirmed:l.cuts[0]])
		l.confirmed, l.cuts = l.cuts[0], l.cuts[1:]
	}
	if tools != nil && !l.toolsSent && l.confirmed == l.text.Len() {
		l.att.ToolCalls(tools)
		l.toolsSent = true
	}
	return true
}

// close stops the heartbeats, hands over what is left once a last
// heartbeat holds it, and ends the attempt for its followers. It reports
// whether every piece taken was handed over (the caller has seen the
// text, or will).
func (l *liveAttempt) close(ctx context.Context) bool {
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	l.mu.Unlock()
	l.beats.Wait()
	ok := !l.pending()
	for try := 0; !ok && try < 3 && ctx.Err() == nil; try++ {
		ok = l.checkpoint(context.WithoutCancel(ctx)) && !l.pending()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.att.End()
	return ok && l.failed == nil
}

// reopen ends the attempt's live stream, before any text, and opens
// another for it under a new id, which it returns; false once it has text
// (the stream then stays) or has closed. Its followers of the first see an empty
// attempt end and read on in the call's stream.
func (l *liveAttempt) reopen() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.text.Len() > 0 || l.tools != nil || l.stopped {
		return "", false // a closed attempt opens nothing that none would end
	}
	old := l.att
	l.att = l.reg.Open()
	old.End()
	return l.att.ID, true
}

// cancelled: a heartbeat said the call cancelled the attempt, or that it
// is gone (beatStops).
func (l *liveAttempt) cancelled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed != nil
}
