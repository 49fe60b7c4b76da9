package frontdoor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/workflows"
)

// HeaderLastEventID is the SSE header of a client that reconnects to a
// stream (EventSource sends it by itself): the id of the last event it got.
const HeaderLastEventID = "Last-Event-ID"

// resumePoint is where a reconnecting client's stream stopped: the last
// stream offset it got (-1: none) and the bytes of answer text it has.
// Both are in the SSE id of every content chunk, "<offset>:<bytes>". The
// bytes make a reconnect exact even once the call has ended, when its
// stream can no longer be read and the rest comes from the result.
type resumePoint struct {
	set    bool
	offset int64
	bytes  int
}

func (p resumePoint) id() string {
	return strconv.FormatInt(p.offset, 10) + ":" + strconv.Itoa(p.bytes)
}

// parseLastEventID reads a Last-Event-ID header ("" : a new stream).
func parseLastEventID(v string) (resumePoint, error) {
	p := resumePoint{offset: -1}
	v = strings.TrimSpace(v)
	if v == "" {
		return p, nil
	}
	o, b, ok := strings.Cut(v, ":")
	off, err1 := strconv.ParseInt(o, 10, 64)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || off < -1 || n < 0 {
		return p, fmt.Errorf("%q is not an event id of this stream (want OFFSET:BYTES as sent in an id: line)", v)
	}
	return resumePoint{set: true, offset: off, bytes: n}, nil
}

// stream answers stream: true with the call's deltas as they come: a role
// chunk, a content chunk per delta (its SSE id says where the stream is,
// for a reconnect with Last-Event-ID), a final chunk with finish_reason and
// x_resilience, a usage chunk when asked for, then [DONE]. All the
// connections that stream one call share one subscription (hubs).
//
// The 200 is committed at the first delta, or after KeepAlive without one;
// a call that fails before is answered with a proper status code (a 400
// for an invalid request), after it with an SSE error event, which the
// official clients raise as an error. While nothing is sent (the model
// has not started, the call waits to retry) the stream carries an SSE
// comment every KeepAlive, and a comment per attempt event. A call that has
// not ended after limit (its deadline and margins) ends the stream with
// call_still_running, which names the call: the same request attaches to
// it again.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id string, limit time.Duration, cr chatRequest, resume resumePoint, sw *sseWriter, f streamFormat) {
	hb := h.hubs.join(id)
	defer hb.leave()

	model := cr.Model
	if model == "" || model == AutoModel {
		model = h.models[0]
	}
	pos := resumePoint{offset: -1}
	if resume.set {
		pos = resume
	}
	if _, ok := f.(wholeTextFormat); ok {
		pos.bytes = 0 // the format leaves out the text the client has
	}
	committed := false
	var early []string // event comments from before the commit
	commit := func(res *workflows.CallResult) {
		if res != nil {
			w.Header().Set(HeaderSource, string(res.Source))
			w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
		} else {
			w.Header().Set("Trailer", HeaderSource+", "+HeaderDegraded)
		}
		sw.commit()
		committed = true
		if !resume.set {
			f.start(model)
		}
		for _, c := range early {
			_ = sw.comment(c)
		}
		early = nil
	}

	keepAlive := time.NewTimer(h.o.KeepAlive)
	defer keepAlive.Stop()
	tooLong := time.NewTimer(limit)
	defer tooLong.Stop()
	next := 0 // index of the next hub item
	for {
		st := hb.from(next)
		next += len(st.items)
		wrote := false
		for _, it := range st.items {
			switch {
			case it.Delta != nil:
				if it.Offset > pos.offset {
					pos.offset = it.Offset
				}
				if it.end <= pos.bytes {
					continue // the client has this text
				}
				skip := runeStart(it.Delta.Text, pos.bytes-it.start)
				text := it.Delta.Text[skip:]
				pos.bytes = it.start + skip
				if it.Delta.Model != "" {
					model = it.Delta.Model
				}
				if !committed {
					commit(nil)
				}
				// A live delta is one chunk; the rest taken from the result
				// (a whole answer, a fallback's) is cut into pieces.
				pieces := []string{text}
				if _, whole := f.(wholeTextFormat); it.Offset < 0 && !whole {
					pieces = splitContent(text)
				}
				for _, piece := range pieces {
					pos.bytes += len(piece)
					f.text(pos, model, piece)
				}
				pos.bytes = it.end
				wrote = true
			case it.Event != nil:
				if it.Offset >= 0 && it.Offset <= pos.offset {
					continue // sent before the reconnect
				}
				if it.Offset > pos.offset {
					pos.offset = it.Offset
				}
				if it.Event.Model != "" && (it.Event.Type == workflows.EventAttemptStarted || it.Event.Type == workflows.EventResumed) {
					model = it.Event.Model
				}
				switch c := it.Event.String(); {
				case c == "":
				case committed:
					_ = sw.comment(c)
					wrote = true
				default:
					early = append(early, c)
				}
			}
		}
		if st.ended {
			if st.err != nil {
				if r.Context().Err() != nil {
					return // the client left; the call goes on
				}
				e := h.callFailed(id, st.err)
				if committed {
					f.fail(e)
				} else {
					e.write(w)
				}
				return
			}
			if !committed {
				model = modelOf(st.res)
				commit(&st.res)
			}
			f.end(id, st.res)
			w.Header().Set(HeaderSource, string(st.res.Source))
			w.Header().Set(HeaderDegraded, strconv.FormatBool(st.res.Degraded))
			return
		}
		if sw.err != nil {
			return // the client left; the call goes on
		}
		if wrote {
			keepAlive.Reset(h.o.KeepAlive)
		}
		select {
		case <-st.changed:
		case <-keepAlive.C:
			if !committed {
				commit(nil)
			}
			if sw.comment("keep-alive") != nil {
				return
			}
			keepAlive.Reset(h.o.KeepAlive)
		case <-tooLong.C:
			e := stillRunning(id, limit)
			if committed {
				f.fail(e)
			} else {
				e.write(w)
			}
			return
		case <-r.Context().Done():
			return // the client left; the call goes on
		}
	}
}

// runeStart is the first index of s at or after i that starts a rune (0
// for i < 0), so that a resumed piece never begins inside a UTF-8 sequence.
func runeStart(s string, i int) int {
	if i <= 0 {
		return 0
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return min(i, len(s))
}

// streamFormat writes the events of one API's stream (chat completion
// chunks, Responses API events) through an sseWriter.
type streamFormat interface {
	// start opens a new stream (not a resumed one) for model.
	start(model string)
	// text sends one piece of the answer; at is where the stream is once
	// it is sent (its id is the SSE id a reconnect resumes from).
	text(at resumePoint, model, piece string)
	// end sends what ends a stream: the result's tool calls, finish,
	// usage.
	end(id string, res workflows.CallResult)
	// fail sends a failure after the 200 was committed.
	fail(e *apiError)
}

// wholeTextFormat is a streamFormat that is handed the answer's text from
// its first byte, also on a resumed stream, as its pieces came, and leaves
// out itself what the client has: responsesFormat, whose event numbers
// count the pieces of the whole text.
type wholeTextFormat interface {
	streamFormat
	wholeText()
}

// chatFormat streams chat.completion.chunk events.
type chatFormat struct {
	sw           *sseWriter
	includeUsage bool
}

func (f chatFormat) start(model string) { f.sw.role(model) }
func (f chatFormat) text(at resumePoint, model, piece string) {
	_ = f.sw.dataID(at.id(), f.sw.chunk(model, delta{Content: &piece}, nil))
}
func (f chatFormat) end(id string, res workflows.CallResult) { f.sw.end(id, res, f.includeUsage) }
func (f chatFormat) fail(e *apiError)                        { f.sw.error(e) }

// sseWriter writes server-sent events.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      string
	created int64
	err     error
	// idem is the idempotency window of the request streamed, for the
	// last event's x_resilience (nil on a resumed retrieve).
	idem *Idempotency
}

func newSSEWriter(w http.ResponseWriter, id string, created time.Time) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), id: id, created: created.Unix()}
}

func (s *sseWriter) commit() {
	hd := s.w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
}

func (s *sseWriter) raw(text string) error {
	if s.err != nil {
		return s.err
	}
	if _, err := fmt.Fprint(s.w, text); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
	}
	return s.err
}

func (s *sseWriter) comment(text string) error { return s.raw(": " + text + "\n\n") }

func (s *sseWriter) data(v any) error { return s.dataID("", v) }

// dataID sends an event with an SSE id (none when id is "").
func (s *sseWriter) dataID(id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		return s.raw("id: " + id + "\ndata: " + string(b) + "\n\n")
	}
	return s.raw("data: " + string(b) + "\n\n")
}

func (s *sseWriter) chunk(model string, d delta, finish *string) chunk {
	return chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: model,
		Choices: []chunkChoice{{Delta: d, Logprobs: jsonNull, FinishReason: finish}}}
}

// role sends the first chunk: the assistant role and empty content.
func (s *sseWriter) role(model string) {
	empty := ""
	_ = s.data(s.chunk(model, delta{Role: "assistant", Content: &empty}, nil))
}

// end sends the final chunk (finish_reason and x_resilience), the usage
// chunk when asked for, and [DONE].
func (s *sseWriter) end(id string, res workflows.CallResult, includeUsage bool) {
	model := modelOf(res)
	if calls := toolCallsOf(res, true); len(calls) > 0 {
		// Tool calls come whole, once checked: one chunk.
		_ = s.data(s.chunk(model, delta{ToolCalls: calls}, nil))
	}
	finish := finishReasonOf(res)
	last := s.chunk(model, delta{}, &finish)
	rs := resilienceOf(id, answerStatus(res), res)
	if res.Replaced != nil {
		rs.Content = res.Content
	}
	rs.Idempotency = s.idem
	last.Resilience = &rs
	_ = s.data(last)
	if includeUsage {
		u := usageOf(res)
		_ = s.data(chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: model,
			Choices: []chunkChoice{}, Usage: &u})
	}
	_ = s.raw("data: [DONE]\n\n")
}

// error sends a failure after the 200 was committed, as OpenAI does: an
// event whose data is the error body, and no [DONE].
func (s *sseWriter) error(e *apiError) { _ = s.data(e.body()) }
