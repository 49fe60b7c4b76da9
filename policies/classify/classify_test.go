package classify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
	openai "github.com/sashabaranov/go-openai"
)

// recorder is the small recording RoundTripper the call activity uses in
// production: go-openai keeps neither the headers of an error response nor
// the raw body, so the transport keeps the status, the headers and the
// first 64 KiB of the body.
type recorder struct {
	base http.RoundTripper

	mu     sync.Mutex
	status int
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.status, r.header = resp.StatusCode, resp.Header.Clone()
	r.mu.Unlock()
	resp.Body = &teeBody{ReadCloser: resp.Body, r: r}
	return resp, nil
}

type teeBody struct {
	io.ReadCloser
	r *recorder
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	if room := 64<<10 - b.r.body.Len(); n > 0 && room > 0 {
		b.r.body.Write(p[:min(n, room)])
	}
	b.r.mu.Unlock()
	return n, err
}

// classifyNow is the fixed clock of these tests (Retry-After dates).
var classifyNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// upstream describes one attempt against a real server through a real
// go-openai client.
type upstream struct {
	handler   http.HandlerFunc // served by httptest; nil with baseURL
	tls       bool             // serve with TLS the client does not trust
	baseURL   string           // instead of a server (closed port, bad host)
	transport *http.Transport  // instead of the default transport
	timeout   time.Duration    // attempt deadline (default 5s)
	cancel    time.Duration    // cancel the attempt after this long
	stream    bool             // ask go-openai for a stream (it refuses)
}

const headerTimeout = 150 * time.Millisecond

// run makes the attempt and fills the Observation the way the call
// activity does.
func (u upstream) run(t *testing.T) Observation {
	t.Helper()
	base := u.baseURL
	if u.handler != nil {
		srv := httptest.NewUnstartedServer(u.handler)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake errors are the point of some cases
		if u.tls {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		base = srv.URL + "/v1"
	}
	tr := u.transport
	if tr == nil {
		tr = &http.Transport{ResponseHeaderTimeout: headerTimeout}
	}
	t.Cleanup(tr.CloseIdleConnections)
	rec := &recorder{base: tr}
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = base
	cfg.HTTPClient = &http.Client{Transport: rec}
	client := openai.NewClientWithConfig(cfg)

	timeout := u.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if u.cancel > 0 {
		time.AfterFunc(u.cancel, cancel)
	}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:    "qwen-72b",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}},
		Stream:   u.stream,
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	obs := Observation{Err: err, Status: rec.status, Header: rec.header, Body: bytes.Clone(rec.body.Bytes()), Now: classifyNow}
	if err == nil {
		obs.Response = &resp
	}
	return obs
}

// reply writes a response with a status, headers and a body.
func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			if strings.HasPrefix(strings.TrimSpace(body), "<") {
				w.Header().Set("Content-Type", "text/html")
			} else {
				w.Header().Set("Content-Type", "application/json")
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func chatBody(content, finish string, extra ...string) string {
	msg := fmt.Sprintf(`"role":"assistant","content":%q`, content)
	for _, e := range extra {
		msg += "," + e
	}
	return fmt.Sprintf(`{"id":"c-1","object":"chat.completion","created":1,"model":"qwen-72b",
"choices":[{"index":0,"message":{%s},"finish_reason":%q}],
"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}`, msg, finish)
}

// ollamaBusy is Ollama v0.17.4's refusal when its queue of pending
// requests is full (HTTP 503, no Retry-After; two spaces as sent).
const ollamaBusy = `{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error","param":null,"code":null}}`

// apache503 is Apache httpd's stock 503 page, which mod_proxy sends when
// its backend is down.
const apache503 = "<!DOCTYPE HTML PUBLIC \"-//IETF//DTD HTML 2.0//EN\">\n<html><head>\n<title>503 Service Unavailable</title>\n</head><body>\n<h1>Service Unavailable</h1>\n<p>The server is temporarily unable to service your\nrequest due to maintenance downtime or capacity\nproblems. Please try again later.</p>\n</body></html>\n"

const nginx502 = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"

// sleep waits d or until the client gives up (the server notices that
// only once the request body was read).
func sleep(r *http.Request, d time.Duration) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
}

// closedPortURL is the base URL of a port nothing listens on.
func closedPortURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// failingDNS resolves every name through a DNS server that refuses.
func failingDNS(t *testing.T) *http.Transport {
	dead := closedPortURL(t)
	u, _ := url.Parse(dead)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", u.Host)
	}}
	dialer := &net.Dialer{Resolver: resolver}
	return &http.Transport{DialContext: dialer.DialContext, ResponseHeaderTimeout: headerTimeout}
}

func TestClassifyUpstream(t *testing.T) {
	type want struct {
		class      failure.Class
		status     int
		code       string
		message    string // substring of Verdict.Message
		reason     string // substring of Verdict.Reason
		retryAfter time.Duration
		hasRA      bool
		canceled   bool
	}
	cases := []struct {
		name string
		up   func(t *testing.T) upstream
		// attemptFlag sets AttemptTimedOut from the attempt's deadline, as
		// the activity does.
		attemptFlag bool
		want        want
	}{
		// success
		{name: "success", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("Hello!", "stop"))}
		}, want: want{class: failure.None, status: 200, reason: "finish_reason stop"}},
		{name: "success/tool call without content", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("", "tool_calls", `"tool_calls":[{"id":"t1","type":"function","function":{"name":"lookup","arguments":"{}"}}]`))}
		}, want: want{class: failure.None, status: 200, reason: "tool call"}},
		{name: "success/think block then answer", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("<think>the user greets</think>Hello!", "stop"))}
		}, want: want{class: failure.None, status: 200}},

		// connect
		{name: "connect/refused (closed port)", up: func(t *testing.T) upstream {
			return upstream{baseURL: closedPortURL(t)}
		}, want: want{class: failure.Connect, reason: "dial failed"}},
		{name: "connect/DNS failure", up: func(t *testing.T) upstream {
			return upstream{baseURL: "http://llm.example.test/v1", transport: failingDNS(t)}
		}, want: want{class: failure.Connect, reason: "DNS lookup failed"}},
		{name: "connect/TLS untrusted certificate", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("never", "stop")), tls: true}
		}, want: want{class: failure.Connect, reason: "TLS handshake failed"}},
		{name: "connect/TLS to a plain HTTP port", up: func(*testing.T) upstream {
			srv := httptest.NewServer(reply(200, chatBody("never", "stop")))
			t.Cleanup(srv.Close)
			return upstream{baseURL: strings.Replace(srv.URL, "http://", "https://", 1) + "/v1"}
		}, want: want{class: failure.Connect, reason: "TLS handshake failed"}},

		// read_timeout
		{name: "read_timeout/no headers within the header timeout", up: func(*testing.T) upstream {
			return upstream{handler: func(w http.ResponseWriter, r *http.Request) { sleep(r, 2*time.Second) }}
		}, want: want{class: failure.ReadTimeout, reason: "timeout awaiting response headers"}},

		// timeout
		{name: "timeout/attempt deadline while waiting for headers", attemptFlag: true, up: func(*testing.T) upstream {
			return upstream{timeout: 60 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) { sleep(r, 2*time.Second) }}
		}, want: want{class: failure.Timeout, reason: "attempt deadline exceeded"}},
		{name: "timeout/attempt deadline while reading the body", attemptFlag: true, up: func(*testing.T) upstream {
			return upstream{timeout: 100 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				_, _ = io.WriteString(w, `{"id":"c-1","choices":[`)
				w.(http.Flusher).Flush()
				sleep(r, 2*time.Second)
			}}
		}, want: want{class: failure.Timeout, status: 200}},
		{name: "timeout/deadline recognised without the flag", up: func(*testing.T) upstream {
			return upstream{timeout: 100 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				sleep(r, 2*time.Second)
			}}
		}, want: want{class: failure.Timeout, status: 200, reason: "deadline exceeded"}},
		{name: "timeout/408", up: func(*testing.T) upstream {
			return upstream{handler: reply(408, `{"error":{"message":"request timeout"}}`)}
		}, want: want{class: failure.Timeout, status: 408}},
		{name: "timeout/504 gateway HTML", up: func(*testing.T) upstream {
			return upstream{handler: reply(504, "<html><head><title>504 Gateway Time-out</title></head><body>…</body></html>")}
		}, want: want{class: failure.Timeout, status: 504, message: "504 Gateway Time-out"}},

		// queue_full
		{name: "queue_full/X-RateLimit-Remaining 0 on a 503", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"busy"}}`, "X-RateLimit-Remaining", "0")}
		}, want: want{class: failure.QueueFull, status: 503, reason: "X-RateLimit-Remaining: 0 (nothing remaining"}},
		{name: "queue_full/body code queue_full", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"the inference queue is full","type":"server_error","code":"queue_full"}}`)}
		}, want: want{class: failure.QueueFull, status: 503, code: "queue_full", message: "inference queue is full"}},
		{name: "queue_full/429 with code queue_full", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"queue full","code":"queue_full"}}`, "Retry-After", "1")}
		}, want: want{class: failure.QueueFull, status: 429, retryAfter: time.Second, hasRA: true}},
		{name: "queue_full/529 overloaded", up: func(*testing.T) upstream {
			return upstream{handler: reply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}
		}, want: want{class: failure.QueueFull, status: 529, message: "Overloaded"}},
		{name: "auth/Anthropic's billing_error (its type, whatever the status)", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low"}}`)}
		}, want: want{class: failure.Auth, status: 429, message: "Your credit balance is too low"}},
		{name: "queue_full/429 without Retry-After and nothing remaining", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"slow down"}}`, "X-RateLimit-Remaining", "0")}
		}, want: want{class: failure.QueueFull, status: 429}},
		{name: "queue_full/Ollama 503 server busy, maximum pending requests (real body, no Retry-After)", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, ollamaBusy)}
		}, want: want{class: failure.QueueFull, status: 503, message: "server busy, please try again. maximum pending requests exceeded", reason: "HTTP 503 api_error (server busy: backpressure)"}},
		{name: "queue_full/OpenAI 503 engine overloaded", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`)}
		}, want: want{class: failure.QueueFull, status: 503, message: "currently overloaded"}},
		{name: "queue_full/vLLM 503 overloaded with Retry-After", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"object":"error","message":"Server overloaded: too many pending requests","type":"ServiceUnavailableError","param":null,"code":503}`, "Retry-After", "2")}
		}, want: want{class: failure.QueueFull, status: 503, retryAfter: 2 * time.Second, hasRA: true}},
		{name: "queue_full/503 plain text, queue is full", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, "Request queue is full, try again later", "Content-Type", "text/plain")}
		}, want: want{class: failure.QueueFull, status: 503}},
		{name: "queue_full/503 at capacity", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"The model is at capacity. Please retry."}}`)}
		}, want: want{class: failure.QueueFull, status: 503}},
		{name: "queue_full/503 服务繁忙", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"服务繁忙，请稍后重试","type":"server_error"}}`)}
		}, want: want{class: failure.QueueFull, status: 503}},
		{name: "queue_full/HTTP 200 with a queue_full error object", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, `{"error":{"message":"queue is full","code":"queue_full"}}`)}
		}, want: want{class: failure.QueueFull, status: 200, code: "queue_full"}},

		// rate_limited
		{name: "rate_limited/Retry-After seconds", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "2")}
		}, want: want{class: failure.RateLimited, status: 429, code: "rate_limit_exceeded", retryAfter: 2 * time.Second, hasRA: true, reason: "Retry-After: 2s"}},
		{name: "rate_limited/retry-after-ms wins", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"slow down"}}`, "retry-after-ms", "1500", "Retry-After", "2")}
		}, want: want{class: failure.RateLimited, status: 429, retryAfter: 1500 * time.Millisecond, hasRA: true}},
		{name: "rate_limited/Retry-After HTTP date", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"slow down"}}`, "Retry-After", classifyNow.Add(30*time.Second).Format(http.TimeFormat))}
		}, want: want{class: failure.RateLimited, status: 429, retryAfter: 30 * time.Second, hasRA: true}},
		{name: "rate_limited/429 without any header", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, "Too Many Requests", "Content-Type", "text/plain")}
		}, want: want{class: failure.RateLimited, status: 429, message: "Too Many Requests"}},
		{name: "rate_limited/tokens-per-minute message is not context length", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"Too many tokens per min (TPM): Limit 1000"}}`, "Retry-After", "3")}
		}, want: want{class: failure.RateLimited, status: 429, retryAfter: 3 * time.Second, hasRA: true}},
		{name: "auth/429 insufficient_quota", up: func(*testing.T) upstream {
			return upstream{handler: reply(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)}
		}, want: want{class: failure.Auth, status: 429, code: "insufficient_quota", reason: "quota exhausted"}},

		// context_length_exceeded
		{name: "context_length/OpenAI code", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)}
		}, want: want{class: failure.ContextLengthExceeded, status: 400, code: "context_length_exceeded"}},
		{name: "context_length/vLLM message", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`)}
		}, want: want{class: failure.ContextLengthExceeded, status: 400, message: "maximum context length is 4096"}},
		{name: "context_length/413 that says too many tokens", up: func(*testing.T) upstream {
			return upstream{handler: reply(413, `{"error":"prompt is too long: 200001 tokens > 200000 maximum"}`)}
		}, want: want{class: failure.ContextLengthExceeded, status: 413}},

		// output_truncated
		{name: "output_truncated/finish_reason length", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("The answer is", "length"))}
		}, want: want{class: failure.OutputTruncated, status: 200, reason: "finish_reason length"}},
		{name: "output_truncated/empty content", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("", "stop"))}
		}, want: want{class: failure.OutputTruncated, status: 200, reason: "empty content"}},
		{name: "output_truncated/reasoning_content only", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("", "stop", `"reasoning_content":"Let me think about this step by step…"`))}
		}, want: want{class: failure.OutputTruncated, status: 200, reason: "reasoning only"}},
		{name: "output_truncated/only a think block", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("<think>\nThe user asks about refunds…\n</think>\n\n", "stop"))}
		}, want: want{class: failure.OutputTruncated, status: 200, reason: "only a <think> block"}},
		{name: "output_truncated/unclosed think block", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("<think>The user asks about refunds and I should", "stop"))}
		}, want: want{class: failure.OutputTruncated, status: 200}},

		// service_unavailable
		{name: "service_unavailable/503 maintenance JSON", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"Service under maintenance until 14:00 UTC","type":"service_unavailable"}}`, "Retry-After", "600")}
		}, want: want{class: failure.ServiceUnavailable, status: 503, retryAfter: 10 * time.Minute, hasRA: true, message: "maintenance"}},
		{name: "service_unavailable/503 maintenance HTML page", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, "<!DOCTYPE html><html><head><title>Scheduled maintenance</title></head><body><h1>We'll be back soon</h1></body></html>")}
		}, want: want{class: failure.ServiceUnavailable, status: 503, message: "Scheduled maintenance"}},

		// server_error
		{name: "server_error/500 JSON", up: func(*testing.T) upstream {
			return upstream{handler: reply(500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`)}
		}, want: want{class: failure.ServerError, status: 500}},
		{name: "server_error/502 HTML page", up: func(*testing.T) upstream {
			return upstream{handler: reply(502, nginx502)}
		}, want: want{class: failure.ServerError, status: 502, message: "502 Bad Gateway", reason: "HTML page"}},
		{name: "server_error/503 not maintenance", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"no healthy upstream"}}`)}
		}, want: want{class: failure.ServerError, status: 503}},
		{name: "server_error/503 loading model (llama.cpp): down, not busy", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`)}
		}, want: want{class: failure.ServerError, status: 503, message: "Loading model"}},
		{name: "server_error/503 busy while the model is loading: down", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, `{"error":{"message":"server busy: model is loading"}}`)}
		}, want: want{class: failure.ServerError, status: 503}},
		{name: "server_error/503 Envoy upstream connect error", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, "upstream connect error or disconnect/reset before headers. reset reason: connection refused", "Content-Type", "text/plain")}
		}, want: want{class: failure.ServerError, status: 503}},
		{name: "server_error/503 nginx page for a dead backend", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")}
		}, want: want{class: failure.ServerError, status: 503, reason: "HTML page"}},
		{name: "server_error/503 proxy page that says busy: a proxy's, not the server's queue", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, "<html><head><title>Server Too Busy</title></head><body>The server is busy.</body></html>")}
		}, want: want{class: failure.ServerError, status: 503, reason: "HTML page"}},
		{name: "server_error/503 Apache proxy page for a dead backend (its stock text names maintenance)", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, apache503)}
		}, want: want{class: failure.ServerError, status: 503, message: "503 Service Unavailable"}},
		{name: "server_error/503 bare Service Unavailable: down, no busy wording", up: func(*testing.T) upstream {
			return upstream{handler: reply(503, "Service Unavailable", "Content-Type", "text/plain")}
		}, want: want{class: failure.ServerError, status: 503}},
		{name: "server_error/reset after the request was sent (hijack and close)", up: func(*testing.T) upstream {
			return upstream{handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
			}}
		}, want: want{class: failure.ServerError, reason: "connection closed by the upstream"}},
		{name: "server_error/TCP RST after the request was sent", up: func(*testing.T) upstream {
			return upstream{handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					if tc, ok := conn.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					conn.Close()
				}
			}}
		}, want: want{class: failure.ServerError}},
		{name: "server_error/truncated error body", up: func(*testing.T) upstream {
			return upstream{handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "500")
				w.WriteHeader(500)
				_, _ = io.WriteString(w, `{"error":{"message":"boo`)
			}}
		}, want: want{class: failure.ServerError, status: 500, reason: "body unreadable"}},

		// body_error
		{name: "body_error/HTTP 200 with an error object", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, `{"error":{"message":"Request timed out during generation","code":"timeout"}}`)}
		}, want: want{class: failure.BodyError, status: 200, code: "timeout", message: "Request timed out during generation", reason: "error object"}},
		{name: "body_error/HTTP 200 without choices", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, `{"id":"c-1","object":"chat.completion","choices":[]}`)}
		}, want: want{class: failure.BodyError, status: 200, reason: "without choices"}},
		{name: "body_error/HTTP 200 malformed JSON", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, `{"id":"c-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`)}
		}, want: want{class: failure.BodyError, status: 200, reason: "truncated body"}},
		{name: "body_error/HTTP 200 garbage", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, `OK then`)}
		}, want: want{class: failure.BodyError, status: 200, reason: "malformed JSON"}},
		{name: "body_error/HTTP 200 HTML page", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, "<html><head><title>Login required</title></head><body>portal</body></html>")}
		}, want: want{class: failure.BodyError, status: 200, message: "Login required", reason: "HTML page instead of JSON"}},
		{name: "body_error/HTTP 200 empty body", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, "")}
		}, want: want{class: failure.BodyError, status: 200, reason: "empty body"}},
		{name: "body_error/HTTP 200 cut short by the connection", up: func(*testing.T) upstream {
			return upstream{handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "2000")
				w.WriteHeader(200)
				_, _ = io.WriteString(w, chatBody("Hello", "stop")[:60])
			}}
		}, want: want{class: failure.BodyError, status: 200, reason: "truncated body"}},

		// invalid_request
		{name: "invalid_request/400", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"error":{"message":"'messages' must contain the word 'json'","type":"invalid_request_error","param":"messages","code":null}}`)}
		}, want: want{class: failure.InvalidRequest, status: 400, message: "must contain the word"}},
		{name: "invalid_request/404 on a path", up: func(*testing.T) upstream {
			return upstream{handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }}
		}, want: want{class: failure.InvalidRequest, status: 404, message: "404 page not found"}},
		{name: "invalid_request/413", up: func(*testing.T) upstream {
			return upstream{handler: reply(413, "<html><head><title>413 Request Entity Too Large</title></head></html>")}
		}, want: want{class: failure.InvalidRequest, status: 413, message: "413 Request Entity Too Large"}},
		{name: "invalid_request/422 FastAPI detail", up: func(*testing.T) upstream {
			return upstream{handler: reply(422, `{"detail":[{"loc":["body","temperature"],"msg":"ensure this value is less than or equal to 2","type":"value_error"}]}`)}
		}, want: want{class: failure.InvalidRequest, status: 422, message: "body.temperature: ensure this value is less than or equal to 2"}},
		{name: "invalid_request/refused by go-openai before sending", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("never", "stop")), stream: true}
		}, want: want{class: failure.InvalidRequest, reason: "refused by the client before sending"}},

		// auth
		{name: "auth/401", up: func(*testing.T) upstream {
			return upstream{handler: reply(401, `{"error":{"message":"Incorrect API key provided: sk-****","type":"invalid_request_error","code":"invalid_api_key"}}`)}
		}, want: want{class: failure.Auth, status: 401, code: "invalid_api_key"}},
		{name: "auth/403 HTML", up: func(*testing.T) upstream {
			return upstream{handler: reply(403, "<html><head><title>403 Forbidden</title></head></html>")}
		}, want: want{class: failure.Auth, status: 403, message: "403 Forbidden"}},
		{name: "auth/402 payment required", up: func(*testing.T) upstream {
			return upstream{handler: reply(402, `{"error":{"message":"Insufficient balance"}}`)}
		}, want: want{class: failure.Auth, status: 402, reason: "quota exhausted"}},

		// model_not_found
		{name: "model_not_found/OpenAI 404 code", up: func(*testing.T) upstream {
			return upstream{handler: reply(404, `{"error":{"message":"The model `+"`qwen-72b`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)}
		}, want: want{class: failure.ModelNotFound, status: 404, code: "model_not_found"}},
		{name: "model_not_found/vLLM 404 message", up: func(*testing.T) upstream {
			return upstream{handler: reply(404, `{"object":"error","message":"The model `+"`qwen-72b`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)}
		}, want: want{class: failure.ModelNotFound, status: 404}},
		{name: "model_not_found/Ollama 400 message", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"error":"model \"qwen-72b\" not found, try pulling it first"}`)}
		}, want: want{class: failure.ModelNotFound, status: 400}},

		// content_filter
		{name: "content_filter/finish_reason", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("", "content_filter"))}
		}, want: want{class: failure.ContentFilter, status: 200}},
		{name: "content_filter/Azure code", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`)}
		}, want: want{class: failure.ContentFilter, status: 400, code: "content_filter"}},
		{name: "content_filter/content_policy_violation", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}`)}
		}, want: want{class: failure.ContentFilter, status: 400}},
		{name: "content_filter/DashScope data_inspection_failed", up: func(*testing.T) upstream {
			return upstream{handler: reply(400, `{"error":{"message":"Input data may contain inappropriate content.","type":"data_inspection_failed","code":"data_inspection_failed"}}`)}
		}, want: want{class: failure.ContentFilter, status: 400}},
		{name: "content_filter/refusal", up: func(*testing.T) upstream {
			return upstream{handler: reply(200, chatBody("", "stop", `"refusal":"I can't help with that."`))}
		}, want: want{class: failure.ContentFilter, status: 200, message: "I can't help with that."}},

		// cancellation
		{name: "canceled by the caller", up: func(*testing.T) upstream {
			return upstream{cancel: 50 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) { sleep(r, 2*time.Second) }}
		}, want: want{class: failure.Timeout, canceled: true, reason: "cancelled by the caller"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := c.up(t)
			start := time.Now()
			obs := u.run(t)
			if c.attemptFlag {
				timeout := u.timeout
				obs.AttemptTimedOut = time.Since(start) >= timeout
			}
			v := Classify(obs)
			t.Logf("%s: %s", v.Class, v.Reason)
			w := c.want
			if v.Class != w.class {
				t.Errorf("Class = %q, want %q (reason %q, err %v)", v.Class, w.class, v.Reason, obs.Err)
			}
			if v.Status != w.status {
				t.Errorf("Status = %d, want %d", v.Status, w.status)
			}
			if w.code != "" && v.Code != w.code {
				t.Errorf("Code = %q, want %q", v.Code, w.code)
			}
			if !strings.Contains(v.Message, w.message) {
				t.Errorf("Message = %q, want it to contain %q", v.Message, w.message)
			}
			if !strings.Contains(v.Reason, w.reason) {
				t.Errorf("Reason = %q, want it to contain %q", v.Reason, w.reason)
			}
			if v.HasRetryAfter != w.hasRA || v.RetryAfter != w.retryAfter {
				t.Errorf("RetryAfter = %v/%v, want %v/%v", v.RetryAfter, v.HasRetryAfter, w.retryAfter, w.hasRA)
			}
			if v.Canceled != w.canceled {
				t.Errorf("Canceled = %v, want %v", v.Canceled, w.canceled)
			}
			if v.OK() != (w.class == failure.None && !w.canceled) {
				t.Errorf("OK() = %v", v.OK())
			}
			if v.Reason == "" || strings.Contains(v.Reason, "\n") {
				t.Errorf("Reason must be one non-empty line, got %q", v.Reason)
			}
			// Tenants read the reason: it never quotes the upstream's
			// words nor names its address (Message and Detail keep them).
			if m := v.Message; len(m) >= 16 && strings.Contains(v.Reason, m[:len(m)/2]) {
				t.Errorf("Reason %q quotes the upstream's message %q", v.Reason, m)
			}
			if strings.Contains(v.Reason, "127.0.0.1") || strings.Contains(v.Reason, "http://") {
				t.Errorf("Reason %q names the upstream's address", v.Reason)
			}
			if len([]rune(v.Message)) > maxMessageLen {
				t.Errorf("Message is %d runes long", len([]rune(v.Message)))
			}
		})
	}
}

// TestClassifySynthetic covers what a test server cannot produce on demand.
func TestClassifySynthetic(t *testing.T) {
	write := &url.Error{Op: "Post", URL: "http://x/v1/chat/completions", Err: &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}}
	proxy := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "proxyconnect", Net: "tcp", Err: syscall.ECONNREFUSED}}
	readReset := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	cases := []struct {
		name   string
		obs    Observation
		class  failure.Class
		reason string
	}{
		{"pre-flight: prompt over the window, nothing sent", Observation{PromptTokens: 9000, ContextWindow: 8192}, failure.ContextLengthExceeded, "9000 tokens"},
		{"nothing observed at all", Observation{}, failure.BodyError, "no response"},
		{"connect/broken pipe while writing the request", Observation{Err: write}, failure.Connect, "while sending"},
		{"connect/proxy refused", Observation{Err: proxy}, failure.Connect, "proxy"},
		{"connect/bare ECONNREFUSED", Observation{Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}, failure.Connect, "refused"},
		{"server_error/reset while reading the response", Observation{Err: readReset}, failure.ServerError, "connection closed"},
		{"body_error/bare EOF from decoding an unrecorded body", Observation{Err: io.EOF}, failure.BodyError, "empty body"},
		{"body_error/bare unexpected EOF", Observation{Err: io.ErrUnexpectedEOF}, failure.BodyError, "truncated body"},
		{"read_timeout/flag from the transport", Observation{Err: errors.New("whatever"), HeaderTimedOut: true}, failure.ReadTimeout, "header timeout"},
		{"timeout/context.DeadlineExceeded", Observation{Err: fmt.Errorf("call: %w", context.DeadlineExceeded)}, failure.Timeout, "deadline"},
		{"timeout/attempt flag wins over a generic error", Observation{Err: io.ErrUnexpectedEOF, AttemptTimedOut: true}, failure.Timeout, "attempt deadline"},
		{"success/attempt flag ignored when a response arrived", Observation{AttemptTimedOut: true, Status: 200, Response: &openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Content: "hi"}, FinishReason: "stop"}}}}, failure.None, "HTTP 200"},
		{"success/multi-part content", Observation{Response: &openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{MultiContent: []openai.ChatMessagePart{{Type: "text", Text: "hi"}}}}}}}, failure.None, "HTTP 200"},
		{"server_error/unknown error", Observation{Err: errors.New("something odd")}, failure.ServerError, "unrecognised"},
		{"canceled wins over the attempt flag", Observation{Err: context.Canceled, AttemptTimedOut: true}, failure.Timeout, "cancelled"},
		{"body_error/json error without status", Observation{Err: jsonSyntaxErr()}, failure.BodyError, "malformed JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(c.obs)
			if v.Class != c.class || !strings.Contains(v.Reason, c.reason) {
				t.Errorf("Classify = %q (%q), want %q with %q", v.Class, v.Reason, c.class, c.reason)
			}
			if v.Canceled != errors.Is(c.obs.Err, context.Canceled) {
				t.Errorf("Canceled = %v", v.Canceled)
			}
		})
	}
}

// TestClassifyStream covers streamed replies once the stream was opened.
func TestClassifyStream(t *testing.T) {
	answer := func(finish openai.FinishReason, content string) *openai.ChatCompletionResponse {
		return &openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Content: content}, FinishReason: finish}}}
	}
	inStream := fmt.Errorf("error, %w", &openai.APIError{Code: "server_error", Message: "upstream worker crashed", HTTPStatusCode: 200})
	limited := fmt.Errorf("error, %w", &openai.APIError{Code: "context_length_exceeded", Message: "maximum context length is 4096 tokens", HTTPStatusCode: 200})
	cases := []struct {
		name   string
		obs    Observation
		class  failure.Class
		reason string
	}{
		{"success", Observation{Status: 200, Stream: &Stream{Chunks: 12, Tokens: 12, Finished: true}, Response: answer("stop", "hello")}, failure.None, "HTTP 200"},
		{"read_timeout/no first token", Observation{Status: 200, Stream: &Stream{FirstTokenTimedOut: true, FirstTokenTimeout: 8 * time.Second, Err: context.Canceled}}, failure.ReadTimeout, "no first token within 8s"},
		{"stream_broken/idle", Observation{Status: 200, Stream: &Stream{Chunks: 50, Tokens: 50, IdleTimedOut: true, IdleTimeout: 20 * time.Second, Err: context.Canceled}}, failure.StreamBroken, "no chunk within 20s after 50 chunk(s)"},
		{"stream_broken/error object after text", Observation{Status: 200, Stream: &Stream{Chunks: 3, Tokens: 3, Err: inStream}}, failure.StreamBroken, "error inside the stream server_error after 3 chunk(s)"},
		{"stream_broken/connection cut", Observation{Status: 200, Stream: &Stream{Chunks: 7, Tokens: 7, Err: io.ErrUnexpectedEOF}}, failure.StreamBroken, "stream cut after 7 chunk(s)"},
		{"stream_broken/malformed chunk", Observation{Status: 200, Stream: &Stream{Chunks: 2, Tokens: 2, Err: jsonSyntaxErr()}}, failure.StreamBroken, "malformed chunk"},
		{"stream_broken/no finish_reason", Observation{Status: 200, Stream: &Stream{Chunks: 9, Tokens: 9}, Response: answer("", "partial")}, failure.StreamBroken, "without a finish_reason"},
		{"body_error/empty stream", Observation{Status: 200, Stream: &Stream{}, Response: answer("", "")}, failure.BodyError, "without a chunk"},
		{"body_error/error object before any text", Observation{Status: 200, Stream: &Stream{Err: inStream}}, failure.BodyError, "HTTP 200 server_error with an error object in the stream"},
		{"context length/error object before any text, judged by its code", Observation{Status: 200, Stream: &Stream{Err: limited}}, failure.ContextLengthExceeded, "context"},
		{"timeout/attempt deadline mid-stream", Observation{Status: 200, AttemptTimedOut: true, Stream: &Stream{Chunks: 40, Tokens: 40, Err: context.DeadlineExceeded}}, failure.Timeout, "attempt deadline exceeded after 40"},
		{"output_truncated/length", Observation{Status: 200, Stream: &Stream{Chunks: 256, Tokens: 256, Finished: true}, Response: answer("length", "long")}, failure.OutputTruncated, "finish_reason length"},
		{"content_filter", Observation{Status: 200, Stream: &Stream{Chunks: 1, Tokens: 1, Finished: true}, Response: answer("content_filter", "")}, failure.ContentFilter, "content_filter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(c.obs)
			if v.Class != c.class || !strings.Contains(v.Reason, c.reason) {
				t.Errorf("Classify = %q (%q), want %q with %q", v.Class, v.Reason, c.class, c.reason)
			}
			// Only a stream the connection cut, or one that ended without
			// a finish_reason, is the endpoint failing a request it began.
			cut := strings.HasSuffix(c.name, "connection cut") || strings.HasSuffix(c.name, "no finish_reason")
			if v.Cut != cut {
				t.Errorf("Cut = %v, want %v", v.Cut, cut)
			}
		})
	}
}

// jsonSyntaxErr is a real *json.SyntaxError.
func jsonSyntaxErr() error {
	var v any
	return json.Unmarshal([]byte(`{"a":`), &v)
}

func TestParseRetryAfter(t *testing.T) {
	now := classifyNow
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	cases := []struct {
		name string
		h    http.Header
		now  time.Time
		want time.Duration
		ok   bool
	}{
		{"no header", h(), now, 0, false},
		{"nil header", nil, now, 0, false},
		{"seconds", h("Retry-After", "2"), now, 2 * time.Second, true},
		{"zero", h("Retry-After", "0"), now, 0, true},
		{"fractional seconds", h("Retry-After", "1.5"), now, 1500 * time.Millisecond, true},
		{"spaces", h("Retry-After", " 3 "), now, 3 * time.Second, true},
		{"negative", h("Retry-After", "-1"), now, 0, false},
		{"garbage", h("Retry-After", "soon"), now, 0, false},
		{"hex is not a number here", h("Retry-After", "0x10"), now, 0, false},
		{"huge is bounded", h("Retry-After", "99999999999999"), now, maxRetryAfter, true},
		{"retry-after-ms", h("retry-after-ms", "250"), now, 250 * time.Millisecond, true},
		{"retry-after-ms fractional", h("retry-after-ms", "12.5"), now, 12500 * time.Microsecond, true},
		{"retry-after-ms wins", h("retry-after-ms", "250", "Retry-After", "9"), now, 250 * time.Millisecond, true},
		{"bad retry-after-ms falls back", h("retry-after-ms", "x", "Retry-After", "9"), now, 9 * time.Second, true},
		{"HTTP date", h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), now, 90 * time.Second, true},
		{"RFC 850 date", h("Retry-After", now.Add(time.Minute).Format(time.RFC850)), now, time.Minute, true},
		{"past date", h("Retry-After", now.Add(-time.Hour).Format(http.TimeFormat)), now, 0, true},
		{"date without a clock", h("Retry-After", now.Format(http.TimeFormat)), time.Time{}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(c.h, c.now)
			if got != c.want || ok != c.ok {
				t.Errorf("ParseRetryAfter = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestCleanMessage(t *testing.T) {
	long := strings.Repeat("é", 400)
	if got := cleanMessage(long); len([]rune(got)) != maxMessageLen || !strings.HasSuffix(got, "…") {
		t.Errorf("long message: %d runes", len([]rune(got)))
	}
	if got := cleanMessage(nginx502); got != "502 Bad Gateway" {
		t.Errorf("nginx page → %q", got)
	}
	if got := cleanMessage("<html><body><script>x()</script><p>Upstream   &amp; friends\n down</p></body></html>"); got != "Upstream & friends down" {
		t.Errorf("untitled page → %q", got)
	}
	if got := StripThinking("<think>a</think>\nB<thinking>c</thinking>"); got != "B" {
		t.Errorf("StripThinking → %q", got)
	}
}

// TestClassifyGeneric: a 5xx error body no rule recognises is marked
// Generic (a diagnosis may name its class); a recognised one, a 4xx or an
// HTML page is not.
func TestClassifyGeneric(t *testing.T) {
	for _, c := range []struct {
		status  int
		body    string
		generic bool
	}{
		{500, `{"error":{"message":"engine E42: queue_full on all replicas","type":"engine_error","code":"E42"}}`, true},
		{503, `upstream connect error or disconnect/reset before headers`, true},
		{500, `{"error":{"message":"busy","code":"queue_full"}}`, false},
		{400, `{"error":{"message":"engine E42 refused the input","code":"E42"}}`, false},
		{502, `<html><head><title>502 Bad Gateway</title></head></html>`, false},
	} {
		v := Classify(Observation{Status: c.status, Body: []byte(c.body), Err: fmt.Errorf("HTTP %d", c.status)})
		if v.Generic != c.generic {
			t.Errorf("HTTP %d %s: class %s, generic %v, want %v", c.status, c.body, v.Class, v.Generic, c.generic)
		}
	}
}
