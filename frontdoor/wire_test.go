package frontdoor_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
)

// doorServer is a front door without Temporal in an httptest server whose
// listener wrap wraps (nil: none), with small header limits.
func doorServer(t *testing.T, wrap func(net.Listener) net.Listener) *httptest.Server {
	t.Helper()
	tenants, err := frontdoor.ParseTokens(tokens)
	require.NoError(t, err)
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h, err := frontdoor.New(frontdoor.Options{Client: &llmclient.Client{Temporal: c}, Tenants: tenants, StartTimeout: time.Second})
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(h)
	ts.Config.MaxHeaderBytes = 4 << 10
	if wrap != nil {
		ts.Listener = wrap(ts.Listener)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// exchange writes raw to a new connection to ts and returns every byte
// of the answer, up to the server closing the connection.
func exchange(t *testing.T, ts *httptest.Server, raw string) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, raw)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	data, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection stays open after %q", data)
	}
	return data
}

// malformed are requests net/http refuses before any handler runs.
var malformed = []struct {
	name, raw string
	status    int
	code      string
	says      string
}{
	{"a header name with a space", "GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", 400, "malformed_request", "invalid header name"},
	{"a header without a colon", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization\r\n\r\n", 400, "malformed_request", "the request line or a header cannot be parsed"},
	{"a control character in a value", "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Scenario: a\x01b\r\n\r\n", 400, "malformed_request", "the request line or a header cannot be parsed"},
	{"no Host", "GET /v1/models HTTP/1.1\r\n\r\n", 400, "malformed_request", "missing required Host header"},
	{"two Hosts", "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "malformed_request", "the request line or a header cannot be parsed"},
	{"a malformed request line", "GET\r\n\r\n", 400, "malformed_request", "the request line or a header cannot be parsed"},
	{"two Content-Lengths", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "malformed_request", "the request line or a header cannot be parsed"},
	{"an unknown transfer encoding", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "unsupported_transfer_encoding", "unsupported transfer encoding"},
	{"HTTP/3 on HTTP/1", "GET /v1/models HTTP/3.0\r\nHost: x\r\n\r\n", 505, "unsupported_http_version", "unsupported protocol version"},
	{"headers over the limit", "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", 8<<10) + "\r\n\r\n", 431, "headers_too_large", "over the server's limit"},
}

// TestShapeErrors: what net/http answers by itself to a request it cannot
// parse is, through ShapeErrors, an OpenAI-shaped JSON error with its
// status and Connection: close, and plain text without it (the messages
// ShapeErrors recognises, pinned for this Go release). A good request on
// the same listener is served as usual.
func TestShapeErrors(t *testing.T) {
	plain := doorServer(t, nil)
	shaped := doorServer(t, frontdoor.ShapeErrors)
	goPlain := regexp.MustCompile("^HTTP/1\\.1 [0-9]{3} [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n[^\r\n]*$")
	for _, tc := range malformed {
		t.Run(tc.name, func(t *testing.T) {
			raw := exchange(t, plain, tc.raw)
			require.Regexp(t, goPlain, string(raw), "net/http's own answer changed: ShapeErrors no longer recognises it")

			data := exchange(t, shaped, tc.raw)
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(data))), nil)
			require.NoError(t, err, "%q", data)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.True(t, resp.Close, "no Connection: close")
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    string  `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, tc.code, e.Error.Code)
			require.Nil(t, e.Error.Param)
			require.Contains(t, e.Error.Message, tc.says)
			require.NotContains(t, string(body), "ppp", "the request is echoed")
		})
	}
	resp, err := shaped.Client().Get(shaped.URL + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "ok\n", string(b))
	req, _ := http.NewRequest(http.MethodGet, shaped.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+tokAcme)
	resp, err = shaped.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestMalformedHeadersTheHandlerSees: headers net/http passes on but the
// front door cannot use are refused in OpenAI's shape, before the token
// is looked up or the body read.
func TestMalformedHeadersTheHandlerSees(t *testing.T) {
	ts := offline(t, "", nil)
	refuse(t, ts, []badRequest{
		{name: "a Content-Type that is no media type", headers: map[string]string{"Content-Type": "application/json; charset"}, body: question,
			status: 400, code: "invalid_content_type", param: "Content-Type", says: "not a media type"},
		{name: "a form body", headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: question,
			status: 415, code: "unsupported_media_type", param: "Content-Type", says: "the body must be JSON"},
		{name: "JSON in Latin-1", headers: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}, body: question,
			status: 415, code: "unsupported_media_type", param: "Content-Type", says: "must be UTF-8 JSON"},
	})
	// Two of a header net/http does not merge, sent raw.
	for _, name := range []string{"Authorization", "X-Scenario", "Idempotency-Key", "X-Deadline-Ms"} {
		t.Run("two "+name+" headers", func(t *testing.T) {
			head := "POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 200000\n"
			if name == "Authorization" {
				head += "Authorization: Bearer " + tokAcme + "\nAuthorization: Bearer " + tokGlobex
			} else {
				head += "Authorization: Bearer " + tokAcme + "\n" + name + ": 1\n" + name + ": 2"
			}
			conn, br := rawRequest(t, ts, head, `{"model":`)
			resp := requireClosed(t, conn, br, http.StatusBadRequest)
			code, param, msg := errorCode(t, readAll(t, resp.Body))
			require.Equal(t, "duplicate_header", code)
			require.Equal(t, name, param)
			require.Contains(t, msg, "sent 2 times")
		})
	}
	// JSON types besides application/json, and none, are taken.
	for _, ct := range []string{"", "application/json", "application/json; charset=UTF-8", "application/vnd.api+json"} {
		t.Run("Content-Type "+ct, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(question))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tokAcme)
			req.Header.Set("X-Deadline-Ms", "10") // refused by Validate: past the header checks
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			_, param, _ := errorCode(t, readAll(t, resp.Body))
			require.Equal(t, "X-Deadline-Ms", param)
		})
	}
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}
