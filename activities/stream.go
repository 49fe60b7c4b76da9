package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/classify"
)

// errFirstToken and errIdle are the causes a stream's watchdog cancels the
// request with.
var (
	errFirstToken = errors.New("no first token within the first-token timeout")
	errIdle       = errors.New("no chunk within the idle timeout")
)

// maxToolCallGap bounds how far past the tool calls so far a chunk's
// tool-call index may point (servers number them 0, 1, 2, …).
const maxToolCallGap = 16

// streamed is what one streamed attempt produced.
type streamed struct {
	// resp is the answer assembled from the chunks (content, reasoning,
	// finish_reason, usage); valid when obs is nil or ended cleanly.
	resp openai.ChatCompletionResponse
	// obs is what reading the stream saw; nil when the stream could not be
	// opened (err is then go-openai's error, judged as a non-streamed one).
	obs *classify.Stream
	err error
	// logprobs of the content tokens, when the request asked for them.
	logprobs json.RawMessage
}

// streamLimits bound one streamed attempt: its time to the first chunk,
// between chunks, and the size of the answer it assembles (maxBytes,
// JSON-encoded: text, reasoning, tool calls and logprobs; 0: no limit).
type streamLimits struct {
	firstToken, idle time.Duration
	maxBytes         int
	// byDeadline: the first token is due by the request's deadline (its
	// context's) when that comes before firstToken. The watch then ends
	// at that very instant, so a request whose deadline fires first is
	// judged as the watch would have judged it (no first token: read
	// timeout), whichever of the two timers runs first on a loaded machine.
	byDeadline bool
	// patient, when set, is asked when the first-token timeout passes:
	// wait lets the request run on instead of cutting it, to its
	// context's deadline, or (recheck > 0) until asked again after recheck.
	// A request that then ends with no chunk is judged read_timeout all
	// the same.
	patient func() (wait bool, recheck time.Duration)
}

// watchdog cancels a streamed request when no first chunk arrives within
// the first-token timeout, or no chunk within the idle timeout after that.
type watchdog struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel context.CancelCauseFunc
	idle   time.Duration
	fired  error
	// chunked: a chunk came, the idle timeout rules from then on.
	chunked bool
	// overdue: the first-token timeout passed without a chunk.
	overdue bool
	// firstDue: when the first token is due.
	firstDue time.Time
}

func newWatchdog(t streamLimits, firstDue time.Time, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{cancel: cancel, idle: t.idle}
	var due func()
	due = func() {
		w.mu.Lock()
		w.overdue = true
		w.mu.Unlock()
		if t.patient != nil {
			if wait, recheck := t.patient(); wait {
				if recheck > 0 {
					w.rearm(recheck, due)
				}
				return
			}
		}
		w.fireUnlessChunked(errFirstToken)
	}
	w.mu.Lock() // due may run before AfterFunc returns
	w.firstDue = firstDue
	w.timer = time.AfterFunc(time.Until(firstDue), due)
	w.mu.Unlock()
	return w
}

// rearm asks f again after d, unless a chunk came or the watch ended.
func (w *watchdog) rearm(d time.Duration, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired == nil && w.timer != nil && !w.chunked {
		w.timer = time.AfterFunc(d, f)
	}
}

func (w *watchdog) fire(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired == nil && w.timer != nil {
		w.fired = cause
		w.cancel(cause)
	}
}

// fireUnlessChunked fires cause unless a chunk came meanwhile: a first
// token that arrives as the first-token watch decides to cut wins.
func (w *watchdog) fireUnlessChunked(cause error) {
	w.mu.Lock()
	chunked := w.chunked
	if !chunked && w.fired == nil && w.timer != nil {
		w.fired = cause
		w.cancel(cause)
	}
	w.mu.Unlock()
}

// chunk restarts the clock: the next chunk is due within the idle timeout.
func (w *watchdog) chunk() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired == nil && w.timer != nil {
		w.chunked = true
		w.timer.Stop()
		w.timer = time.AfterFunc(w.idle, func() { w.fire(errIdle) })
	}
}

// stop ends the watch and reports what fired, if anything; with ended
// (the request's context ran out) a first token overdue and never come
// counts as errFirstToken: the request was kept open past the first-token
// timeout to its attempt's deadline, or the deadline came with the
// first token's time, before the watch could say so.
func (w *watchdog) stop(ended bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.fired == nil && ended && !w.chunked && (w.overdue || !time.Now().Before(w.firstDue)) {
		return errFirstToken
	}
	return w.fired
}

// stream sends req with stream: true to up and reads the reply chunk by
// chunk, under the first-token and idle timeouts; an answer that would grow
// past t.maxBytes ends the reading with a *bodyLimitError (the text kept
// and streamed is at most the limit). progress is told the completion
// tokens received so far (a chunk's delta counts as one token until the
// final usage says better), onText (when not nil) each piece of content.
func stream(ctx context.Context, up upstream, req openai.ChatCompletionRequest, t streamLimits, progress func(tokens int), onText func(text string)) streamed {
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// watch is what the first token is given, as reasons say it.
	watch, firstDue := t.firstToken, time.Now().Add(t.firstToken)
	if d, ok := ctx.Deadline(); ok && t.byDeadline && d.Before(firstDue) {
		watch, firstDue = time.Until(d).Round(time.Millisecond), d
	}
	wd := newWatchdog(t, firstDue, cancel)

	s, err := up.openStream(sctx, req)
	if err != nil {
		if fired := wd.stop(ctx.Err() != nil); errors.Is(fired, errFirstToken) {
			// No headers before the first-token timeout: the same as no
			// first token (a server that sends headers with the first token).
			return streamed{obs: &classify.Stream{FirstTokenTimedOut: true, FirstTokenTimeout: watch, Err: err}}
		}
		return streamed{err: err}
	}
	defer s.Close()

	as := &assembly{obs: &classify.Stream{FirstTokenTimeout: watch, IdleTimeout: t.idle}, maxBytes: t.maxBytes}
	for as.obs.Err == nil {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			as.obs.Err = err
			break
		}
		as.add(chunk, func() {
			wd.chunk()
			progress(as.obs.Tokens)
		}, onText)
	}
	switch fired := wd.stop(ctx.Err() != nil); {
	case errors.Is(fired, errFirstToken) && as.obs.Chunks == 0:
		as.obs.FirstTokenTimedOut = true
	case errors.Is(fired, errIdle) || (errors.Is(fired, errFirstToken) && as.obs.Chunks > 0):
		as.obs.IdleTimedOut = true
	}
	return as.result()
}

// assembly is a streamed answer put together chunk by chunk.
type assembly struct {
	obs               *classify.Stream
	maxBytes, size    int // the limit and the answer so far, JSON-encoded
	resp              openai.ChatCompletionResponse
	content, thinking strings.Builder
	finish            openai.FinishReason
	// calls gathers streamed tool calls by index: the first delta of a
	// call brings its id and name, later ones pieces of its arguments.
	calls    []openai.ToolCall
	logprobs []openai.ChatCompletionTokenLogprob
}

// add takes one chunk: its first choice's deltas, usage and finish reason.
// chunked is called for a chunk that carries text, reasoning or a tool
// call; onText (when not nil) with each piece of content. A chunk that
// cannot be taken sets obs.Err.
func (as *assembly) add(chunk openai.ChatCompletionStreamResponse, chunked func(), onText func(string)) {
	as.resp.ID, as.resp.Model, as.resp.Created = chunk.ID, chunk.Model, chunk.Created
	if chunk.Usage != nil {
		as.resp.Usage = *chunk.Usage
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if as.maxBytes > 0 {
			if as.size += chunkSize(ch); as.size > as.maxBytes {
				as.obs.Err = &bodyLimitError{what: "streamed answer (text, reasoning, tool calls and logprobs, JSON-encoded)", limit: int64(as.maxBytes)}
				return
			}
		}
		if d.Content != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0 {
			as.obs.Chunks++
			as.obs.Tokens++
			chunked()
		}
		as.content.WriteString(d.Content)
		if d.Content != "" && onText != nil {
			onText(d.Content)
		}
		as.thinking.WriteString(d.ReasoningContent)
		for _, tc := range d.ToolCalls {
			if as.obs.Err = as.toolDelta(tc); as.obs.Err != nil {
				return
			}
		}
		if ch.Logprobs != nil {
			as.logprobs = append(as.logprobs, ch.Logprobs.Content...)
		}
		if ch.FinishReason != "" {
			as.finish = ch.FinishReason
			as.obs.Finished = true
		}
	}
}

// toolDelta adds a piece of a streamed tool call to the call its index
// names (a continuation without an index is the last call's).
func (as *assembly) toolDelta(tc openai.ToolCall) error {
	i := len(as.calls)
	if tc.Index != nil {
		i = *tc.Index
	} else if tc.ID == "" && len(as.calls) > 0 {
		i = len(as.calls) - 1
	}
	if i < 0 || i > len(as.calls)+maxToolCallGap {
		return &classify.MalformedChunk{What: fmt.Sprintf("tool call index %d after %d call(s)", i, len(as.calls))}
	}
	for len(as.calls) <= i {
		as.calls = append(as.calls, openai.ToolCall{Type: openai.ToolTypeFunction})
	}
	c := &as.calls[i]
	if tc.ID != "" {
		c.ID = tc.ID
	}
	if tc.Type != "" {
		c.Type = tc.Type
	}
	c.Function.Name += tc.Function.Name
	c.Function.Arguments += tc.Function.Arguments
	return nil
}

// result is the answer assembled, in a non-streamed reply's shape.
func (as *assembly) result() streamed {
	out := streamed{obs: as.obs, resp: as.resp}
	if out.resp.Usage.CompletionTokens > 0 {
		as.obs.Tokens = out.resp.Usage.CompletionTokens
	}
	out.resp.Object = "chat.completion"
	for i := range as.calls {
		as.calls[i].Index = nil
	}
	out.resp.Choices = []openai.ChatCompletionChoice{{
		Message: openai.ChatCompletionMessage{
			Role: openai.ChatMessageRoleAssistant, Content: as.content.String(), ReasoningContent: as.thinking.String(),
			ToolCalls: as.calls,
		},
		FinishReason: as.finish,
	}}
	if len(as.logprobs) > 0 {
		// The shape of a non-streamed reply's logprobs.
		out.logprobs, _ = json.Marshal(map[string]any{"content": as.logprobs})
	}
	return out
}

// chunkSize is what one chunk's choice adds to the answer, JSON-encoded.
func chunkSize(ch openai.ChatCompletionStreamChoice) int {
	d := ch.Delta
	n := encodedLen(d.Content) + encodedLen(d.ReasoningContent)
	for _, tc := range d.ToolCalls {
		n += encodedLen(tc.ID) + encodedLen(string(tc.Type)) + encodedLen(tc.Function.Name) + encodedLen(tc.Function.Arguments)
	}
	if ch.Logprobs != nil {
		for _, lp := range ch.Logprobs.Content {
			n += logprobSize(lp.Token, lp.Bytes)
			for _, top := range lp.TopLogprobs {
				n += logprobSize(top.Token, top.Bytes)
			}
		}
	}
	return n
}

// logprobSize is about what one token's logprob takes in JSON: its
// token, its bytes (up to 4 characters each) and the numbers and names.
func logprobSize(token string, b []int64) int {
	return 48 + encodedLen(token) + 4*len(b)
}

// encodedLen is the length of s inside a JSON string as encoding/json
// writes it: quotes and backslashes take 2 bytes, < > & and control
// characters 6 (\u003c); newlines, returns and tabs 2.
func encodedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c == '<' || c == '>' || c == '&' || c < 0x20:
			n += 5
		}
	}
	return n
}
