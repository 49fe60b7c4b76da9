package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
)

// maxRecordedBody is how much of a response body the recorder keeps for the
// classifier (go-openai decodes an HTTP 200 error body into an empty
// response without an error, so the raw bytes are needed).
const maxRecordedBody = 64 << 10

// exchange records what the upstream answered to one attempt: go-openai
// keeps neither the headers of an error response nor the raw body.
type exchange struct {
	// requestID is sent as X-Request-ID and Idempotency-Key.
	requestID string
	// continuation, when not none, marks the request's final assistant
	// message as text to continue, the way the model's server expects
	// (go-openai has no field for it).
	continuation config.Continuation
	// extra are top-level fields added to the request body as they are
	// (the request's passthrough fields the model forwards).
	extra map[string]json.RawMessage
	// mayResend, when set, is asked before the n-th (from 0) network-layer
	// resend after a failed connect: the call's cap and the endpoint's
	// budget decide, not only backoff.connect_retries.
	mayResend func(n int) bool

	mu             sync.Mutex
	status         int
	header         http.Header
	body           bytes.Buffer
	headerTimedOut bool
	connectResends int
	// overLimit is set when the reply went over http.max_body_bytes.
	overLimit *bodyLimitError
}

// tooLarge returns the body-limit error of the reply, or nil.
func (e *exchange) tooLarge() *bodyLimitError {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.overLimit
}

// responded reports whether response headers arrived.
func (e *exchange) responded() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status != 0
}

func (e *exchange) snapshot() (status int, header http.Header, body []byte, headerTimedOut bool, resends int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status, e.header, bytes.Clone(e.body.Bytes()), e.headerTimedOut, e.connectResends
}

type exchangeKey struct{}

func withExchange(ctx context.Context, e *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, e)
}

// recordingTransport adds the attempt's request ID, resends requests whose
// connection could not be made (the request never left: safe to resend),
// and records status, headers and the first bytes of the body.
type recordingTransport struct {
	base    http.RoundTripper
	resends int
	backoff time.Duration
	rand    func() float64
	// maxBody is http.max_body_bytes (see limitedBody).
	maxBody int64
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex != nil && ex.requestID != "" {
		req = req.Clone(req.Context())
		req.Header.Set("X-Request-ID", ex.requestID)
		// Not under the canonical "Idempotency-Key": net/http treats a POST
		// with that map entry as replayable and silently sends it again
		// when a reused connection fails after the request was written,
		// an upstream request no history would record. Header names are
		// case-insensitive on the wire, so the upstream reads the same key;
		// net/http still resends a request of which nothing was written.
		req.Header["idempotency-key"] = []string{ex.requestID}
	}
	if ex != nil && req.Body != nil && (ex.continuation == config.ContinueVLLM || ex.continuation == config.ContinueDeepSeek || len(ex.extra) > 0) {
		var err error
		if req, err = rewriteBody(req, ex.continuation, ex.extra); err != nil {
			return nil, err
		}
	}
	for n := 0; ; n++ {
		resp, err := t.base.RoundTrip(req)
		if err != nil && isConnectError(err) && n < t.resends && req.GetBody != nil && (ex == nil || ex.mayResend == nil || ex.mayResend(n)) {
			wait := callstate.FullJitter(n, t.backoff, 4*t.backoff<<n, t.rand())
			select {
			case <-req.Context().Done():
				return nil, err
			case <-time.After(wait):
			}
			body, berr := req.GetBody()
			if berr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
			if ex != nil {
				ex.mu.Lock()
				ex.connectResends++
				ex.mu.Unlock()
			}
			continue
		}
		if err == nil {
			// go-openai reads a reply whole (a plain or error body) or a
			// line at a time (a stream): never past the limit.
			sse := resp.StatusCode < 300 && req.Header.Get("Accept") == "text/event-stream"
			// go-openai keeps a stream's lines that are not data lines (to
			// report an error body); Anthropic's SDK reads its events' own
			// lines ("event: …") and keeps none of them.
			keeps := req.Header.Get("Anthropic-Version") == ""
			resp.Body = &limitedBody{ReadCloser: resp.Body, limit: t.maxBody, sse: sse, keepsOther: keeps, ex: ex}
		}
		if ex == nil {
			return resp, err
		}
		if err != nil {
			if isHeaderTimeout(err) {
				ex.mu.Lock()
				ex.headerTimedOut = true
				ex.mu.Unlock()
			}
			return nil, err
		}
		ex.mu.Lock()
		ex.status = resp.StatusCode
		ex.header = resp.Header.Clone()
		ex.mu.Unlock()
		resp.Body = &teeBody{ReadCloser: resp.Body, ex: ex}
		return resp, nil
	}
}

// rewriteBody rewrites a chat request's JSON body, keeping every other
// field: extra fields are added at the top level as they are (passthrough
// fields go-openai has no place for), and with a continuation style the
// server continues the final assistant message: vLLM's top-level
// "continue_final_message": true and "add_generation_prompt": false, or
// DeepSeek's "prefix": true on that message.
func rewriteBody(req *http.Request, style config.Continuation, extra map[string]json.RawMessage) (*http.Request, error) {
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	for k, v := range extra {
		body[k] = v
	}
	switch style {
	case config.ContinueVLLM:
		body["continue_final_message"] = json.RawMessage("true")
		body["add_generation_prompt"] = json.RawMessage("false")
	case config.ContinueDeepSeek:
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(body["messages"], &msgs); err != nil || len(msgs) == 0 {
			return nil, fmt.Errorf("continuation: request has no messages to continue")
		}
		msgs[len(msgs)-1]["prefix"] = json.RawMessage("true")
		if body["messages"], err = json.Marshal(msgs); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the fields as the caller wrote them
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(out))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	req.ContentLength = int64(len(out))
	return req, nil
}

type teeBody struct {
	io.ReadCloser
	ex *exchange
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.ex.mu.Lock()
		if room := maxRecordedBody - b.ex.body.Len(); room > 0 {
			b.ex.body.Write(p[:min(n, room)])
		}
		b.ex.mu.Unlock()
	}
	return n, err
}

// bodyLimitError is an upstream reply over http.max_body_bytes: the
// attempt is body_error.
type bodyLimitError struct {
	// what went over the limit: "response body", "streamed answer", …
	what  string
	limit int64
}

func (e *bodyLimitError) Error() string {
	return fmt.Sprintf("%s over the limit of %d bytes (http.max_body_bytes)", e.what, e.limit)
}

// limitedBody stops reading an upstream reply at the limit, so that a
// faulty upstream (an endless body, one endless line) cannot exhaust the
// worker's memory: go-openai reads a plain or error body whole, so the
// whole body counts; it reads a stream line by line and discards each
// data line once decoded (stream counts the answer it assembles), but
// keeps every other line (comments, an error spread over lines) for an
// error message, so one line and all lines that are not data lines count.
// Over the limit, Read returns a *bodyLimitError, recorded in ex.
type limitedBody struct {
	io.ReadCloser
	limit int64
	sse   bool
	// keepsOther: the client keeps a stream's lines that are not data
	// lines, which then count against the limit together.
	keepsOther bool
	ex         *exchange // nil: nothing to record

	n   int64 // plain: bytes so far
	err error

	// sse: the current line's length, its first non-space bytes (to tell
	// a data line), and the bytes of lines that are not data lines.
	line   int64
	head   []byte
	isData int // 0 undecided, 1 data line, -1 other line
	kept   int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if b.limit <= 0 {
		return n, err
	}
	if !b.sse {
		if b.n+int64(n) > b.limit {
			n = int(b.limit - b.n)
			return n, b.over(&bodyLimitError{what: "response body", limit: b.limit})
		}
		b.n += int64(n)
		return n, err
	}
	for i, c := range p[:n] {
		if lerr := b.sseByte(c); lerr != nil {
			return i, b.over(lerr)
		}
	}
	return n, err
}

// sseByte counts one byte of a streamed reply.
func (b *limitedBody) sseByte(c byte) *bodyLimitError {
	if c == '\n' {
		if b.isData == 0 && len(b.head) > 0 {
			b.kept += int64(len(b.head)) // a short line that is not data
		}
		b.line, b.head, b.isData = 0, b.head[:0], 0
		return nil
	}
	b.line++
	if b.line > b.limit {
		return &bodyLimitError{what: "a line of the streamed reply", limit: b.limit}
	}
	switch b.isData {
	case 0:
		if c == ' ' || c == '\t' || c == '\r' {
			if len(b.head) == 0 {
				return nil // leading space: go-openai trims it
			}
		}
		b.head = append(b.head, c)
		if len(b.head) < len("data:") {
			return nil
		}
		if string(b.head) == "data:" {
			b.isData = 1
			return nil
		}
		b.isData = -1
		b.kept += int64(len(b.head))
	case -1:
		if c != '\r' {
			b.kept++
		}
	}
	if b.keepsOther && b.kept > b.limit {
		return &bodyLimitError{what: "the streamed reply's lines that are not data lines", limit: b.limit}
	}
	return nil
}

func (b *limitedBody) over(e *bodyLimitError) error {
	b.err = e
	if b.ex != nil {
		b.ex.mu.Lock()
		if b.ex.overLimit == nil {
			b.ex.overLimit = e
		}
		b.ex.mu.Unlock()
	}
	return e
}

// isConnectError reports whether err happened before the request was sent:
// dialing, DNS, TLS handshake. Nothing reached the upstream, so a resend
// cannot duplicate work.
func isConnectError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func isHeaderTimeout(err error) bool {
	return strings.Contains(err.Error(), "timeout awaiting response headers")
}

// newHTTPClient builds the one HTTP client of the process: a connect
// timeout, connect-only resends at the network layer, and the recorder.
// There is no response-header timeout here: a non-streamed reply sends its
// headers only when the answer is generated, so the wait for headers is
// bounded by the attempt's timeout, and a streamed reply by its
// first-token timeout (see CallModel).
func newHTTPClient(cfg *config.Config, base http.RoundTripper, rnd func() float64) *http.Client {
	if base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: cfg.HTTP.ConnectTimeout.D(), KeepAlive: 30 * time.Second}).DialContext
		tr.MaxIdleConnsPerHost = 256
		// Every call in flight holds one connection and its two buffers
		// for the whole generation; 4 KiB each (the default) is 8 KiB a
		// call. A request is written once and a streamed reply is read
		// in small chunks, so 1 KiB each loses nothing measurable.
		tr.WriteBufferSize = 1 << 10
		tr.ReadBufferSize = 1 << 10
		base = tr
	}
	return &http.Client{Transport: &recordingTransport{
		base:    base,
		resends: cfg.Backoff.ConnectRetries,
		backoff: cfg.Backoff.ConnectBase.D(),
		rand:    rnd,
		maxBody: int64(cfg.HTTP.MaxBodyBytes),
	}}
}
