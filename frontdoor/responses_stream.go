package frontdoor

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/workflows"
)

// Sequence numbers of the events that open a response's stream; the
// numbers after them count the pieces of the text (package doc,
// "Responses API streams").
const (
	seqCreated    = 0
	seqInProgress = 1
	seqItemAdded  = 2
	seqPartAdded  = 3
)

// maxPiece is the most bytes of text without a space in one
// output_text.delta (a few characters of Chinese, a long URL's part).
const maxPiece = 32

// nextPiece is the length of the piece of text that s starts with, or 0
// while it is not known: s ends before the byte after the piece, and more
// text is still to come (last is false). A piece ends where a word
// follows whitespace, or at the first rune that starts maxPiece bytes or
// more into it; the answer's last piece ends with it.
func nextPiece(s string, last bool) int {
	for i := 1; i < len(s); i++ {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if i >= maxPiece || (isSpace(s[i-1]) && !isSpace(s[i])) {
			return i
		}
	}
	if last {
		return len(s)
	}
	return 0
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// responsesFormat streams Responses API events: response.created, the
// message item and its output_text deltas, function call items, and
// response.completed (or an error event). It is handed the answer's text
// from its first byte, also on a resumed stream, since the numbers of
// its events count the pieces of the whole text; the events a client has
// already (up to sequence number after, or up to byte have of the text
// for a Last-Event-ID) are not sent.
type responsesFormat struct {
	sw         *sseWriter
	wid        string
	background bool
	after      int // the client has the events up to this sequence number
	have       int // and the text up to this byte
	last       int // the sequence number of the last event, sent or not
	started    bool
	msgOpen    bool
	received   int    // bytes of text handed over
	pending    string // text handed over and not yet cut into a piece
	sent       int    // bytes of text cut into pieces
	pieces     int    // pieces cut
	offset     int64  // the stream offset of the text handed over last
}

func newResponsesFormat(sw *sseWriter, background bool, after, have int) *responsesFormat {
	if have > 0 {
		after = max(after, seqPartAdded)
	}
	return &responsesFormat{sw: sw, wid: strings.TrimPrefix(sw.id, responseIDPrefix), background: background,
		after: after, have: have, last: -1, offset: -1}
}

// wholeText marks the format that is handed the text from its first byte.
func (*responsesFormat) wholeText() {}

// event sends one typed event with sequence number seq, unless the
// client has it.
func (f *responsesFormat) event(seq int, id, typ string, fields map[string]any) {
	seq = max(seq, f.last+1) // never twice the same number, whatever came before
	f.last = seq
	if seq <= f.after {
		return
	}
	fields["sequence_number"] = seq
	_ = f.sw.typed(id, typ, fields)
}

func (f *responsesFormat) start(model string) {
	f.started = true
	o := newResponseObject(f.wid, time.Unix(f.sw.created, 0), workflows.CallResult{Model: model}, "in_progress")
	o.Background = f.background
	created := o
	if f.background {
		created.Status = "queued"
	}
	f.event(seqCreated, "", "response.created", map[string]any{"response": created})
	f.event(seqInProgress, "", "response.in_progress", map[string]any{"response": o})
}

// open starts the stream and the message item, once.
func (f *responsesFormat) open(model string) {
	if !f.started {
		f.start(model) // a resumed stream: filtered by after
	}
	if f.msgOpen {
		return
	}
	f.msgOpen = true
	f.event(seqItemAdded, "", "response.output_item.added", map[string]any{"output_index": 0, "item": respMessage(f.wid, "", "in_progress")})
	f.event(seqPartAdded, "", "response.content_part.added", map[string]any{"item_id": msgItemID(f.wid), "output_index": 0, "content_index": 0, "part": textPart("")})
}

// text takes a piece of the text handed over at stream position at, and
// sends the pieces of the text now known.
func (f *responsesFormat) text(at resumePoint, model, piece string) {
	f.open(model)
	f.offset = at.offset
	f.received += len(piece)
	f.pending += piece
	f.flush(false)
}

// flush sends the pieces of the pending text whose end is known (all of
// it once the text is complete), each an output_text.delta whose SSE id
// is where a reconnect resumes after it.
func (f *responsesFormat) flush(complete bool) {
	for {
		n := nextPiece(f.pending, complete)
		if n == 0 {
			return
		}
		piece, start := f.pending[:n], f.sent
		f.pending, f.sent, f.pieces = f.pending[n:], f.sent+n, f.pieces+1
		seq := seqPartAdded + f.pieces
		switch {
		case f.sent <= f.have:
			f.after = max(f.after, seq) // the client has this piece
		case start < f.have:
			piece = piece[runeStart(piece, f.have-start):] // and the start of this one
		}
		f.event(seq, resumePoint{offset: f.offset, bytes: f.sent}.id(), "response.output_text.delta", map[string]any{
			"item_id": msgItemID(f.wid), "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []any{}})
	}
}

func (f *responsesFormat) end(id string, res workflows.CallResult) {
	if !f.started {
		f.start(modelOf(res))
	}
	seq := seqItemAdded
	idx := 0
	if f.msgOpen || res.Content != "" || len(res.ToolCalls) == 0 {
		f.open(modelOf(res))
		if f.received == 0 {
			f.pending = res.Content // no delta came: the answer is the result's
		}
		f.flush(true)
		seq = seqPartAdded + f.pieces + 1
		f.event(seq, "", "response.output_text.done", map[string]any{"item_id": msgItemID(id), "output_index": 0, "content_index": 0,
			"text": res.Content, "logprobs": []any{}})
		f.event(seq+1, "", "response.content_part.done", map[string]any{"item_id": msgItemID(id), "output_index": 0, "content_index": 0,
			"part": textPart(res.Content)})
		f.event(seq+2, "", "response.output_item.done", map[string]any{"output_index": 0, "item": respMessage(id, res.Content, "completed")})
		seq += 3
		idx++
	}
	for i, c := range res.ToolCalls {
		item := functionCallItem{Type: "function_call", ID: fnItemID(id, i), CallID: c.ID, Name: c.Function.Name, Status: "in_progress"}
		f.event(seq, "", "response.output_item.added", map[string]any{"output_index": idx, "item": item})
		f.event(seq+1, "", "response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": idx, "delta": c.Function.Arguments})
		f.event(seq+2, "", "response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": idx,
			"name": c.Function.Name, "arguments": c.Function.Arguments})
		item.Arguments, item.Status = c.Function.Arguments, "completed"
		f.event(seq+3, "", "response.output_item.done", map[string]any{"output_index": idx, "item": item})
		seq += 4
		idx++
	}
	o := newResponseObject(id, time.Unix(f.sw.created, 0), res, "completed")
	o.Background = f.background
	o.Resilience.Idempotency = f.sw.idem
	f.event(seq, "", "response."+o.Status, map[string]any{"response": o}) // completed, or incomplete (max_output_tokens)
}

func (f *responsesFormat) fail(e *apiError) {
	if f.msgOpen {
		f.flush(true) // the text so far, then the error
	}
	b := e.body()
	f.event(f.last+1, "", "error", map[string]any{"code": b.Error.Code, "message": b.Error.Message, "param": b.Error.Param})
}
