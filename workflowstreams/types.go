package workflowstreams

import (
	"time"

	commonpb "go.temporal.io/api/common/v1"
)

// The handler names of the protocol. They are fixed: the official clients
// send exactly these. The SDK reserves the "__temporal_" prefix but lets
// workflows register handlers under "__temporal_workflow_stream_".
const (
	// PublishSignalName is the signal that carries one batch of items
	// (a PublishInput) from a publisher into the workflow's log.
	PublishSignalName = "__temporal_workflow_stream_publish"
	// PollUpdateName is the update a subscriber sends (a PollInput) to
	// long-poll for items at or after an offset; it completes with a
	// PollResult.
	PollUpdateName = "__temporal_workflow_stream_poll"
	// OffsetQueryName is the query that returns the stream's current offset:
	// the offset the next published item will get.
	OffsetQueryName = "__temporal_workflow_stream_offset"
)

// The ApplicationError types of the protocol, as the official clients match
// them.
const (
	// ErrTypeTruncatedOffset fails a poll whose offset was truncated away.
	// Subscribers restart from offset 0, which means "the oldest item kept".
	ErrTypeTruncatedOffset = "TruncatedOffset"
	// ErrTypeTruncateOutOfRange is returned by WorkflowStream.Truncate for an
	// offset past the end of the log.
	ErrTypeTruncateOutOfRange = "TruncateOutOfRange"
	// ErrTypeStreamDraining rejects a poll (in the update validator, so it
	// costs no history) while the stream hands over to a continue-as-new
	// run. Every official client waits a cooldown and polls again, which
	// reaches the new run once the hand-over is done.
	ErrTypeStreamDraining = "StreamDraining"
)

// Defaults.
const (
	// DefaultBatchInterval is how long a Client's publisher waits after a
	// send before the next one: the first item after a quiet spell goes out
	// at once, the ones after it in one batch per interval.
	DefaultBatchInterval = 200 * time.Millisecond
	// DefaultPollCooldown is the least time between two polls of a
	// subscriber when the previous one did not say more items are ready
	// (the official clients use the same value).
	DefaultPollCooldown = 100 * time.Millisecond
	// DefaultMaxRetryDuration bounds how long one batch is retried before it
	// is dropped with a FlushTimeoutError. It must stay below the workflow's
	// publisher TTL (DefaultPublisherTTL) for a resent batch to still be
	// recognised after a continue-as-new.
	DefaultMaxRetryDuration = 10 * time.Minute
	// DefaultPublisherTTL is how long a publisher's last sequence number is
	// carried across continue-as-new after its last batch.
	DefaultPublisherTTL = 15 * time.Minute
)

// maxPollResponseBytes caps the estimated size of one poll response (base64
// data plus topic names); a longer answer is cut and says MoreReady. The
// official clients use the same cap.
const maxPollResponseBytes = 1_000_000

// PublishEntry is one item of a publish batch on the wire. Data is standard
// base64 (padded) of a marshaled temporal.api.common.v1.Payload.
type PublishEntry struct {
	Topic string `json:"topic"`
	Data  string `json:"data"`
}

// PublishInput is the argument of the publish signal: one batch. A batch
// whose Sequence is not above the last one accepted from the same
// PublisherID is a resend and is dropped whole; an empty PublisherID turns
// deduplication off for that batch.
type PublishInput struct {
	Items       []PublishEntry `json:"items"`
	PublisherID string         `json:"publisher_id"`
	Sequence    int64          `json:"sequence"`
}

// PollInput is the argument of the poll update: the topics wanted (empty:
// all) and the global offset to read from (0: the oldest item kept).
type PollInput struct {
	Topics     []string `json:"topics"`
	FromOffset int64    `json:"from_offset"`
}

// WireItem is one item of a poll response (and of a WorkflowStreamState
// log, where Offset is left 0 because it is the base offset plus the index).
// Data is base64 of a marshaled Payload, as in PublishEntry.
type WireItem struct {
	Topic  string `json:"topic"`
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
}

// PollResult is the result of the poll update: the matching items in offset
// order and the offset to poll from next. MoreReady says the answer was cut
// at the size cap and the rest can be fetched at once.
type PollResult struct {
	Items      []WireItem `json:"items"`
	NextOffset int64      `json:"next_offset"`
	MoreReady  bool       `json:"more_ready"`
}

// WorkflowStreamState is what a stream carries across continue-as-new: the
// kept log, the offset of its first item, and each recent publisher's last
// sequence number and when it was seen (Unix seconds), for deduplication.
type WorkflowStreamState struct {
	Log               []WireItem         `json:"log"`
	BaseOffset        int64              `json:"base_offset"`
	PublisherSeqs     map[string]int64   `json:"publisher_sequences"`
	PublisherLastSeen map[string]float64 `json:"publisher_last_seen"`
}

// WorkflowStreamItem is one item a subscription yields: its topic, its
// payload as published (decode it with a data converter, e.g.
// converter.GetDefaultDataConverter().FromPayload(item.Data, &v)), and its
// global offset.
type WorkflowStreamItem struct {
	Topic  string
	Data   *commonpb.Payload
	Offset int64
}
