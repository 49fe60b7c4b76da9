package workflowstreams

import (
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// logEntry is one item of the log, kept in its wire text: it is checked once
// when it arrives and then served to every poll without re-encoding.
type logEntry struct {
	topic string
	data  string
}

// publisherMark is what deduplication remembers of one publisher.
type publisherMark struct {
	seq      int64
	lastSeen float64 // Unix seconds, workflow time
}

// WorkflowStream is the workflow side of a stream: an append-only log of
// (topic, payload) items that publishers add to by signal, subscribers read
// by update, and workflow code can publish to directly. Create it once, at the
// start of the workflow function, with NewWorkflowStream.
//
// Everything it does is workflow code: state changes only in the signal
// handler, the update handler and the methods below, time is workflow time,
// and nothing ranges over a map, so replays rebuild the same log.
type WorkflowStream struct {
	ctx       workflow.Context
	dc        converter.DataConverter
	logger    log.Logger
	publishCh workflow.ReceiveChannel

	log        []logEntry
	baseOffset int64 // offset of log[0]

	// Deduplication: the map is only looked up; pubIDs gives the order
	// GetState walks (first seen first).
	pubs   map[string]*publisherMark
	pubIDs []string

	detached   bool  // DetachPollers: every poll is refused
	lastAppend int64 // workflow time (Unix ns) of the last item appended

	topics map[string]*WorkflowTopicHandle

	// accept, when set, decides whether a publisher's batch joins the log.
	accept func(publisherID string) bool
}

// WorkflowStreamOption configures NewWorkflowStream.
type WorkflowStreamOption func(*workflowStreamConfig)

type workflowStreamConfig struct {
	payloadConverters []converter.PayloadConverter
}

// WithPayloadConverters sets how WorkflowTopicHandle.Publish turns values
// into payloads (combined in order, as converter.NewCompositeDataConverter
// does; put a catch-all such as the JSON converter last). Only payload
// conversion happens per item, never a payload codec: the worker's codec
// runs once over the poll response that carries the items. Default: the
// converters of converter.GetDefaultDataConverter.
func WithPayloadConverters(pcs ...converter.PayloadConverter) WorkflowStreamOption {
	return func(c *workflowStreamConfig) { c.payloadConverters = pcs }
}

// NewWorkflowStream hosts a stream in the current workflow: it registers the
// publish signal, the poll update (with a validator) and the offset query,
// and returns the stream for publishing from workflow code. priorState is
// nil on a fresh start and the state a previous run handed over through
// NewContinueAsNewError otherwise. Call it once per run, before anything
// that blocks.
func NewWorkflowStream(ctx workflow.Context, priorState *WorkflowStreamState, opts ...WorkflowStreamOption) (*WorkflowStream, error) {
	var cfg workflowStreamConfig
	for _, o := range opts {
		o(&cfg)
	}
	var dc converter.DataConverter = converter.GetDefaultDataConverter()
	if len(cfg.payloadConverters) > 0 {
		dc = converter.NewCompositeDataConverter(cfg.payloadConverters...)
	}
	s := &WorkflowStream{
		ctx:    ctx,
		dc:     dc,
		logger: workflow.GetLogger(ctx),
		pubs:   map[string]*publisherMark{},
		topics: map[string]*WorkflowTopicHandle{},
	}
	if err := s.restore(priorState); err != nil {
		return nil, err
	}

	s.publishCh = workflow.GetSignalChannelWithOptions(ctx, PublishSignalName, workflow.SignalChannelOptions{
		Description: "Workflow Streams: append a batch of items (deduplicated by publisher_id and sequence)",
	})
	// Batches wait in the signal channel until taken by takeBatches: here,
	// as soon as the coroutine runs, and before anything else that reads
	// or writes the log. No coroutine blocks in Receive, because a blocked
	// receiver would be handed the batch at once and append it only when
	// its turn comes, after workflow code that ran earlier in the same
	// workflow task had appended its own items: an activity's last batch
	// would land after what the workflow publishes when that activity
	// returns.
	bg, _ := workflow.NewDisconnectedContext(ctx) // lives as long as the run, even if canceled
	workflow.Go(bg, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return s.publishCh.Len() > 0 }); err != nil {
				return
			}
			s.takeBatches()
		}
	})

	if err := workflow.SetUpdateHandlerWithOptions(ctx, PollUpdateName, s.onPoll, workflow.UpdateHandlerOptions{
		Validator: s.validatePoll,
		// A poll parked at the end of the log when the run closes is meant
		// to end there: its subscriber sees the run closed and stops (or
		// follows the continue-as-new), so no "unfinished handler" warning.
		UnfinishedPolicy: workflow.HandlerUnfinishedPolicyAbandon,
		Description:      "Workflow Streams: long-poll for items at or after from_offset",
	}); err != nil {
		return nil, err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, OffsetQueryName, func() (int64, error) {
		return s.end(), nil
	}, workflow.QueryHandlerOptions{
		Description: "Workflow Streams: the offset the next item will get",
	}); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *WorkflowStream) restore(st *WorkflowStreamState) error {
	if st == nil {
		return nil
	}
	if st.BaseOffset < 0 {
		return fmt.Errorf("workflowstreams: prior state has a negative base offset %d", st.BaseOffset)
	}
	s.baseOffset = st.BaseOffset
	s.log = make([]logEntry, 0, len(st.Log))
	for i, it := range st.Log {
		if _, err := DecodePayload(it.Data); err != nil {
			return fmt.Errorf("workflowstreams: prior state item %d: %w", i, err)
		}
		s.log = append(s.log, logEntry{topic: it.Topic, data: it.Data})
	}
	for _, id := range sortedKeys(st.PublisherSeqs) {
		s.pubs[id] = &publisherMark{seq: st.PublisherSeqs[id], lastSeen: st.PublisherLastSeen[id]}
		s.pubIDs = append(s.pubIDs, id)
	}
	return nil
}

// sortedKeys returns the keys of m in ascending order. Ranging over a map
// visits keys in a random order, but the keys are sorted before anyone sees
// them, so the result is deterministic; workflowcheck cannot see the sort,
// hence the one ignore in this package.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	//workflowcheck:ignore the keys are sorted below
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Offset is the offset the next item will get: the base offset plus the
// number of items kept (what the offset query answers). It only reads, so
// query handlers and update validators may call it too.
func (s *WorkflowStream) Offset() int64 { return s.end() }

func (s *WorkflowStream) end() int64 { return s.baseOffset + int64(len(s.log)) }

// takeBatches appends the batches waiting in the signal channel, in the
// order they arrived.
func (s *WorkflowStream) takeBatches() {
	for {
		var in PublishInput
		if !s.publishCh.ReceiveAsync(&in) {
			return
		}
		s.onPublish(in)
	}
}

// Topic returns the handle for publishing to name from workflow code; the
// same name gives the same handle.
func (s *WorkflowStream) Topic(name string) *WorkflowTopicHandle {
	h, ok := s.topics[name]
	if !ok {
		h = &WorkflowTopicHandle{name: name, stream: s}
		s.topics[name] = h
	}
	return h
}

func (s *WorkflowStream) append(topic, data string) {
	s.log = append(s.log, logEntry{topic: topic, data: data})
	s.lastAppend = workflow.Now(s.ctx).UnixNano()
}

// SetPublishFilter makes the stream keep only the batches of publishers
// accept approves; the others are deduplicated as usual and dropped (nil:
// keep every batch). accept runs in workflow code, when batches are taken
// from the signal channel: it must be deterministic, and may read other
// channels (ReceiveAsync) but not block. A workflow that races two
// publishers uses it to keep only the winner's items.
func (s *WorkflowStream) SetPublishFilter(accept func(publisherID string) bool) { s.accept = accept }

func (s *WorkflowStream) onPublish(in PublishInput) {
	if in.PublisherID != "" {
		m := s.pubs[in.PublisherID]
		last := int64(0)
		if m != nil {
			last = m.seq
		}
		if in.Sequence <= last {
			return // a resend of a batch already in the log (or older)
		}
		if m == nil {
			m = &publisherMark{}
			s.pubs[in.PublisherID] = m
			s.pubIDs = append(s.pubIDs, in.PublisherID)
		}
		m.seq = in.Sequence
		m.lastSeen = unixSeconds(workflow.Now(s.ctx))
	}
	if s.accept != nil && !s.accept(in.PublisherID) {
		return
	}
	for i, e := range in.Items {
		if _, err := DecodePayload(e.Data); err != nil {
			// A signal cannot be refused; an item no subscriber could
			// decode is left out rather than served.
			s.logger.Warn("workflowstreams: dropped a published item that is not a base64 Payload",
				"PublisherID", in.PublisherID, "Sequence", in.Sequence, "Item", i, "Error", err)
			continue
		}
		s.append(e.Topic, e.Data)
	}
}

// validatePoll runs before a poll is admitted; refusing here costs no
// history event.
func (s *WorkflowStream) validatePoll(_ workflow.Context, in PollInput) error {
	if s.detached {
		return temporal.NewNonRetryableApplicationError(
			"the stream is handing over to a new run (continue-as-new); poll again", ErrTypeStreamDraining, nil)
	}
	if in.FromOffset < 0 {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("from_offset %d is negative", in.FromOffset), "InvalidOffset", nil)
	}
	return nil
}

func (s *WorkflowStream) truncatedAway(from int64) bool { return from != 0 && from < s.baseOffset }

func (s *WorkflowStream) onPoll(ctx workflow.Context, in PollInput) (PollResult, error) {
	s.takeBatches()
	// Park until there is an item at or after the offset, the offset was
	// truncated away, or the stream hands over to a new run. The condition
	// reads the base offset afresh: Truncate may move it while parked.
	if err := workflow.Await(ctx, func() bool {
		return s.detached || s.truncatedAway(in.FromOffset) || s.end() > max(in.FromOffset, s.baseOffset)
	}); err != nil {
		return PollResult{}, err
	}
	if s.truncatedAway(in.FromOffset) {
		return PollResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("offset %d was truncated; the oldest item kept has offset %d", in.FromOffset, s.baseOffset),
			ErrTypeTruncatedOffset, nil)
	}
	return s.read(in.FromOffset, in.Topics), nil
}

// read answers a poll from offset from: matching items up to the size cap.
func (s *WorkflowStream) read(from int64, topics []string) PollResult {
	res := PollResult{Items: []WireItem{}, NextOffset: s.end()}
	size := 0
	for i := max(from-s.baseOffset, 0); i < int64(len(s.log)); i++ {
		e := s.log[i]
		if len(topics) > 0 && !slices.Contains(topics, e.topic) {
			continue
		}
		n := len(e.data) + len(e.topic)
		if size+n > maxPollResponseBytes && len(res.Items) > 0 {
			res.NextOffset, res.MoreReady = s.baseOffset+i, true
			break
		}
		size += n
		res.Items = append(res.Items, WireItem{Topic: e.topic, Data: e.data, Offset: s.baseOffset + i})
	}
	return res
}

// Drain lets subscribers catch up before the workflow returns: call it as
// the last thing before returning, as the package documentation shows. It
// waits until linger has passed since the last item was appended (not since
// Drain was called, so a stream that has been quiet for linger returns at
// once); a subscriber that polls at least that often has then fetched every
// item. Items that arrive while it waits restart the wait. Polls parked at
// the end of the log stay parked: when the run completes the server fails
// them, and the clients (this package's, the TypeScript one) see the run
// closed and end their subscriptions cleanly. Each wait is one timer
// (TimerStarted and TimerFired events); none when the stream was already
// quiet.
func (s *WorkflowStream) Drain(ctx workflow.Context, linger time.Duration) error {
	for {
		s.takeBatches()
		wait := time.Duration(s.lastAppend+int64(linger)-workflow.Now(ctx).UnixNano()) * time.Nanosecond
		if s.lastAppend == 0 || wait <= 0 {
			return nil
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// DetachPollers ends every parked poll (with the items it can have, often
// none) and refuses new ones with a StreamDraining error, which clients
// answer by polling again shortly. It is the first step of a continue-as-new
// hand-over; NewContinueAsNewError does it for you.
func (s *WorkflowStream) DetachPollers() { s.detached = true }

// GetState returns the stream's state to hand to the next run: the kept log,
// the base offset, and the deduplication marks of the publishers seen within
// publisherTTL (older ones are forgotten).
func (s *WorkflowStream) GetState(publisherTTL time.Duration) (*WorkflowStreamState, error) {
	s.takeBatches()
	now := unixSeconds(workflow.Now(s.ctx))
	st := &WorkflowStreamState{
		Log:               make([]WireItem, 0, len(s.log)),
		BaseOffset:        s.baseOffset,
		PublisherSeqs:     map[string]int64{},
		PublisherLastSeen: map[string]float64{},
	}
	for _, e := range s.log {
		st.Log = append(st.Log, WireItem{Topic: e.topic, Data: e.data})
	}
	for _, id := range s.pubIDs {
		m := s.pubs[id]
		if now-m.lastSeen < publisherTTL.Seconds() {
			st.PublisherSeqs[id] = m.seq
			st.PublisherLastSeen[id] = m.lastSeen
		}
	}
	return st, nil
}

// NewContinueAsNewError hands the stream over to a new run: it detaches the
// pollers, waits until every handler has finished, takes the state (with
// DefaultPublisherTTL) and returns workflow.NewContinueAsNewError(ctx, wfn,
// buildArgs(state)...). Return its result from the workflow function; put
// the state in the new run's input and pass it to NewWorkflowStream there.
// Subscribers of this package and the official ones follow the new run.
func (s *WorkflowStream) NewContinueAsNewError(ctx workflow.Context, wfn any, buildArgs func(state *WorkflowStreamState) []any) error {
	s.DetachPollers()
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	st, err := s.GetState(DefaultPublisherTTL)
	if err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, wfn, buildArgs(st)...)
}

// Truncate forgets the items before offset upTo, to bound the workflow's
// memory and continue-as-new input. A later poll from a forgotten offset
// fails with TruncatedOffset and the official clients restart from the
// oldest item kept. upTo past the end is a non-retryable TruncateOutOfRange
// error; upTo at or before the base offset does nothing.
func (s *WorkflowStream) Truncate(upToOffset int64) error {
	s.takeBatches()
	n := upToOffset - s.baseOffset
	if n <= 0 {
		return nil
	}
	if n > int64(len(s.log)) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cannot truncate to offset %d: the stream ends at offset %d", upToOffset, s.end()),
			ErrTypeTruncateOutOfRange, nil)
	}
	s.log = slices.Clone(s.log[n:])
	s.baseOffset = upToOffset
	return nil
}

// WorkflowTopicHandle publishes to one topic from workflow code.
type WorkflowTopicHandle struct {
	name   string
	stream *WorkflowStream
}

// Name is the topic's name.
func (h *WorkflowTopicHandle) Name() string { return h.name }

// Publish appends value to the stream under this topic; subscribers parked
// on the end of the log get it in the same workflow task. value goes through
// the stream's payload converters; a *commonpb.Payload is taken as it is.
// Publishing costs no history event of its own: the item reaches history
// only inside the poll responses that carry it.
func (h *WorkflowTopicHandle) Publish(value any) error {
	p, ok := value.(*commonpb.Payload)
	if !ok {
		var err error
		if p, err = h.stream.dc.ToPayload(value); err != nil {
			return fmt.Errorf("workflowstreams: topic %q: convert value: %w", h.name, err)
		}
	}
	data, err := EncodePayload(p)
	if err != nil {
		return err
	}
	h.stream.takeBatches() // batches that arrived first come first
	h.stream.append(h.name, data)
	return nil
}

// Each calls fn with the items of this topic from offset from on, in
// order, each with a decode that converts it into a value (as the
// stream's payload converters do), until fn returns false. It reads the
// workflow's own state, so workflow code may call it: a workflow can learn
// what activities published on its stream (what a lost attempt streamed
// before its worker died, say). Items truncated away are not seen.
func (h *WorkflowTopicHandle) Each(from int64, fn func(offset int64, decode func(valuePtr any) error) bool) {
	s := h.stream
	s.takeBatches()
	for i := max(from-s.baseOffset, 0); i < int64(len(s.log)); i++ {
		e := s.log[i]
		if e.topic != h.name {
			continue
		}
		decode := func(valuePtr any) error {
			p, err := DecodePayload(e.data)
			if err != nil {
				return err
			}
			return s.dc.FromPayload(p, valuePtr)
		}
		if !fn(s.baseOffset+i, decode) {
			return
		}
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
