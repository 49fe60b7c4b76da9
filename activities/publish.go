package activities

import (
	"context"
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
type callPublisher struct {
	c       *workflowstreams.Client
	deltas  *workflowstreams.TopicHandle
	attempt int
	model   string
	any     bool
	closed  bool
	ok      bool
}

// publisher returns the attempt's publisher, nil when the caller did not
// ask to stream (or the stream cannot be reached: the answer then still
// comes in the result).
func (a *Activities) publisher(ctx context.Context, in CallInput, m config.ModelConfig) *callPublisher {
	if !in.Request.Stream {
		return nil
	}
	c, err := workflowstreams.NewClientFromActivity(ctx, workflowstreams.Options{BatchInterval: a.cfg.Stream.BatchInterval.D()})
	if err != nil {
		activity.GetLogger(ctx).Warn("no workflow stream: the answer comes in the result only", "error", err)
		return nil
	}
	return &callPublisher{c: c, deltas: c.Topic(TopicDelta), attempt: in.Attempt, model: m.Name}
}

// text publishes a piece of the answer: the first at once, later ones in
// batches.
func (p *callPublisher) text(t string) {
	if p == nil || t == "" || p.closed {
		return
	}
	p.deltas.Publish(Delta{Attempt: p.attempt, Model: p.model, Text: t}, false)
	p.any = true
}

// toolCalls publishes an answer's tool calls, whole, as one delta.
func (p *callPublisher) toolCalls(calls []request.ToolCall) {
	if p == nil || len(calls) == 0 || p.closed {
		return
	}
	p.deltas.Publish(Delta{Attempt: p.attempt, Model: p.model, ToolCalls: calls}, false)
	p.any = true
}

// close flushes what was published and stops the sender; it reports
// whether some text was published and all of it was accepted by the
// workflow (the caller has then seen it, or will).
func (p *callPublisher) close(ctx context.Context) bool {
	if p == nil {
		return false
	}
	if !p.closed {
		p.closed = true
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		p.ok = p.c.Close(fctx) == nil
	}
	return p.ok && p.any
}
