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

// stream answers a streamed call with its deltas as they come, in f's
// format (chat completion chunks, Responses API events): all the
// connections that stream one call share one subscription (hubs).
//
// The 200 is committed at the first delta, or after KeepAlive without one;
// a call that fails before is answered with a proper status code (a 400
// for an invalid request), after it with an error event, which the
// official clients raise as an error. While nothing is sent (the model
// has not started, the call waits to retry) the stream carries an SSE
// comment every KeepAlive, and a comment per attempt event. A call that
// has not ended after limit (its deadline and margins) ends the stream
// with call_still_running, which names the call: the same request
// attaches to it again.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id string, limit time.Duration, model string, resume resumePoint, sw *sseWriter, f streamFormat) {
	hb := h.hubs.join(id)
	defer hb.leave()
	s := &streamConn{w: w, sw: sw, f: f, model: model, resume: resume, pos: resumePoint{offset: -1}}
	if resume.set {
		s.pos = resume
	}
	if _, ok := f.(wholeTextFormat); ok {
		s.pos.bytes = 0 // the format leaves out the text the client has
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
			wrote = s.item(it) || wrote
		}
		if st.ended {
			if st.err == nil {
				s.end(id, st.res)
			} else if r.Context().Err() == nil { // else the client left; the call goes on
				s.fail(h.callFailed(id, st.err))
			}
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
			if !s.committed {
				s.commit(nil)
			}
			if sw.comment("keep-alive") != nil {
				return
			}
			keepAlive.Reset(h.o.KeepAlive)
		case <-tooLong.C:
			s.fail(stillRunning(id, limit))
			return
		case <-r.Context().Done():
			return // the client left; the call goes on
		}
	}
}

// streamConn is one connection's stream of a call: where its client is
// (pos: the stream offset and answer bytes it has), the model its text
// is of, and whether the 200 is committed.
type streamConn struct {
	w         http.ResponseWriter
	sw        *sseWriter
	f         streamFormat
	model     string
	resume    resumePoint // where a reconnecting client stopped
	pos       resumePoint
	committed bool
	early     []string // event comments from before the commit
}

// commit sends the 200 and what opens the stream; res is the result of a
// call that ended before (nil: its headers come as trailers).
func (s *streamConn) commit(res *workflows.CallResult) {
	if res != nil {
		s.w.Header().Set(HeaderSource, string(res.Source))
		s.w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
	} else {
		s.w.Header().Set("Trailer", HeaderSource+", "+HeaderDegraded)
	}
	s.sw.commit()
	s.committed = true
	if !s.resume.set {
		s.f.start(s.model)
	}
	for _, c := range s.early {
		_ = s.sw.comment(c)
	}
	s.early = nil
}

// item sends what of a hub item the client does not have, and reports
// whether it wrote anything.
func (s *streamConn) item(it hubItem) bool {
	switch {
	case it.Delta != nil:
		return s.delta(it)
	case it.Event != nil:
		return s.event(it)
	}
	return false
}

func (s *streamConn) delta(it hubItem) bool {
	if it.Offset > s.pos.offset {
		s.pos.offset = it.Offset
	}
	if it.end <= s.pos.bytes {
		return false // the client has this text
	}
	skip := runeStart(it.Delta.Text, s.pos.bytes-it.start)
	text := it.Delta.Text[skip:]
	s.pos.bytes = it.start + skip
	if it.Delta.Model != "" {
		s.model = it.Delta.Model
	}
	if !s.committed {
		s.commit(nil)
	}
	// A live delta is one chunk; the rest taken from the result (a whole
	// answer, a fallback's) is cut into pieces.
	pieces := []string{text}
	if _, whole := s.f.(wholeTextFormat); it.Offset < 0 && !whole {
		pieces = splitContent(text)
	}
	for _, piece := range pieces {
		s.pos.bytes += len(piece)
		s.f.text(s.pos, s.model, piece)
	}
	s.pos.bytes = it.end
	return true
}

func (s *streamConn) event(it hubItem) bool {
	if it.Offset >= 0 && it.Offset <= s.pos.offset {
		return false // sent before the reconnect
	}
	if it.Offset > s.pos.offset {
		s.pos.offset = it.Offset
	}
	if it.Event.Model != "" && (it.Event.Type == workflows.EventAttemptStarted || it.Event.Type == workflows.EventResumed) {
		s.model = it.Event.Model
	}
	switch c := it.Event.String(); {
	case c == "":
	case s.committed:
		_ = s.sw.comment(c)
		return true
	default:
		s.early = append(s.early, c)
	}
	return false
}

// end ends the stream of a call that answered res.
func (s *streamConn) end(id string, res workflows.CallResult) {
	if !s.committed {
		s.model = modelOf(res)
		s.commit(&res)
	}
	s.f.end(id, res)
	s.w.Header().Set(HeaderSource, string(res.Source))
	s.w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
}

// fail ends the stream with e: its status code while nothing is
// committed, else an error event.
func (s *streamConn) fail(e *apiError) {
	if s.committed {
		s.f.fail(e)
	} else {
		e.write(s.w)
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

// typed sends an event named typ (an "event:" line), its data fields with
// "type": typ added, and an SSE id unless id is "": the shape of the
// Responses API's and the Messages API's events.
func (s *sseWriter) typed(id, typ string, fields map[string]any) error {
	fields["type"] = typ
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	text := "event: " + typ + "\ndata: " + string(b) + "\n\n"
	if id != "" {
		text = "id: " + id + "\n" + text
	}
	return s.raw(text)
}

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
