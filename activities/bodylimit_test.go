package activities

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// endless is a faulty upstream: it answers with status and head, then
// writes piece again and again as fast as the client reads, for ever. A
// safety cap (far above any limit) stops a test run without the limit from
// eating the machine: the server then holds the connection open, so such a
// run ends only at the attempt's timeout.
type endless struct {
	status      int
	contentType string
	head, piece string
	sent        atomic.Int64
}

const endlessCap = 64 << 20

func (e *endless) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", e.contentType)
	w.WriteHeader(e.status)
	n, _ := fmt.Fprint(w, e.head)
	e.sent.Add(int64(n))
	for e.sent.Load() < endlessCap {
		n, err := fmt.Fprint(w, e.piece)
		e.sent.Add(int64(n))
		if err != nil {
			return
		}
	}
	<-r.Context().Done()
}

// TestOversizedBodyIsBodyError: an upstream that sends a body without end
// (a plain reply, an error reply, a streamed answer, one SSE line, comment
// lines) no longer holds the attempt and the worker's memory until the
// attempt's timeout: reading stops at http.max_body_bytes, the attempt
// ends at once as body_error, and the upstream could send only a bounded
// amount (what the connection buffers) before the client hung up.
func TestOversizedBodyIsBodyError(t *testing.T) {
	text := strings.Repeat("a", 4096)
	cases := []struct {
		name   string
		stream bool
		up     *endless
		reason string
	}{
		{"endless plain reply", false, &endless{status: 200, contentType: "application/json",
			head: `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`, piece: text}, "response body"},
		{"endless error reply", false, &endless{status: 500, contentType: "text/html",
			head: "<html><body>", piece: "<p>" + text + "</p>"}, "response body"},
		{"endless error reply to a stream", true, &endless{status: 503, contentType: "application/json",
			head: `{"error":{"message":"`, piece: text}, "response body"},
		{"endless streamed answer", true, &endless{status: 200, contentType: "text/event-stream",
			piece: "data: " + delta(text) + "\n\n"}, "streamed answer"},
		{"endless SSE line", true, &endless{status: 200, contentType: "text/event-stream",
			head: "data: " + `{"choices":[{"index":0,"delta":{"content":"`, piece: text}, "line"},
		{"endless comment lines", true, &endless{status: 200, contentType: "text/event-stream",
			head: "data: " + delta("hi") + "\n\n", piece: ": " + text + "\n"}, "lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(c.up.serve))
			defer srv.Close()
			cfg := config.DefaultConfig()
			for i := range cfg.Models {
				cfg.Models[i].BaseURL = srv.URL + "/v1"
				cfg.Models[i].Stream = c.stream
			}
			class, reason, took := attemptOnce(t, cfg, 20*time.Second)
			if class != failure.BodyError {
				t.Fatalf("class %q (%s) after %v, want body_error", class, reason, took)
			}
			if !strings.Contains(reason, "http.max_body_bytes") || !strings.Contains(reason, c.reason) {
				t.Errorf("reason %q does not name the limit and what went over it (%q)", reason, c.reason)
			}
			if took > 5*time.Second {
				t.Errorf("the attempt took %v: the body was read until something else ended it", took)
			}
			if sent := c.up.sent.Load(); sent >= endlessCap/2 {
				t.Errorf("the upstream sent %d bytes before the client stopped reading", sent)
			}
		})
	}
}

// attemptOnce runs one CallModel attempt on the first model of cfg and
// returns its class (None on success) and reason.
func attemptOnce(t *testing.T, cfg *config.Config, timeout time.Duration) (failure.Class, string, time.Duration) {
	t.Helper()
	a, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	val, err := callAttempt(t, a, "Tell me everything.", callstate.Shape{}, timeout)
	took := time.Since(start)
	if err == nil {
		var out CallOutcome
		if gerr := val.Get(&out); gerr != nil {
			t.Fatal(gerr)
		}
		return failure.None, out.Reason, took
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("attempt failed without a class: %v", err)
	}
	return failure.Class(appErr.Type()), appErr.Error(), took
}

// TestBodyLimitKeepsWhatFits: the limit counts what the attempt keeps,
// not the wire: a streamed answer whose SSE framing is many times the
// limit but whose text fits is an answer; a plain reply under the limit
// is an answer; a plain reply small on the wire whose answer JSON-encodes
// past the limit (each < takes six bytes in history) is body_error.
func TestBodyLimitKeepsWhatFits(t *testing.T) {
	var chunks []sseEvent
	for range 200 {
		chunks = append(chunks, sseEvent{0, delta("0123456789")})
	}
	chunks = append(chunks, sseEvent{0, finish("stop")})
	plain := func(content string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, content)
		}
	}
	cases := []struct {
		name    string
		stream  bool
		handler http.HandlerFunc
		class   failure.Class
		reason  string
	}{
		{"long stream of short text", true, sse{events: chunks, done: true}.serve, failure.None, ""},
		{"plain reply under the limit", false, plain(strings.Repeat("x", 3000)), failure.None, ""},
		{"plain reply whose answer encodes past the limit", false, plain(strings.Repeat("<", 1000)),
			failure.BodyError, "answer (6000 bytes JSON-encoded) over the limit of 4096 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			cfg := config.DefaultConfig()
			cfg.HTTP.MaxBodyBytes = config.MinBodyBytes
			for i := range cfg.Models {
				cfg.Models[i].BaseURL = srv.URL + "/v1"
				cfg.Models[i].Stream = c.stream
			}
			class, reason, _ := attemptOnce(t, cfg, 10*time.Second)
			if class != c.class || !strings.Contains(reason, c.reason) {
				t.Fatalf("class %q (%s), want %q (…%s…)", class, reason, c.class, c.reason)
			}
		})
	}
}
