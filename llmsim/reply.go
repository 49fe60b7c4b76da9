package llmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rendered is the content of a 200 answer.
type rendered struct {
	content, reasoning string
	// toolCalls answer instead of content (finish_reason tool_calls).
	toolCalls          []simToolCall
	finish             string
	noChoices          bool
	prompt, completion int
	// tokens is what the model generates (reasoning and content), which
	// sets the generation time; 0 for answers that are not generated
	// (error bodies, no choices).
	tokens int
	// continuation: the answer continues the last assistant message.
	continuation  bool
	prefix        string
	prefixMatched bool
	// summary: the answer to a summary request (Summarize).
	summary bool
	// recall is the fact the question asked to recall, recalled whether
	// the request held it.
	recall   string
	recalled bool
	// stopSequence is the stop sequence that ended the answer (Anthropic's
	// stop_sequences; finish stays "stop").
	stopSequence string
}

// tokensDirective returns the answer length asked by the first
// [[sim tokens=N]] directive, or 0.
func tokensDirective(dirs []Directive) int {
	for _, d := range dirs {
		if d.Tokens > 0 {
			return d.Tokens
		}
	}
	return 0
}

// render decides the answer. Its natural length is dirTokens when given,
// else the short answer's; max_tokens never lengthens it. The content is
// what follows the prefix in a continuation, then cut at max_tokens new
// tokens with finish_reason "length".
func render(m ModelSpec, req *chatRequest, dirTokens int, cont continuation, f Fault, prompt int) rendered {
	q := req.question()
	limit := req.maxTokens()
	if limit == 0 {
		limit = m.serverLimit() // the server's own default
	}
	rd := rendered{finish: "stop", prompt: prompt}
	if isSplitRequest(req) {
		rd.content = SplitQuestion(StripDirectives(q))
		rd.completion = EstimateTokens(rd.content)
		rd.tokens = rd.completion
		return rd
	}
	if isSummaryRequest(req) {
		rd.summary = true
		rd.content = Summarize(StripDirectives(q), limit)
		rd.completion = EstimateTokens(rd.content)
		rd.tokens = rd.completion
		return rd
	}
	rd.continuation = cont.asked && cont.bad == "" && m.Continuation == ContinuationPrefix
	prefix := ""
	if rd.continuation {
		prefix = cont.prefix
		rd.prefix = prefix
	}
	// The answer's natural length is the model's own (the directive's, else
	// the short answer's); max_tokens only cuts it, as on a real server: a
	// client that sends a generous limit on every request (durable-llm
	// sends limits.default_max_tokens) gets answers of the usual length.
	total := EstimateTokens(Answer(req.Model, q))
	if dirTokens > 0 {
		total = dirTokens
	}
	content := AnswerTokens(req.Model, q, total)
	if rd.continuation {
		switch {
		case strings.HasPrefix(content, prefix):
			content, rd.prefixMatched = content[len(prefix):], true
		case strings.HasPrefix(prefix, content):
			// The prefix already holds the whole answer: nothing is left.
			content, rd.prefixMatched = "", true
		default:
			// Not our text: go on from the same token position.
			content = content[len(truncateTokens(content, EstimateTokens(prefix))):]
		}
	}
	generated := true
	switch f {
	case FaultErrorBody, FaultMalformedJSON, FaultServerError, FaultGatewayTimeout, FaultNoChoices, FaultContentFilter:
	default:
		var calls []simToolCall
		var isCall bool
		content, calls, isCall = renderAgent(req, content, f)
		if isCall {
			rd.toolCalls, rd.finish = calls, "tool_calls"
			for _, c := range calls {
				rd.completion += EstimateTokens(c.Function.Name) + EstimateTokens(c.Function.Arguments)
			}
			rd.tokens = rd.completion
			return rd
		}
	}
	switch f {
	case FaultLength:
		n := max(1, EstimateTokens(content)/2)
		if limit > 0 {
			n = min(n, limit)
		}
		content, rd.finish = truncateTokens(content, n), "length"
	case FaultReasoningOnly:
		content, rd.reasoning = "", reasoningText(q)
	case FaultEmptyContent:
		content = ""
	case FaultContentFilter:
		content, rd.finish = "", "content_filter"
	case FaultNoChoices:
		rd.noChoices, generated = true, false
		content = ""
	case FaultErrorBody, FaultMalformedJSON, FaultServerError, FaultGatewayTimeout:
		generated = false
		content = ""
	default:
		content, rd.stopSequence = cutAtStop(content, req.stop)
		if limit > 0 && EstimateTokens(content) > limit {
			content, rd.finish = truncateTokens(content, limit), "length"
		}
	}
	if m.Reasoning && !rd.continuation && generated && rd.reasoning == "" && f != FaultContentFilter {
		rd.reasoning = ReasoningTokens(q, m.ReasoningTokens)
	}
	if rd.finish == "length" {
		rd.stopSequence = ""
	}
	rd.content = content
	rd.completion = EstimateTokens(rd.content) + EstimateTokens(rd.reasoning)
	if generated {
		rd.tokens = rd.completion
	}
	return rd
}

// cutAtStop cuts content before the first of the stop sequences it holds,
// and names that sequence ("" when none occurs).
func cutAtStop(content string, stops []string) (string, string) {
	at, seq := -1, ""
	for _, s := range stops {
		if i := strings.Index(content, s); s != "" && i >= 0 && (at < 0 || i < at) {
			at, seq = i, s
		}
	}
	if at < 0 {
		return content, ""
	}
	return content[:at], seq
}

func (x *exchange) id() string {
	if x.wire == WireAnthropic {
		return fmt.Sprintf("msg_llmsim%06d", x.nextID)
	}
	return fmt.Sprintf("chatcmpl-llmsim%06d", x.nextID)
}

func (x *exchange) usage(rd rendered) *usage {
	return &usage{PromptTokens: rd.prompt, CompletionTokens: rd.completion, TotalTokens: rd.prompt + rd.completion}
}

// Ends of a generation (Generation.End).
const (
	// EndDone: the whole answer was sent.
	EndDone = "done"
	// EndClientGone: the client left before the answer was complete.
	EndClientGone = "client_gone"
	// EndError: the answer was an error (error_body, malformed_json,
	// no_choices, server_error, gateway_timeout), nothing was delivered.
	EndError = "error"
	// EndStreamBreak, EndCutStream, EndStreamError and EndStall: the fault
	// of that name ended the answer.
	EndStreamBreak = "stream_break"
	EndCutStream   = "cut_stream"
	EndStreamError = "stream_error"
	EndStall       = "stall"
)

// genState is what one request generates and how much of it it sent.
type genState struct {
	rd         rendered
	job        *job
	sentBytes  int // of rd.content
	sentTokens int
	end        string
}

func (x *exchange) sentAll() {
	if g := x.gen; g != nil {
		g.sentBytes, g.sentTokens = len(g.rd.content), EstimateTokens(g.rd.content)
	}
}

// recordGeneration adds the request's generation to the stats (deferred
// by handleChat, so it runs after a cut too).
func (x *exchange) recordGeneration() {
	g := x.gen
	if g == nil {
		return
	}
	gen := Generation{
		Conversation: x.rec.Conversation, Attempt: x.rec.Attempt, RequestID: x.rec.RequestID, Wire: x.wire,
		Model: x.req.Model, Stream: x.req.Stream, Continuation: g.rd.continuation,
		Prefix: g.rd.prefix, PrefixMatched: g.rd.prefixMatched,
		Reasoning: g.rd.reasoning, Text: g.rd.content, CompletionTokens: g.rd.completion,
		FinishReason: g.rd.finish, SentBytes: g.sentBytes, SentTokens: g.sentTokens,
		End: g.end, Fault: x.rec.Fault, Temperature: x.req.Temperature, Extra: x.extra,
		Summary: g.rd.summary, Recall: g.rd.recall, Recalled: g.rd.recalled, PromptTokens: g.rd.prompt,
	}
	if n := len(x.req.Messages); n > 0 {
		gen.Last = x.req.Messages[n-1].Content
	}
	for _, c := range g.rd.toolCalls {
		gen.ToolCalls = append(gen.ToolCalls, GeneratedToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	select {
	case <-g.job.started:
		gen.TTFT, gen.ITL, gen.Service = Duration(g.job.ttft), Duration(g.job.itl), Duration(g.job.service)
	default:
	}
	x.s.stats.generation(x.tk, x.rec.Time, gen)
}

// chatResponse is the OpenAI wire's non-streamed answer.
func (x *exchange) chatResponse(rd rendered) chatResponse {
	resp := chatResponse{ID: x.id(), Object: "chat.completion", Created: x.rec.Time.Unix(), Model: x.req.Model,
		Choices: []choice{}, Usage: x.usage(rd), SystemFingerprint: "llmsim"}
	if !rd.noChoices {
		fr := rd.finish
		msg := &respMessage{Role: "assistant", Content: strp(rd.content), ReasoningContent: rd.reasoning, ToolCalls: rd.toolCalls}
		if len(rd.toolCalls) > 0 {
			msg.Content = nil
		}
		resp.Choices = append(resp.Choices, choice{Message: msg, FinishReason: &fr})
	}
	return resp
}

// body is the status and body of a non-streamed answer on the request's
// wire. error_body is a 200 whose body is an error; stream_error too on
// the OpenAI wire, while Anthropic answers a non-streamed overload 529.
func (x *exchange) body(rd rendered) (int, []byte) {
	var v any
	a := x.wire == WireAnthropic
	switch {
	case a && x.rec.Fault == FaultStreamError:
		b, _ := json.Marshal(anthropicError("overloaded_error", "Overloaded"))
		return 529, b
	case a && x.rec.Fault == FaultErrorBody:
		v = anthropicError("api_error", "Internal server error")
	case a:
		v = x.anthropicMessage(rd)
	case x.rec.Fault == FaultErrorBody || x.rec.Fault == FaultStreamError:
		v = newAPIError("server_error", "internal_error", "The server had an error while processing your request. Sorry about that!")
	default:
		v = x.chatResponse(rd)
	}
	b, _ := json.Marshal(v)
	return http.StatusOK, b
}

// complete answers a non-streaming request at the end of the generation.
func (x *exchange) complete(rd rendered, p plan, j *job) {
	status, b := x.body(rd)
	full := len(b)
	if x.rec.Fault == FaultMalformedJSON {
		b = b[:len(b)*3/5]
		full = len(b)
	}
	h := x.header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(full))
	x.w.WriteHeader(status)
	flusher, _ := x.w.(http.Flusher)
	ok := statusOutcome(status)
	switch x.rec.Fault {
	case FaultStreamBreak, FaultCutStream, FaultStall:
		_, _ = x.w.Write(b[:len(b)/2])
		if flusher != nil {
			flusher.Flush()
		}
		x.gen.end = string(x.rec.Fault)
		if x.rec.Fault == FaultStall {
			x.stall(p, j)
			return
		}
		if !p.keep {
			p.pool.abandon(j)
		}
		x.abort(ok)
	case FaultSlowDrip:
		const pieces = 10
		step := p.fault.drip() / pieces
		for i := range pieces {
			lo, hi := len(b)*i/pieces, len(b)*(i+1)/pieces
			if i > 0 && !x.wait(step) {
				x.finish(ok, false, true)
				return
			}
			if i == pieces-1 {
				x.finish(ok, false, false)
			}
			_, _ = x.w.Write(b[lo:hi])
			if flusher != nil {
				flusher.Flush()
			}
		}
		x.sentAll()
		x.gen.end = EndDone
	default:
		x.finish(ok, false, false)
		_, err := x.w.Write(b)
		switch {
		case rd.noChoices || x.rec.Fault == FaultErrorBody || x.rec.Fault == FaultMalformedJSON || x.rec.Fault == FaultStreamError:
			x.gen.end = EndError
			if x.rec.Fault == FaultStreamError {
				x.gen.end = EndStreamError
			}
		case err == nil:
			x.sentAll()
			x.gen.end = EndDone
		}
	}
}

// event is one SSE event of a streamed answer.
type event struct {
	// name is the SSE event name (Anthropic's; "" for none), data its data.
	name string
	data []byte
	// tok is the number of generated tokens (reasoning and content) once
	// the event is out: it is sent when that token is generated. The role
	// chunk has 0, the finish and usage chunks tokens+1 (the end).
	tok int
	// content and bytes count the content tokens and bytes once the event
	// is out.
	content, bytes int
	// finish marks the finish_reason chunk and the usage chunk (on
	// Anthropic's wire the text block's end, message_delta, message_stop).
	finish bool
	// step numbers the events as OpenAI's chunks (one per chunk); the
	// stream's pacing (stream_interval, slow_drip, stream_break's chunks)
	// counts steps, so that both wires pace tokens alike. Anthropic's
	// events that have no chunk of their own share the step before.
	step int
}

// events builds the SSE events of a streamed answer on the request's wire
// (nil when the request does not stream).
func (x *exchange) events(rd rendered) []event {
	if !x.req.Stream {
		return nil
	}
	if x.wire == WireAnthropic {
		return x.anthropicEvents(rd)
	}
	out := x.chunks(rd)
	for i := range out {
		out[i].step = i
	}
	return out
}

// chunks builds the SSE events of a streamed answer (without [DONE]): the
// role chunk, one chunk per reasoning token, one per content token, the
// finish_reason chunk and, with stream_options.include_usage, a usage
// chunk with empty choices.
func (x *exchange) chunks(rd rendered) []event {
	mk := func(choices []choice, u *usage) []byte {
		b, _ := json.Marshal(chatResponse{ID: x.id(), Object: "chat.completion.chunk", Created: x.rec.Time.Unix(),
			Model: x.req.Model, Choices: choices, Usage: u, SystemFingerprint: "llmsim"})
		return b
	}
	withUsage := x.req.StreamOptions != nil && x.req.StreamOptions.IncludeUsage
	if rd.noChoices {
		return []event{{data: mk([]choice{}, x.usage(rd)), tok: 1, finish: true}}
	}
	out := []event{{data: mk([]choice{{Delta: &respMessage{Role: "assistant", Content: strp("")}}}, nil)}}
	tok := 0
	for _, piece := range tokenPieces(rd.reasoning) {
		tok++
		out = append(out, event{data: mk([]choice{{Delta: &respMessage{ReasoningContent: piece}}}, nil), tok: tok})
	}
	for i, c := range rd.toolCalls {
		// The call's id and name first, then its arguments token by token.
		head := simToolCall{Index: &i, ID: c.ID, Type: c.Type}
		head.Function.Name = c.Function.Name
		tok++
		out = append(out, event{data: mk([]choice{{Delta: &respMessage{ToolCalls: []simToolCall{head}}}}, nil), tok: tok})
		for _, piece := range tokenPieces(c.Function.Arguments) {
			d := simToolCall{Index: &i}
			d.Function.Arguments = piece
			tok++
			out = append(out, event{data: mk([]choice{{Delta: &respMessage{ToolCalls: []simToolCall{d}}}}, nil), tok: tok})
		}
	}
	content, bytes := 0, 0
	for _, piece := range tokenPieces(rd.content) {
		tok++
		content++
		bytes += len(piece)
		out = append(out, event{data: mk([]choice{{Delta: &respMessage{Content: strp(piece)}}}, nil), tok: tok, content: content, bytes: bytes})
	}
	fr := rd.finish
	end := event{tok: tok + 1, content: content, bytes: bytes, finish: true}
	end.data = mk([]choice{{Delta: &respMessage{}, FinishReason: &fr}}, nil)
	out = append(out, end)
	if withUsage {
		end.data = mk([]choice{}, x.usage(rd))
		out = append(out, end)
	}
	return out
}

// tokenPieces cuts s into its tokens as EstimateTokens counts them (a CJK
// character, or up to four other runes), so that the first k pieces are
// exactly the prefix of s of k tokens. The pieces concatenate back to s.
func tokenPieces(s string) []string {
	var out []string
	start, other := 0, 0
	for i, r := range s {
		grows := isCJK(r) || other%4 == 0
		if !isCJK(r) {
			other++
		}
		if grows && i > start {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// stream answers text/event-stream: the role chunk and the first token at
// the time to first token, then each token when it is generated, on the
// job's schedule (see job.at).
func (x *exchange) stream(events []event, p plan, j *job) {
	h := x.header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	x.w.WriteHeader(http.StatusOK)
	ok := statusOutcome(http.StatusOK)
	switch x.rec.Fault {
	case FaultErrorBody:
		x.finish(ok, false, false)
		x.sendError(newAPIError("server_error", "internal_error", "The server had an error while processing your request. Sorry about that!"),
			"api_error", "Internal server error")
		x.gen.end = EndError
		return
	case FaultMalformedJSON:
		x.finish(ok, false, false)
		x.send(events[0].name, events[0].data[:len(events[0].data)*3/5])
		x.gen.end = EndError
		return
	}
	var drip time.Duration
	if x.rec.Fault == FaultSlowDrip {
		drip = p.fault.drip()
	}
	interval := p.model.StreamInterval.D()
	steps := events[len(events)-1].step + 1
	strike := -1 // content tokens after which a stream fault strikes
	if x.rec.Fault.streamFault() {
		strike = p.fault.after(EstimateTokens(x.gen.rd.content))
	}
	for i, ev := range events {
		if x.rec.Fault == FaultStreamBreak && ev.step == p.fault.chunks() && (i == 0 || events[i-1].step < ev.step) {
			x.cut(p, j, EndStreamBreak)
		}
		if strike >= 0 && (ev.finish || ev.content > strike) {
			x.strike(p, j)
			return
		}
		at := j.at(ev.tok) + time.Duration(ev.step)*interval
		if drip > 0 {
			at = j.ttft + time.Duration(ev.step)*drip/time.Duration(steps)
		}
		if d := time.Until(j.startAt.Add(at)); d > 0 && !x.wait(d) {
			x.left(p, j)
			return
		}
		if !x.send(ev.name, ev.data) {
			x.left(p, j)
			return
		}
		x.gen.sentBytes, x.gen.sentTokens = ev.bytes, ev.content
	}
	if x.rec.Fault == FaultStreamBreak {
		x.cut(p, j, EndStreamBreak)
	}
	x.finish(ok, false, false)
	if x.wire == WireOpenAI {
		x.send("", []byte("[DONE]"))
	}
	x.gen.end = EndDone
}

// sendError sends an error inside a 200 stream: OpenAI's data: e, or
// Anthropic's event: error with the envelope of typ and msg.
func (x *exchange) sendError(e errorBody, typ, msg string) {
	var b []byte
	if x.wire == WireAnthropic {
		b, _ = json.Marshal(anthropicError(typ, msg))
		x.send("error", b)
		return
	}
	b, _ = json.Marshal(e)
	x.send("", b)
}

// send writes one SSE event (named unless name is "") and flushes it;
// false when the client is gone.
func (x *exchange) send(name string, data []byte) bool {
	var err error
	if name != "" {
		_, err = fmt.Fprintf(x.w, "event: %s\ndata: %s\n\n", name, data)
	} else {
		_, err = fmt.Fprintf(x.w, "data: %s\n\n", data)
	}
	if f, ok := x.w.(http.Flusher); ok {
		f.Flush()
	}
	return err == nil
}

// left records a client that went away mid-stream; without
// continue_on_disconnect its slot is given back.
func (x *exchange) left(p plan, j *job) {
	x.finish(statusOutcome(http.StatusOK), false, true)
	x.gen.end = EndClientGone
	if !p.keep {
		p.pool.abandon(j)
	}
}

// cut aborts the connection mid-answer; without continue_on_disconnect
// the generation stops too.
func (x *exchange) cut(p plan, j *job, end string) {
	x.gen.end = end
	if !p.keep {
		p.pool.abandon(j)
	}
	x.abort(statusOutcome(http.StatusOK))
}

// strike ends a stream with the plan's stream fault.
func (x *exchange) strike(p plan, j *job) {
	switch x.rec.Fault {
	case FaultCutStream:
		x.cut(p, j, EndCutStream)
	case FaultStreamError:
		// Anthropic's famous mid-stream overload on its wire.
		x.gen.end = EndStreamError
		x.finish(statusOutcome(http.StatusOK), false, false)
		x.sendError(newAPIError("server_error", "internal_error", "The server had an error while generating the response. Please retry your request."),
			"overloaded_error", "Overloaded")
	case FaultStall:
		x.gen.end = EndStall
		x.stall(p, j)
	}
}

// stall keeps the connection open and silent until the client gives up,
// the simulator closes, or the fault's duration (default MaxHang) passes;
// then the connection is cut. The generation goes on as planned.
func (x *exchange) stall(p plan, j *job) {
	d := p.fault.Duration.D()
	if d <= 0 {
		d = x.s.maxHang
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-x.r.Context().Done():
		x.finish(statusOutcome(http.StatusOK), false, true)
		if !p.keep {
			p.pool.abandon(j)
		}
	case <-x.s.closed:
		x.abort(statusOutcome(http.StatusOK))
	case <-t.C:
		x.abort(statusOutcome(http.StatusOK))
	}
}
