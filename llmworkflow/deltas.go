package llmworkflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

// ForwardActivity is the registered name of Forwarder.Forward.
const ForwardActivity = "llmworkflow.ForwardDeltas"

// forwardHeartbeat is how often Forward heartbeats while the call is
// quiet (a backoff, a slow first token).
const forwardHeartbeat = 10 * time.Second

// burstGap is how long Forward waits for the next item of the call's
// stream before it sends what it has: the items of one poll come back to
// back, so each poll's items (one batch of the call) go to the agent's
// stream in one signal.
const burstGap = 10 * time.Millisecond

// maxBurstBytes bounds the text of one batch sent to the agent's stream.
const maxBurstBytes = 512 << 10

// itemBytes is about what it weighs in a signal.
func itemBytes(it llmclient.StreamItem) int {
	n := 64
	if it.Delta != nil {
		n += len(it.Delta.Text)
		for _, tc := range it.Delta.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.Arguments) + len(tc.ID)
		}
	}
	if it.Event != nil {
		n += len(it.Event.Content) + len(it.Event.Reason)
		if it.Event.Result != nil {
			n += 4096 // its attempts
		}
	}
	return n
}

// maxSendTries bounds the sends of one batch before the activity fails
// (and is retried from its last heartbeat).
const maxSendTries = 5

// StreamItem is one item of a call that WithDeltasOn republishes on the
// agent's own workflow stream: a piece of the answer (Delta) or an event
// of the call (Event: attempt_started, waiting, replaced, done, failed,
// …; see docs/calling.md "Streaming").
//
// Items come in the order of the call's stream. Consecutive pieces of
// one attempt that arrived together are joined into one Delta. The text
// is exactly once: At is the number of bytes of the answer before
// Delta.Text, so a reader that has more (only after the forwarding
// activity was retried, when items since its last heartbeat come again)
// keeps the part past what it has; Answer does this.
type StreamItem struct {
	// Call is the call's workflow ID (CallResult.RequestID).
	Call string `json:"call"`
	// Offset is the offset in the call's stream of the last item this
	// one covers (the pieces of a live attempt, read from the worker that
	// runs it, share its live event's offset), or -1 for what was read
	// from the call's result (the call had ended before the rest of its
	// stream was read).
	Offset int64 `json:"offset"`
	// At is the answer's length in bytes before Delta.Text.
	At    int              `json:"at"`
	Delta *workflows.Delta `json:"delta,omitempty"`
	Event *workflows.Event `json:"event,omitempty"`
}

// Answer puts one call's answer together from its StreamItems, each byte
// once, as a reader of the agent's stream needs it. The zero value is
// ready; use one per call (StreamItem.Call).
type Answer struct {
	// Text is the answer so far; once Done it is the CallResult's
	// Content.
	Text string
	// Done: the call's done event (the answer is whole) or failed event
	// came.
	Done bool
	// Result is the done event's result (without its content: Text).
	Result *workflows.CallResult
	// lastEvent is the offset of the last event applied.
	lastEvent int64
	events    bool
}

// Add applies it and returns the text it adds to the answer (empty for an
// event or a repeat). replaced reports that the answer was replaced
// instead (hedge.replace: the first model's answer replaces the hedge's
// text shown so far): show Text anew.
func (a *Answer) Add(it StreamItem) (fresh string, replaced bool) {
	if e := it.Event; e != nil {
		if it.Offset >= 0 && a.events && it.Offset <= a.lastEvent {
			return "", false // a repeat
		}
		if it.Offset >= 0 {
			a.lastEvent, a.events = it.Offset, true
		}
		switch e.Type {
		case workflows.EventReplaced:
			a.Text = e.Content
			return "", true
		case workflows.EventDone:
			a.Done, a.Result = true, e.Result
		case workflows.EventFailed:
			a.Done = true
		}
		return "", false
	}
	if it.Delta == nil {
		return "", false
	}
	t := it.Delta.Text
	switch end := it.At + len(t); {
	case it.At > len(a.Text):
		// Never sent: a gap would mean a lost piece.
		return "", false
	case end <= len(a.Text):
		return "", false // had it already
	default:
		fresh = t[len(a.Text)-it.At:]
		a.Text += fresh
		return fresh, false
	}
}

// ForwardInput names the call whose stream Forward republishes, and the
// topic of the agent's stream it goes to.
type ForwardInput struct {
	WorkflowID string `json:"workflow_id"`
	Topic      string `json:"topic"`
	// Fingerprint and CheckFingerprint: as AttachInput's, for a call that
	// Call found already started under a named ID.
	Fingerprint      string `json:"fingerprint"`
	CheckFingerprint bool   `json:"check_fingerprint,omitempty"`
}

// ForwardResult says what Forward sent to the agent's stream.
type ForwardResult struct {
	// Items and Signals sent (each signal one batch of items).
	Items   int `json:"items"`
	Signals int `json:"signals"`
	// Bytes is the length of the answer's text forwarded.
	Bytes int `json:"bytes"`
}

// forwardProgress is Forward's heartbeat: where it resumes after a retry.
type forwardProgress struct {
	Next int64  `json:"next"`
	Seen string `json:"seen"`
}

// Forwarder republishes a streamed call's items on the stream of the
// workflow that runs it (WithDeltasOn): workflow code cannot subscribe to
// another workflow's stream, an activity can. It is safe for concurrent
// use.
type Forwarder struct {
	// Client reaches the namespace of the calls and of the agent.
	Client client.Client
}

// Forward follows the call's stream (llmclient.Client.Follow) from the
// start, or from its last heartbeat after a retry, and signals its items,
// as StreamItems, to the workflow stream of the workflow that scheduled
// it, the items of each poll in one batch. It returns once the call's
// done event has been accepted by that workflow, or the call ended
// without one (its failure is the call's to report).
func (f *Forwarder) Forward(ctx context.Context, in ForwardInput) (ForwardResult, error) {
	var out ForwardResult
	if in.CheckFingerprint {
		a := &Attacher{Client: f.Client}
		if err := a.check(ctx, AttachInput{WorkflowID: in.WorkflowID, Fingerprint: in.Fingerprint, CheckFingerprint: true}); err != nil {
			return out, err
		}
	}
	info := activity.GetInfo(ctx)
	var prog forwardProgress
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &prog); err != nil {
			prog = forwardProgress{}
		}
	}
	s := &sender{
		c: f.Client, workflowID: info.WorkflowExecution.ID, runID: info.WorkflowExecution.RunID,
		topic: in.Topic, call: in.WorkflowID,
		publisher: fmt.Sprintf("llmworkflow-%s-%d", info.ActivityID, info.Attempt),
		dc:        converter.GetDefaultDataConverter(),
	}
	s.text.WriteString(prog.Seen)
	s.next = prog.Next

	hctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	heartbeat := func() {
		mu.Lock()
		p := forwardProgress{Next: s.next, Seen: s.text.String()}
		mu.Unlock()
		activity.RecordHeartbeat(ctx, p)
	}
	go func() {
		t := time.NewTicker(forwardHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				heartbeat()
			}
		}
	}()

	// Follow runs in its own goroutine and hands its items over one by
	// one; this one gathers the items that come back to back (one poll's)
	// and sends them together.
	items := make(chan llmclient.StreamItem)
	followed := make(chan error, 1)
	fctx, cancelFollow := context.WithCancel(ctx)
	defer cancelFollow()
	lc := &llmclient.Client{Temporal: f.Client}
	go func() {
		_, err := lc.Follow(fctx, in.WorkflowID, prog.Next, prog.Seen, func(it llmclient.StreamItem) error {
			select {
			case items <- it:
				return nil
			case <-fctx.Done():
				return fctx.Err()
			}
		})
		followed <- err
	}()

	var burst []llmclient.StreamItem
	flush := func() error {
		if len(burst) == 0 {
			return nil
		}
		mu.Lock()
		err := s.send(ctx, burst)
		mu.Unlock()
		burst = burst[:0]
		if err != nil {
			return err
		}
		heartbeat()
		return nil
	}
	burstBytes := 0
	var gap *time.Timer
	var gapC <-chan time.Time
	for {
		select {
		case it := <-items:
			burst = append(burst, it)
			if burstBytes += itemBytes(it); burstBytes >= maxBurstBytes {
				// Within a signal's payload limit (2 MB by default).
				burstBytes = 0
				if err := flush(); err != nil {
					return out, err
				}
				continue
			}
			if gap == nil {
				gap = time.NewTimer(burstGap)
			} else {
				gap.Reset(burstGap)
			}
			gapC = gap.C
			continue
		case <-gapC:
			gapC, burstBytes = nil, 0
			if err := flush(); err != nil {
				return out, err
			}
			continue
		case err := <-followed:
			// Follow hands over each item before it returns: none is
			// left in the channel.
			if ferr := flush(); ferr != nil {
				return out, ferr
			}
			out = ForwardResult{Items: s.items, Signals: s.signals, Bytes: s.text.Len()}
			switch {
			case err == nil:
				return out, nil
			case ctx.Err() != nil:
				return out, ctx.Err()
			case !f.running(ctx, in.WorkflowID):
				// The call ended without an answer (failed, cancelled):
				// its stream's failed event, if it had one, is forwarded.
				return out, nil
			}
			return out, fmt.Errorf("follow LLM call %s: %w", in.WorkflowID, err)
		}
	}
}

// running reports whether call id still runs (or cannot be told: then it
// is taken to run, and Forward is retried).
func (f *Forwarder) running(ctx context.Context, id string) bool {
	d, err := f.Client.DescribeWorkflowExecution(ctx, id, "")
	return err != nil || d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// sender signals batches of StreamItems to the agent's stream in the
// Workflow Streams wire format, with a publisher id of its own (one per
// activity attempt) so that a resent batch is never appended twice.
type sender struct {
	c                 client.Client
	workflowID, runID string
	topic, call       string
	publisher         string
	seq               int64
	dc                converter.DataConverter
	// text is the answer so far, next the call's offset after the last
	// item sent: the progress a retry resumes from.
	text           strings.Builder
	next           int64
	items, signals int
}

// send turns the call's items into StreamItems (joining consecutive
// pieces of one attempt) and signals them in one batch.
func (s *sender) send(ctx context.Context, batch []llmclient.StreamItem) error {
	var out []StreamItem
	text := s.text.String()
	next := s.next
	for _, it := range batch {
		if it.Offset >= 0 {
			next = it.Offset + 1
		}
		switch {
		case it.Delta != nil:
			d := *it.Delta
			if n := len(out); n > 0 && joinable(out[n-1], d) {
				last := &out[n-1]
				joined := *last.Delta
				joined.Text += d.Text
				last.Delta, last.Offset = &joined, it.Offset
			} else {
				out = append(out, StreamItem{Call: s.call, Offset: it.Offset, At: len(text), Delta: &d})
			}
			text += d.Text
		case it.Event != nil:
			e := *it.Event
			if e.Type == workflows.EventReplaced {
				text = e.Content
			}
			out = append(out, StreamItem{Call: s.call, Offset: it.Offset, At: len(text), Event: &e})
		}
	}
	if len(out) > 0 {
		entries := make([]workflowstreams.PublishEntry, 0, len(out))
		for _, it := range out {
			p, err := s.dc.ToPayload(it)
			if err != nil {
				return temporal.NewNonRetryableApplicationError("encode a stream item: "+err.Error(), "llmworkflow_encode", err)
			}
			data, err := workflowstreams.EncodePayload(p)
			if err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), "llmworkflow_encode", err)
			}
			entries = append(entries, workflowstreams.PublishEntry{Topic: s.topic, Data: data})
		}
		in := workflowstreams.PublishInput{Items: entries, PublisherID: s.publisher, Sequence: s.seq + 1}
		var err error
		for try := 1; try <= maxSendTries; try++ {
			// The same sequence on every try: a batch that reached the
			// workflow and is sent again is dropped there.
			if err = s.c.SignalWorkflow(ctx, s.workflowID, s.runID, workflowstreams.PublishSignalName, in); err == nil {
				break
			}
			if ctx.Err() != nil || try == maxSendTries {
				return fmt.Errorf("signal the agent's stream: %w", err)
			}
			t := time.NewTimer(time.Duration(try) * 200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		s.seq++
		s.items += len(out)
		s.signals++
	}
	s.text.Reset()
	s.text.WriteString(text)
	s.next = next
	return nil
}

// joinable: d continues the piece last holds (same attempt and model,
// text only).
func joinable(last StreamItem, d workflows.Delta) bool {
	l := last.Delta
	return l != nil && l.Attempt == d.Attempt && l.Model == d.Model &&
		len(l.ToolCalls) == 0 && len(d.ToolCalls) == 0
}

// deltasTo is WithDeltasOn's setting.
type deltasTo struct {
	stream *workflowstreams.WorkflowStream
	topic  string
}

// WithDeltasOn streams the call (the request's Stream is set) and
// republishes its items live, as StreamItems, on stream, this workflow's
// own workflow stream (workflowstreams.NewWorkflowStream), under topic:
// an agent that streams to its own users has them subscribe to the
// agent's workflow, with any Workflow Streams client, and gets every
// turn's text there, in order, while the call runs. The Forward activity
// (Register it) follows the call's stream and signals the items over in
// one batch per batch of the call; Call returns once the call's done
// event is on stream, so the deltas of one turn all come before anything
// the agent publishes after it, and the text of the deltas is the
// CallResult's Content (see Answer for reading it). Keep the stream until
// its readers have the last items (WorkflowStream.Drain before the agent
// returns). Not with WithNexus: the call's stream is in another
// namespace.
func WithDeltasOn(stream *workflowstreams.WorkflowStream, topic string) Option {
	return func(o *options) { o.deltas = &deltasTo{stream: stream, topic: topic} }
}

// checkDeltas refuses a WithDeltasOn that cannot work.
func (o options) checkDeltas() error {
	switch d := o.deltas; {
	case d == nil:
		return nil
	case d.stream == nil:
		return invalidf("WithDeltasOn: no stream (host one with workflowstreams.NewWorkflowStream)")
	case d.topic == "":
		return invalidf("WithDeltasOn: no topic")
	case o.nexus != "":
		return invalidf("WithDeltasOn does not apply to a call through Nexus: its stream is in another namespace")
	}
	return nil
}

// forward starts the Forward activity for call id; its future is nil
// without WithDeltasOn.
func forward(ctx workflow.Context, id, fp string, named bool, req workflows.CallRequest, o options) workflow.Future {
	if o.deltas == nil {
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The call's whole execution timeout, and a minute to reach it.
		ScheduleToCloseTimeout: o.executionTimeout(req) + time.Minute,
		HeartbeatTimeout:       forwardHeartbeat * 3,
		Summary:                "deltas: forward LLM call " + id + " to topic " + o.deltas.topic,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{errKeyReused, "llmworkflow_encode"},
		},
	})
	in := ForwardInput{WorkflowID: id, Topic: o.deltas.topic, Fingerprint: fp, CheckFingerprint: named}
	return workflow.ExecuteActivity(actx, ForwardActivity, in)
}

// forwarded waits for the Forward activity after the call ended; a call
// that answered while its deltas could not all be forwarded is an error
// of Kind Failed that carries the answer (Result).
func forwarded(ctx workflow.Context, f workflow.Future, id string, res workflows.CallResult, err error) (workflows.CallResult, error) {
	if f == nil {
		return res, err
	}
	var out ForwardResult
	ferr := f.Get(ctx, &out)
	if err != nil || ferr == nil {
		return res, err
	}
	var appErr *temporal.ApplicationError
	if errors.As(ferr, &appErr) && appErr.Type() == errKeyReused {
		return res, &Error{Kind: KeyReused, CallID: id, Reason: appErr.Message(), Err: ErrKeyReused}
	}
	if temporal.IsCanceledError(ferr) {
		return res, typed(id, ferr)
	}
	r := res
	return res, &Error{Kind: Failed, CallID: id, Reason: "the call answered, but its deltas could not all be forwarded to the agent's stream: " + ferr.Error(), Result: &r, Err: ferr}
}
