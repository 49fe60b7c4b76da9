package workflowstreams

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// Options configure a Client's publisher.
type Options struct {
	// BatchInterval is the least time between two sends: the first item
	// after a quiet spell is sent at once, later ones together one interval
	// after the previous send. Default DefaultBatchInterval (200 ms).
	BatchInterval time.Duration
	// MaxBatchSize sends at once when this many items wait; 0: no limit.
	MaxBatchSize int
	// MaxRetryDuration is how long a failing batch is retried before it is
	// dropped with a FlushTimeoutError. Keep it below the workflow's
	// publisher TTL (DefaultPublisherTTL) so that a resend is still
	// recognised after a continue-as-new. Default DefaultMaxRetryDuration.
	MaxRetryDuration time.Duration
	// PayloadConverters turn published values into payloads (combined in
	// order; put a catch-all such as the JSON converter last). Only payload
	// conversion happens per item, never the client's payload codec: that
	// runs once over the signal that carries the batch. Default: the
	// converters of converter.GetDefaultDataConverter.
	PayloadConverters []converter.PayloadConverter
}

// SubscribeOptions configure a subscription.
type SubscribeOptions struct {
	// Topics to receive; empty: all.
	Topics []string
	// FromOffset is the global offset to start at; 0 is the oldest item
	// kept. To resume, pass the last offset received plus one.
	FromOffset int64
	// PollCooldown is the least time between two polls (unless the last
	// answer said more items are ready). Default DefaultPollCooldown.
	PollCooldown time.Duration
}

// Client publishes to and subscribes to the stream of one workflow (by
// workflow id, so it follows continue-as-new) through a Temporal client.
// Publishing is batched in the background; call Close (or Flush) before the
// caller ends, e.g. `defer c.Close(ctx)` in an activity.
type Client struct {
	c          client.Client
	workflowID string
	pub        *publisher

	mu     sync.Mutex
	topics map[string]*TopicHandle
}

// NewClient returns a Client for the stream of workflow workflowID.
func NewClient(c client.Client, workflowID string, opts Options) *Client {
	var dc converter.DataConverter = converter.GetDefaultDataConverter()
	if len(opts.PayloadConverters) > 0 {
		dc = converter.NewCompositeDataConverter(opts.PayloadConverters...)
	}
	sc := &Client{c: c, workflowID: workflowID, topics: map[string]*TopicHandle{}}
	sc.pub = newPublisher(func(ctx context.Context, in PublishInput) error {
		return c.SignalWorkflow(ctx, workflowID, "", PublishSignalName, in)
	}, dc, opts)
	return sc
}

// NewClientFromActivity returns a Client for the stream of the workflow
// that scheduled the current activity, using the activity's Temporal client.
// A retried activity gets a new publisher id, so what it publishes again is
// new items, not resends.
func NewClientFromActivity(ctx context.Context, opts Options) (*Client, error) {
	info := activity.GetInfo(ctx)
	if info.WorkflowExecution.ID == "" {
		return nil, errors.New("workflowstreams: NewClientFromActivity needs an activity scheduled by a workflow; use NewClient with the workflow id")
	}
	return NewClient(activity.GetClient(ctx), info.WorkflowExecution.ID, opts), nil
}

// PublisherID is the id this Client's batches carry for deduplication.
func (c *Client) PublisherID() string { return c.pub.id }

// Topic returns the handle for one topic; the same name gives the same
// handle.
func (c *Client) Topic(name string) *TopicHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.topics[name]
	if !ok {
		h = &TopicHandle{name: name, client: c}
		c.topics[name] = h
	}
	return h
}

// Flush returns once everything published before the call has been
// accepted by the server (signal delivered), or with the first error. It
// also returns an error kept from the background sender (a dropped batch, an
// unconvertible value).
func (c *Client) Flush(ctx context.Context) error { return c.pub.flush(ctx) }

// Close stops the background sender and sends what is left, within ctx.
// Publishing after Close buffers without sending until the next Flush.
func (c *Client) Close(ctx context.Context) error { return c.pub.close(ctx) }

// GetOffset asks the workflow for the stream's current offset (the offset
// the next item will get).
func (c *Client) GetOffset(ctx context.Context) (int64, error) {
	v, err := c.c.QueryWorkflow(ctx, c.workflowID, "", OffsetQueryName)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := v.Get(&n); err != nil {
		return 0, err
	}
	return n, nil
}

// Subscribe long-polls the stream and yields its items in offset order,
// each once, as "Subscribing" in the package documentation shows. The
// sequence ends without an error when the workflow closes (completed,
// failed, canceled, terminated or timed out): read its result then. It
// follows continue-as-new to the next run, restarts at the oldest item kept
// after a truncation, and waits out a run's hand-over (StreamDraining). It
// yields an error (and ends) when ctx ends or a poll fails for another
// reason. Breaking out of the loop stops polling.
func (c *Client) Subscribe(ctx context.Context, opts SubscribeOptions) iter.Seq2[WorkflowStreamItem, error] {
	return func(yield func(WorkflowStreamItem, error) bool) {
		cooldown := opts.PollCooldown
		if cooldown <= 0 {
			cooldown = DefaultPollCooldown
		}
		topics := opts.Topics
		if topics == nil {
			topics = []string{} // the TypeScript workflow reads topics.length
		}
		offset := opts.FromOffset
		runID := "" // the run the last poll was admitted to
		for {
			res, admitted, err := c.poll(ctx, topics, offset)
			if admitted != "" {
				runID = admitted
			}
			if err != nil {
				if ctx.Err() != nil {
					yield(WorkflowStreamItem{}, ctx.Err())
					return
				}
				var appErr *temporal.ApplicationError
				if errors.As(err, &appErr) {
					switch appErr.Type() {
					case ErrTypeTruncatedOffset:
						offset = 0
						continue
					case ErrTypeStreamDraining:
						if !sleepCtx(ctx, cooldown) {
							yield(WorkflowStreamItem{}, ctx.Err())
							return
						}
						continue
					}
				}
				status, derr := c.runStatus(ctx, runID)
				switch {
				case derr != nil:
					yield(WorkflowStreamItem{}, fmt.Errorf("workflowstreams: poll %s: %w (and describing the run failed: %v)", c.workflowID, err, derr))
					return
				case status == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
					runID = "" // poll the latest run
					continue
				case status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
					return // the workflow closed: the stream is over
				}
				yield(WorkflowStreamItem{}, fmt.Errorf("workflowstreams: poll %s: %w", c.workflowID, err))
				return
			}
			for _, wi := range res.Items {
				p, err := DecodePayload(wi.Data)
				if err != nil {
					yield(WorkflowStreamItem{}, fmt.Errorf("workflowstreams: item at offset %d: %w", wi.Offset, err))
					return
				}
				if !yield(WorkflowStreamItem{Topic: wi.Topic, Data: p, Offset: wi.Offset}, nil) {
					return
				}
			}
			offset = res.NextOffset
			if !res.MoreReady && !sleepCtx(ctx, cooldown) {
				yield(WorkflowStreamItem{}, ctx.Err())
				return
			}
		}
	}
}

// poll sends one poll update and waits for its result. It asks the server
// to answer once the update is accepted so that the run it was admitted to
// is known even when that run closes before the update completes.
func (c *Client) poll(ctx context.Context, topics []string, from int64) (PollResult, string, error) {
	var res PollResult
	h, err := c.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   c.workflowID,
		UpdateName:   PollUpdateName,
		Args:         []any{PollInput{Topics: topics, FromOffset: from}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err != nil {
		return res, "", err
	}
	err = h.Get(ctx, &res)
	return res, h.RunID(), err
}

// runStatus describes runID ("" : the latest run). A run that continued as
// new says so only when described by its own id.
func (c *Client) runStatus(ctx context.Context, runID string) (enumspb.WorkflowExecutionStatus, error) {
	d, err := c.c.DescribeWorkflowExecution(ctx, c.workflowID, runID)
	if err != nil {
		return enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, err
	}
	return d.GetWorkflowExecutionInfo().GetStatus(), nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// TopicHandle publishes to and subscribes to one topic of a Client's stream.
type TopicHandle struct {
	name   string
	client *Client
}

// Name is the topic's name.
func (h *TopicHandle) Name() string { return h.name }

// Publish queues value for this topic; it is converted when its batch is
// made (a *commonpb.Payload is taken as it is). forceFlush sends without
// waiting for the batch interval; Publish itself never blocks.
func (h *TopicHandle) Publish(value any, forceFlush bool) {
	h.client.pub.publish(h.name, value, forceFlush)
}

// Subscribe is Client.Subscribe for this topic alone, from fromOffset.
func (h *TopicHandle) Subscribe(ctx context.Context, fromOffset int64) iter.Seq2[WorkflowStreamItem, error] {
	return h.client.Subscribe(ctx, SubscribeOptions{Topics: []string{h.name}, FromOffset: fromOffset})
}
