package llmclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durable-llm/durable-llm/livestream"
	"github.com/durable-llm/durable-llm/workflows"
	"github.com/durable-llm/durable-llm/workflowstreams"
)

// maxPollFailures and pollRetryWait bound how long Follow keeps polling
// a running call whose polls fail.
const (
	maxPollFailures = 20
	pollRetryWait   = 250 * time.Millisecond
)

// running reports whether call id is still running.
func (c *Client) running(ctx context.Context, id string) bool {
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// StreamItem is one item of a streamed call, with its offset in the call's
// stream: a piece of the answer (Delta) or an event (Event).
type StreamItem struct {
	Offset int64
	Delta  *workflows.Delta
	Event  *workflows.Event
}

// Stream starts the call with stream: true (or attaches to the call with
// the same key) and hands yield every item as it arrives; see Follow. It
// returns the call's result.
func (c *Client) Stream(ctx context.Context, req workflows.CallRequest, yield func(StreamItem) error) (workflows.CallResult, error) {
	req.Stream = true
	run, err := c.Start(ctx, req)
	if err != nil {
		return workflows.CallResult{}, err
	}
	return c.Follow(ctx, run.GetID(), 0, "", yield)
}

// yieldError is an error of the caller's yield, inside a live follow.
type yieldError struct{ err error }

func (e yieldError) Error() string { return e.err.Error() }

// liveClient follows live attempts: a worker that does not answer within
// a few seconds is taken for gone.
var liveClient = &http.Client{Transport: &http.Transport{
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	ResponseHeaderTimeout: 5 * time.Second,
	MaxIdleConnsPerHost:   64,
}}

// followLive hands yield the text of a live attempt (workflows.EventLive)
// as deltas at the event's offset, until the attempt ends. A connection
// cut before its end is resumed from the next piece, twice at most.
func (c *Client) followLive(ctx context.Context, ev workflows.Event, offset int64, text *strings.Builder, yield func(StreamItem) error) error {
	next := 0
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 && !sleepCtx(ctx, pollRetryWait) {
			return ctx.Err()
		}
		var ended bool
		ended, err = livestream.Follow(ctx, liveClient, ev.URL, next, func(p livestream.Piece) error {
			next = p.Index + 1
			d := &workflows.Delta{Attempt: ev.Attempt, Model: ev.Model, Text: p.Text}
			if len(p.ToolCalls) > 0 {
				if err := json.Unmarshal(p.ToolCalls, &d.ToolCalls); err != nil {
					return err
				}
			}
			text.WriteString(p.Text)
			if err := yield(StreamItem{Offset: offset, Delta: d}); err != nil {
				return yieldError{err}
			}
			return nil
		})
		var ye yieldError
		if ended || errors.As(err, &ye) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Follow subscribes to the stream of call id from offset from (0: the
// start; a reconnecting caller passes the last offset it got plus one)
// and hands yield each item in order until the call ends; textSoFar is
// the answer text the caller already has from earlier deltas ("" from the
// start). It returns at the done event, which carries the result, rather
// than when the call closes. The deltas a caller sees always add up to the
// content, but for a replaced event (hedge.replace), whose Content is the
// whole answer that replaces the text before it; "Following a call" in the
// package documentation says where the text comes from. A yield error
// stops the subscription and is returned.
func (c *Client) Follow(ctx context.Context, id string, from int64, textSoFar string, yield func(StreamItem) error) (workflows.CallResult, error) {
	var text strings.Builder
	text.WriteString(textSoFar)
	done := false
	missed := false // a live attempt's text could not be followed
	sc := workflowstreams.NewClient(c.Temporal, id, workflowstreams.Options{})
	dc := converter.GetDefaultDataConverter()
	next, failures := from, 0
	for again := true; again; {
		again = false
		for item, err := range sc.Subscribe(ctx, workflowstreams.SubscribeOptions{
			Topics: []string{workflows.TopicDelta, workflows.TopicEvent}, FromOffset: next,
		}) {
			if err != nil {
				// A poll refused for a while (the workflow's limit of updates
				// in flight, a network blip) is tried again from where it
				// stopped while the call runs; no stream to poll (a call
				// started without stream: true, or one that has ended): the
				// result tells the rest.
				failures++
				again = failures <= maxPollFailures && c.running(ctx, id) && sleepCtx(ctx, pollRetryWait)
				break
			}
			next, failures = item.Offset+1, 0
			si := StreamItem{Offset: item.Offset}
			switch item.Topic {
			case workflows.TopicDelta:
				si.Delta = new(workflows.Delta)
				if err := dc.FromPayload(item.Data, si.Delta); err != nil {
					return workflows.CallResult{}, fmt.Errorf("LLM call %s: stream item %d: %w", id, item.Offset, err)
				}
				text.WriteString(si.Delta.Text)
			case workflows.TopicEvent:
				si.Event = new(workflows.Event)
				if err := dc.FromPayload(item.Data, si.Event); err != nil {
					return workflows.CallResult{}, fmt.Errorf("LLM call %s: stream item %d: %w", id, item.Offset, err)
				}
				if si.Event.Type == workflows.EventLive {
					// The attempt's text, from the worker that runs it, in
					// deltas at this event's offset; the call's next events
					// wait on the stream meanwhile.
					if missed {
						continue
					}
					if err := c.followLive(ctx, *si.Event, item.Offset, &text, yield); err != nil {
						var ye yieldError
						if errors.As(err, &ye) {
							return workflows.CallResult{}, ye.err
						}
						if ctx.Err() != nil {
							return workflows.CallResult{}, ctx.Err()
						}
						// The worker is gone (or unreachable): the text it
						// handed later is not known here. Nothing more is
						// shown live; the rest comes from the result.
						missed = true
					}
					continue
				}
				end := si.Event.Type == workflows.EventDone || si.Event.Type == workflows.EventFailed
				if si.Event.Type == workflows.EventDone && si.Event.Bytes > 0 && si.Event.Bytes != text.Len() {
					// Resumed past a live attempt's event: its text is not
					// all here.
					missed = true
				}
				if end && missed {
					// The text is not all here: the end is told after the
					// rest, from the result, once the call closes.
					continue
				}
				done = done || end
				if si.Event.Type == workflows.EventReplaced {
					text.Reset()
					text.WriteString(si.Event.Content)
				}
			default:
				continue
			}
			if err := yield(si); err != nil {
				return workflows.CallResult{}, err
			}
			if si.Event != nil && si.Event.Result != nil {
				// The done event carries the result: the answer is complete
				// without waiting for the call to linger and close.
				res := *si.Event.Result
				res.Content = text.String()
				return res, nil
			}
		}
	}
	res, err := c.Result(ctx, id)
	if err != nil {
		return res, fmt.Errorf("LLM call %s: %w", id, err)
	}
	rest, ok := strings.CutPrefix(res.Content, text.String())
	switch {
	case ok && rest != "":
		if err := yield(StreamItem{Offset: -1, Delta: &workflows.Delta{Model: res.Model, Text: rest}}); err != nil {
			return res, err
		}
	case !ok:
		// The first model's answer replaced the text seen (hedge.replace).
		if err := yield(StreamItem{Offset: -1, Event: &workflows.Event{Type: workflows.EventReplaced, Model: res.Model, Content: res.Content}}); err != nil {
			return res, err
		}
	}
	if !done {
		usage := res.Usage
		err = yield(StreamItem{Offset: -1, Event: &workflows.Event{Type: workflows.EventDone, Source: res.Source, Degraded: res.Degraded, Reason: res.Reason, Usage: &usage}})
	}
	return res, err
}
