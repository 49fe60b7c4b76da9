// Package workflowstreams implements Temporal's Workflow Streams protocol
// (public preview): a durable, offset-addressed event log hosted inside a
// workflow. Publishers append batches of items by signal, subscribers
// long-poll for items from an offset by update, and a query tells the
// current offset. It speaks the wire format of the official clients (the
// TypeScript @temporalio/workflow-streams, the Go contrib module
// go.temporal.io/sdk/contrib/workflowstreams, and the Python and .NET ones
// that share it), so they can publish to and subscribe to a stream hosted by
// a Go workflow; the tests run the TypeScript client against it.
//
// # Workflow side
//
// One call hosts the stream (it registers the signal, the update with its
// validator, and the query):
//
//	func MyWorkflow(ctx workflow.Context, in MyInput) (string, error) {
//		stream, err := workflowstreams.NewWorkflowStream(ctx, in.StreamState)
//		if err != nil {
//			return "", err
//		}
//		_ = stream.Topic("status").Publish("started")
//		// ... run activities that publish with NewClientFromActivity ...
//		if err := stream.Drain(ctx, time.Second); err != nil { // let subscribers catch up
//			return "", err
//		}
//		return result, nil
//	}
//
// For continue-as-new, return stream.NewContinueAsNewError(ctx, MyWorkflow,
// func(st *workflowstreams.WorkflowStreamState) []any { ... }) and put st in
// the next run's input (nil on a fresh start).
//
// # Publishing (activities, starters)
//
//	c, err := workflowstreams.NewClientFromActivity(ctx, workflowstreams.Options{})
//	if err != nil {
//		return err
//	}
//	defer c.Close(ctx)
//	tokens := c.Topic("tokens")
//	for tok := range stream {
//		tokens.Publish(tok, false)
//	}
//
// The first item after a quiet spell is signalled at once; items that follow
// within Options.BatchInterval (default 200 ms) go out together in one
// signal an interval after the previous one. Each batch carries the
// publisher's id and a sequence number; a batch that is resent after an
// error keeps both, and the workflow drops a batch whose sequence is not
// above the last one it took from that publisher, so a resend is never
// appended twice. Flush waits until everything published so far is
// accepted; Close stops the background sender and flushes.
//
// # Subscribing
//
//	for item, err := range c.Subscribe(ctx, workflowstreams.SubscribeOptions{Topics: []string{"tokens"}}) {
//		if err != nil {
//			return err
//		}
//		// item.Offset, item.Topic, item.Data (a *commonpb.Payload)
//	}
//	// the workflow has closed: read its result
//
// Offsets are global across topics. The loop ends without an error when the
// workflow closes, and follows continue-as-new.
//
// # Wire format
//
//   - Signal "__temporal_workflow_stream_publish", one argument:
//     {"items":[{"topic":T,"data":D}...],"publisher_id":P,"sequence":N}.
//     D is standard padded base64 of a protobuf-encoded
//     temporal.api.common.v1.Payload (the per-item payload keeps its own
//     encoding metadata; the data converter's codec runs only over the whole
//     signal, never per item). A batch is dropped whole when N is not above
//     the last sequence accepted from P (a missing P turns this off).
//   - Update "__temporal_workflow_stream_poll", argument
//     {"topics":[...],"from_offset":O} (empty topics: all; O = 0: the oldest
//     item kept), result {"items":[{"topic","data","offset"}...],
//     "next_offset":N,"more_ready":B}. The update parks until an item at or
//     after O exists; answers are cut at about 1 MB (more_ready: poll again
//     at once). Errors are ApplicationErrors of type TruncatedOffset (O was
//     truncated away: poll from 0) and, from the validator, StreamDraining
//     (the run is handing over to continue-as-new: poll again shortly).
//   - Query "__temporal_workflow_stream_offset": the offset of the next item.
//   - Continue-as-new input: {"log":[{"topic","data","offset":0}...],
//     "base_offset":N,"publisher_sequences":{P:N},"publisher_last_seen":{P:seconds}}.
//
// # Compatibility with go.temporal.io/sdk/contrib/workflowstreams
//
// These names have the same signatures and meaning as in the contrib module,
// so code that uses only them switches by changing the import path:
// PublishSignalName, PollUpdateName, OffsetQueryName, ErrTypeTruncatedOffset,
// ErrTypeTruncateOutOfRange, ErrTypeStreamDraining; the wire types
// PublishEntry, PublishInput, PollInput, WireItem, PollResult,
// WorkflowStreamState, WorkflowStreamItem; NewWorkflowStream,
// WorkflowStreamOption, WithPayloadConverters, WorkflowStream (Topic,
// DetachPollers, GetState, NewContinueAsNewError, Truncate),
// WorkflowTopicHandle (Name, Publish); Options (BatchInterval, MaxBatchSize,
// MaxRetryDuration, PayloadConverters), SubscribeOptions (Topics,
// FromOffset, PollCooldown), Client, NewClient, NewClientFromActivity,
// Client.Topic, Client.Flush, Client.Close, Client.GetOffset,
// Client.Subscribe, TopicHandle (Name, Publish, Subscribe), and
// FlushTimeoutError.
//
// Differences: the default BatchInterval is 200 ms, not 2 s, and the first
// item after a quiet spell is sent at once (the contrib module sends on a
// fixed tick); after a FlushTimeoutError the background sender goes on with
// later batches (the contrib one stops). The poll validator also refuses a
// negative from_offset. Additions that the contrib module lacks:
// WorkflowStream.Drain and WorkflowStream.Offset, Client.PublisherID,
// EncodePayload and DecodePayload, and the Default* constants; code that
// uses them needs a small change when switching.
//
// Batches that reached the workflow before workflow code publishes are
// appended before its items even when both are handled in one workflow task
// (say, an activity's last batch and then its completion); the contrib
// module takes batches in a coroutine blocked in Receive, which can run
// after the workflow code has published
// (TestActivitysLastBatchComesBeforeTheWorkflowsNextItem sets that case up).
// In workflow code nothing ranges over a map except one helper that sorts
// the publisher ids of a continue-as-new state (the package's single
// workflowcheck:ignore), and items are kept in their wire text, so a poll
// does not re-encode them.
//
// # History cost
//
// Measured on the dev server (TestHistoryCostPerBatchAndPoll):
//
//   - a publish batch: 4 events (WorkflowExecutionSignaled and the workflow
//     task that takes it: scheduled, started, completed), whatever its size;
//     fewer when it rides on a workflow task that runs anyway;
//   - a poll that finds items: 5 events (a workflow task,
//     WorkflowExecutionUpdateAccepted, WorkflowExecutionUpdateCompleted);
//   - a poll that parks: 4 events (a workflow task and UpdateAccepted), then
//     1 event (UpdateCompleted) in the workflow task of the batch that
//     answers it;
//   - a poll the validator refuses (StreamDraining, negative offset): 0;
//   - publishing from workflow code: 0 of its own.
//
// Each item's bytes are written once in the signal of its batch and once in
// each poll response that carries it. So a batch read by one live
// subscriber parked at the end of the log costs about 9 events (4 + 1 + the
// subscriber's next poll, 4), however many items it holds; the default
// 200 ms batch interval bounds a fast producer to about 5 batches a second.
// TestGoPublisherToGoSubscriberLive logs a whole run: 143 events for 122
// items in 11 batches read by two subscribers.
//
// # When the workflow completes
//
// The stream ends with its run: once the workflow returns, parked polls are
// failed by the server and later polls find the workflow closed; the
// client then describes the run, sees it closed and ends the subscription
// without an error. This package's Subscribe and the TypeScript client do
// so (both tested here), and the Go contrib client is written the same
// way. A subscriber that has not yet fetched the last items when the run
// ends would miss them, so call WorkflowStream.Drain(ctx, linger) just
// before returning: it waits until linger has passed since the last item
// was appended, which a live subscriber (polling every 100 ms plus a round
// trip) needs to fetch everything. Subscribers that must not wait for the run to close can stop
// on a last item of their own (say on a "done" topic).
package workflowstreams
