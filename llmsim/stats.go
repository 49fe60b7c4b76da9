package llmsim

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// BucketWidth is the width of one stats bucket.
const BucketWidth = 100 * time.Millisecond

// maxConversationRequests caps the attempts listed per conversation (the
// count itself is exact).
const maxConversationRequests = 16

// Outcomes recorded in Counts.Responses besides HTTP status codes.
const (
	// OutcomeClientGone: the client gave up before the response began
	// (nginx's 499).
	OutcomeClientGone = "499"
	// OutcomeReset: the simulator reset the connection.
	OutcomeReset = "reset"
)

// Stats is a snapshot of what the simulator saw since the last reset.
// Every count is exact: each request (chat completions or messages, see
// Wire) is one arrival, ends in exactly one entry of Responses, and sits
// in the bucket of the instant (on the simulator's clock) it happened.
type Stats struct {
	// Scenario is the current scenario's name.
	Scenario string `json:"scenario"`
	// Phase is the name of the phase active now ("" outside phases).
	Phase string `json:"phase"`
	// Start is when stats were last reset.
	Start time.Time `json:"start"`
	// ElapsedMS is the time since Start.
	ElapsedMS int64 `json:"elapsed_ms"`
	// BucketMS is the bucket width in milliseconds (100).
	BucketMS int64 `json:"bucket_ms"`
	// Totals over all models.
	Totals Counts `json:"totals"`
	// Models holds the counts per model name (as requested).
	Models map[string]Counts `json:"models"`
	// Buckets holds the counts per 100 ms, from Start to the last event.
	Buckets []Bucket `json:"buckets,omitempty"`
	// Faults counts injected faults by name.
	Faults map[string]int `json:"faults"`
	// Conversations holds the attempts per conversation key (the
	// Idempotency-Key before its last '/', else a hash of the last user
	// message).
	Conversations map[string]Conversation `json:"conversations,omitempty"`
	// Generations lists what the most recent answers generated, oldest
	// first; only in GET /stats?generations=1 (see Sim.Generations).
	Generations []Generation `json:"generations,omitempty"`
}

// Generation is what one request that got a slot generated and how much
// of it reached the client (GET /stats?generations=1, Sim.Generations).
// Text[:SentBytes] is the content the client received.
type Generation struct {
	// AtMS is the arrival in milliseconds since Stats.Start.
	AtMS int64 `json:"at_ms"`
	// Conversation is the conversation key, Attempt the attempt's number
	// in it.
	Conversation string `json:"conversation"`
	Attempt      int    `json:"attempt"`
	// RequestID is the X-Request-ID header (or one the simulator made up).
	RequestID string `json:"request_id,omitempty"`
	// Model requested; Stream reports stream: true.
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	// Wire is the API the request came by (openai or anthropic).
	Wire Wire `json:"wire,omitempty"`
	// Continuation reports a request that continued its last assistant
	// message; Prefix is that message's text, PrefixMatched whether it was
	// the beginning of the model's answer (else the model went on from the
	// same token position).
	Continuation  bool   `json:"continuation,omitempty"`
	Prefix        string `json:"prefix,omitempty"`
	PrefixMatched bool   `json:"prefix_matched,omitempty"`
	// Reasoning is the reasoning_content generated (reasoning models).
	Reasoning string `json:"reasoning,omitempty"`
	// Text is the content generated: for a continuation, only the new
	// text (the prefix is not repeated).
	Text string `json:"text"`
	// CompletionTokens is the usage's completion_tokens.
	CompletionTokens int `json:"completion_tokens"`
	// FinishReason is the finish_reason of the answer generated (whether
	// or not the client got it).
	FinishReason string `json:"finish_reason"`
	// SentBytes and SentTokens measure the prefix of Text the client
	// received: all of it for a complete answer, what was streamed before
	// a cut, error or stall, 0 for a non-streamed answer that did not
	// arrive whole.
	SentBytes  int `json:"sent_bytes"`
	SentTokens int `json:"sent_tokens"`
	// End says how the answer ended: done, client_gone, error,
	// stream_break, cut_stream, stream_error or stall.
	End string `json:"end"`
	// Fault is the injected fault, if any.
	Fault Fault `json:"fault,omitempty"`
	// ToolCalls are the tool calls answered (Text is then empty).
	ToolCalls []GeneratedToolCall `json:"tool_calls,omitempty"`
	// PromptTokens is the usage's prompt_tokens.
	PromptTokens int `json:"prompt_tokens,omitempty"`
	// Summary: the request asked for a summary (see Summarize).
	Summary bool `json:"summary,omitempty"`
	// Recall is the fact a [[sim recall=…]] asked about; Recalled whether
	// another message of the request held it.
	Recall   string `json:"recall,omitempty"`
	Recalled bool   `json:"recalled,omitempty"`
	// Temperature as the request sent it; Last is the text of the
	// request's last message (a client's note on a rejected answer shows
	// here); Extra are the top-level request fields the simulator does not
	// know, as received (provider-specific passthrough fields).
	Temperature *float64                   `json:"temperature,omitempty"`
	Last        string                     `json:"last,omitempty"`
	Extra       map[string]json.RawMessage `json:"extra,omitempty"`
	// TTFT, ITL and Service are the schedule: the time to first token and
	// the inter-token latency (load factor and latency faults included) and
	// the generation time TTFT + CompletionTokens × ITL.
	TTFT    Duration `json:"ttft"`
	ITL     Duration `json:"itl"`
	Service Duration `json:"service"`
}

// GeneratedToolCall is a tool call the simulator answered with.
type GeneratedToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Sent returns the content the client received: Text[:SentBytes].
func (g Generation) Sent() string { return g.Text[:min(g.SentBytes, len(g.Text))] }

// Answer returns the whole answer this generation completes: Prefix +
// Text for a continuation, else Text.
func (g Generation) Answer() string { return g.Prefix + g.Text }

// Counts are the counters of one model, of all models, or of one bucket.
type Counts struct {
	// Arrivals is the number of requests received (both wires).
	Arrivals int `json:"arrivals"`
	// Completions is the number of requests whose simulated work finished
	// (including work that went on after the client gave up).
	Completions int `json:"completions"`
	// Rejected is the number of requests refused by the capacity model
	// (queue full).
	Rejected int `json:"rejected"`
	// Abandoned is the number of requests whose client went away before the
	// response was complete.
	Abandoned int `json:"abandoned"`
	// Responses counts what clients got: HTTP status codes ("200", "429"),
	// OutcomeClientGone ("499") and OutcomeReset ("reset").
	Responses map[string]int `json:"responses"`
	// InFlight is the number of requests holding a slot (at the end of the
	// bucket, or now).
	InFlight int `json:"in_flight"`
	// Queued is the number of requests waiting for a slot.
	Queued int `json:"queued"`
	// PeakInFlight is the largest InFlight seen (in the bucket, or since
	// reset).
	PeakInFlight int `json:"peak_in_flight"`
	// PeakQueued is the largest Queued seen.
	PeakQueued int `json:"peak_queued"`
}

// Bucket holds the counts of one 100 ms interval.
type Bucket struct {
	// StartMS is the bucket's start in milliseconds since Stats.Start.
	StartMS int64 `json:"t_ms"`
	Counts
	// Models holds the bucket's counts per model.
	Models map[string]Counts `json:"models,omitempty"`
}

// Conversation is the attempt history of one conversation key.
type Conversation struct {
	// Attempts is the number of requests with this key.
	Attempts int `json:"attempts"`
	// Requests lists the first attempts (at most 16).
	Requests []Attempt `json:"requests,omitempty"`
}

// Attempt is one request of a conversation.
type Attempt struct {
	// N numbers the attempts of the conversation from 1.
	N int `json:"n"`
	// AtMS is the arrival in milliseconds since Stats.Start.
	AtMS int64 `json:"at_ms"`
	// Model requested.
	Model string `json:"model"`
	// Wire is the API the request came by (openai or anthropic).
	Wire Wire `json:"wire,omitempty"`
	// RequestID is the X-Request-ID header (or one the simulator made up).
	RequestID string `json:"request_id,omitempty"`
	// IdempotencyKey is the Idempotency-Key header.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Outcome is the entry of Responses the request ended in ("" while it
	// runs).
	Outcome string `json:"outcome"`
	// Fault is the injected fault, if any.
	Fault Fault `json:"fault,omitempty"`
}

// Amplification returns attempts per logical call: total arrivals divided
// by the number of distinct conversations (0 when there are none).
func (s Stats) Amplification() float64 {
	if len(s.Conversations) == 0 {
		return 0
	}
	return float64(s.Totals.Arrivals) / float64(len(s.Conversations))
}

// PeakToMean returns the largest bucket's arrivals divided by the mean
// arrivals per bucket, over the buckets from the first to the last with an
// arrival (0 without arrivals).
func (s Stats) PeakToMean() float64 {
	first, last := -1, -1
	for i, b := range s.Buckets {
		if b.Arrivals > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return 0
	}
	peak, sum := 0, 0
	for _, b := range s.Buckets[first : last+1] {
		peak = max(peak, b.Arrivals)
		sum += b.Arrivals
	}
	return float64(peak) / (float64(sum) / float64(last-first+1))
}

// recorder accumulates Stats; safe for concurrent use.
type recorder struct {
	mu     sync.Mutex
	clock  func() time.Time
	gen    int // bumped by reset, so late updates to old attempts are dropped
	start  time.Time
	totals Counts
	models map[string]*Counts
	bucket []*Bucket
	faults map[string]int
	convs  map[string]*Conversation
	// gauges survive resets: they describe work in progress.
	gauges map[string][2]int
	// gens holds the last keepGens generations (none when keepGens < 0).
	gens     []Generation
	keepGens int
}

func newRecorder(clock func() time.Time) *recorder {
	r := &recorder{clock: clock, gauges: map[string][2]int{}}
	r.reset()
	return r
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.start = r.clock()
	r.totals = Counts{Responses: map[string]int{}}
	r.models = map[string]*Counts{}
	r.bucket = nil
	r.faults = map[string]int{}
	r.convs = map[string]*Conversation{}
	r.gens = nil
	var in, q int
	for m, g := range r.gauges {
		c := r.model(m)
		c.InFlight, c.Queued, c.PeakInFlight, c.PeakQueued = g[0], g[1], g[0], g[1]
		in += g[0]
		q += g[1]
	}
	r.totals.InFlight, r.totals.Queued, r.totals.PeakInFlight, r.totals.PeakQueued = in, q, in, q
}

func (r *recorder) model(name string) *Counts {
	c := r.models[name]
	if c == nil {
		c = &Counts{Responses: map[string]int{}}
		r.models[name] = c
	}
	return c
}

// at returns the bucket of t, creating it and the ones before it; new
// buckets start with the current gauges.
func (r *recorder) at(t time.Time) *Bucket {
	i := 0
	if d := t.Sub(r.start); d > 0 {
		i = int(d / BucketWidth)
	}
	for len(r.bucket) <= i {
		b := &Bucket{StartMS: int64(len(r.bucket)) * BucketWidth.Milliseconds(), Counts: Counts{Responses: map[string]int{}}}
		b.InFlight, b.Queued = r.totals.InFlight, r.totals.Queued
		b.PeakInFlight, b.PeakQueued = b.InFlight, b.Queued
		for m, c := range r.models {
			if c.InFlight > 0 || c.Queued > 0 {
				if b.Models == nil {
					b.Models = map[string]Counts{}
				}
				b.Models[m] = Counts{Responses: map[string]int{}, InFlight: c.InFlight, Queued: c.Queued, PeakInFlight: c.InFlight, PeakQueued: c.Queued}
			}
		}
		r.bucket = append(r.bucket, b)
	}
	return r.bucket[i]
}

// update applies f to the totals, the model, the bucket and the bucket's
// model entry.
func (r *recorder) update(t time.Time, model string, f func(c *Counts)) {
	f(&r.totals)
	f(r.model(model))
	b := r.at(t)
	f(&b.Counts)
	if b.Models == nil {
		b.Models = map[string]Counts{}
	}
	mc, ok := b.Models[model]
	if !ok {
		mc.Responses = map[string]int{}
		if g, ok := r.models[model]; ok {
			mc.InFlight, mc.Queued, mc.PeakInFlight, mc.PeakQueued = g.InFlight, g.Queued, g.InFlight, g.Queued
		}
	}
	f(&mc)
	b.Models[model] = mc
}

// ticket identifies one request's attempt entry for later updates.
type ticket struct {
	gen   int
	conv  string
	index int // into Conversation.Requests, -1 when not listed
	model string
}

// arrive records an arrival and returns the attempt number within conv and
// a ticket for the outcome.
func (r *recorder) arrive(model, conv string, a Attempt) (int, ticket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.clock()
	r.update(t, model, func(c *Counts) { c.Arrivals++ })
	tk := ticket{gen: r.gen, conv: conv, index: -1, model: model}
	if conv == "" {
		return 0, tk
	}
	cv := r.convs[conv]
	if cv == nil {
		cv = &Conversation{}
		r.convs[conv] = cv
	}
	cv.Attempts++
	if len(cv.Requests) < maxConversationRequests {
		a.N = cv.Attempts
		a.AtMS = t.Sub(r.start).Milliseconds()
		cv.Requests = append(cv.Requests, a)
		tk.index = len(cv.Requests) - 1
	}
	return cv.Attempts, tk
}

// respond records the outcome of a request.
func (r *recorder) respond(tk ticket, outcome string, fault Fault, rejected, abandoned bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tk.gen != r.gen {
		return
	}
	r.update(r.clock(), tk.model, func(c *Counts) {
		c.Responses[outcome]++
		if rejected {
			c.Rejected++
		}
		if abandoned {
			c.Abandoned++
		}
	})
	if fault != FaultNone {
		r.faults[string(fault)]++
	}
	if cv := r.convs[tk.conv]; cv != nil && tk.index >= 0 && tk.index < len(cv.Requests) {
		cv.Requests[tk.index].Outcome = outcome
		cv.Requests[tk.index].Fault = fault
	}
}

// abandon marks a request whose client left after its response began.
func (r *recorder) abandon(tk ticket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tk.gen != r.gen {
		return
	}
	r.update(r.clock(), tk.model, func(c *Counts) { c.Abandoned++ })
}

// generation records what a request arrived at arrival generated.
func (r *recorder) generation(tk ticket, arrival time.Time, g Generation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tk.gen != r.gen || r.keepGens < 0 {
		return
	}
	g.AtMS = arrival.Sub(r.start).Milliseconds()
	r.gens = append(r.gens, g)
	if len(r.gens) >= 2*r.keepGens {
		r.gens = slices.Clone(r.gens[len(r.gens)-r.keepGens:])
	}
}

// generations returns the kept generations of conv ("" for all).
func (r *recorder) generations(conv string) []Generation {
	r.mu.Lock()
	defer r.mu.Unlock()
	gens := r.gens
	if r.keepGens < 0 {
		return nil
	}
	if len(gens) > r.keepGens {
		gens = gens[len(gens)-r.keepGens:]
	}
	var out []Generation
	for _, g := range gens {
		if conv == "" || g.Conversation == conv {
			out = append(out, g)
		}
	}
	return out
}

// complete records the end of a request's simulated work.
func (r *recorder) complete(model string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.update(r.clock(), model, func(c *Counts) { c.Completions++ })
}

// gauge records the in-flight and queued counts of a model.
func (r *recorder) gauge(model string, inFlight, queued int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.gauges[model]
	r.gauges[model] = [2]int{inFlight, queued}
	dIn, dQ := inFlight-old[0], queued-old[1]
	t := r.clock()
	set := func(c *Counts, in, q int) {
		c.InFlight, c.Queued = in, q
		c.PeakInFlight = max(c.PeakInFlight, in)
		c.PeakQueued = max(c.PeakQueued, q)
	}
	set(&r.totals, r.totals.InFlight+dIn, r.totals.Queued+dQ)
	set(r.model(model), inFlight, queued)
	b := r.at(t)
	set(&b.Counts, r.totals.InFlight, r.totals.Queued)
	if b.Models == nil {
		b.Models = map[string]Counts{}
	}
	mc, ok := b.Models[model]
	if !ok {
		mc.Responses = map[string]int{}
	}
	set(&mc, inFlight, queued)
	b.Models[model] = mc
}

// snapshot returns a deep copy.
func (r *recorder) snapshot(withBuckets, withConvs bool) Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	s := Stats{
		Start:     r.start,
		ElapsedMS: now.Sub(r.start).Milliseconds(),
		BucketMS:  BucketWidth.Milliseconds(),
		Totals:    copyCounts(r.totals),
		Models:    map[string]Counts{},
		Faults:    maps.Clone(r.faults),
	}
	for m, c := range r.models {
		s.Models[m] = copyCounts(*c)
	}
	if withBuckets {
		s.Buckets = make([]Bucket, len(r.bucket))
		for i, b := range r.bucket {
			nb := Bucket{StartMS: b.StartMS, Counts: copyCounts(b.Counts)}
			if b.Models != nil {
				nb.Models = map[string]Counts{}
				for m, c := range b.Models {
					nb.Models[m] = copyCounts(c)
				}
			}
			s.Buckets[i] = nb
		}
	}
	if withConvs {
		s.Conversations = make(map[string]Conversation, len(r.convs))
		for k, c := range r.convs {
			s.Conversations[k] = Conversation{Attempts: c.Attempts, Requests: slices.Clone(c.Requests)}
		}
	}
	return s
}

func copyCounts(c Counts) Counts {
	c.Responses = maps.Clone(c.Responses)
	if c.Responses == nil {
		c.Responses = map[string]int{}
	}
	return c
}

func statusOutcome(code int) string { return strconv.Itoa(code) }
