package frontdoor

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// ShapeErrors returns ln with its connections' answers to requests
// net/http cannot parse in OpenAI's error shape, like every other answer
// of the front door, instead of Go's plain text ("400 Bad Request").
//
// net/http answers those itself, before any handler runs and with no hook
// (a malformed request line or header, a bad or missing Host, headers
// over MaxHeaderBytes, an unknown Transfer-Encoding, an HTTP version it
// does not serve): one fixed plain-text message written straight to the
// connection, which no handler's answer can look like (a handler's headers
// come sorted, with a Date). The returned connections rewrite exactly
// those messages, which TestShapeErrors pins for the Go release it runs
// on. Wrap the raw listener, beneath any listener that wraps its
// connections in a type of its own.
func ShapeErrors(ln net.Listener) net.Listener { return shapingListener{ln} }

type shapingListener struct{ net.Listener }

func (l shapingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &shapingConn{Conn: c}, nil
}

// shapingConn rewrites net/http's plain-text error answers.
type shapingConn struct{ net.Conn }

// plainError is an answer net/http writes by itself (server.go, "const
// errorHeaders"): a status line, these two headers, and a short text.
var plainError = regexp.MustCompile("^HTTP/1\\.1 ([0-9]{3}) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)$")

func (c *shapingConn) Write(p []byte) (int, error) {
	m := plainError.FindSubmatch(p)
	if m == nil {
		return c.Conn.Write(p)
	}
	status, _ := strconv.Atoi(string(m[1]))
	if _, err := c.Conn.Write(shapedError(status, string(m[2]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite half-closes the connection, as net/http does after a 431
// (its closeWriteAndWait), when the wrapped connection can.
func (c *shapingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// shapedError is net/http's answer of status with text (such as "400 Bad
// Request: missing required Host header") in OpenAI's error shape. The
// text is net/http's own words, never the request's.
func shapedError(status int, text string) []byte {
	detail := strings.TrimPrefix(text, strconv.Itoa(status)+" "+http.StatusText(status))
	detail = strings.TrimPrefix(detail, ": ")
	code := "malformed_request"
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		code, detail = "headers_too_large", "the request line and headers are over the server's limit"
	case http.StatusNotImplemented:
		code, detail = "unsupported_transfer_encoding", "unsupported transfer encoding"
	case http.StatusHTTPVersionNotSupported:
		code = "unsupported_http_version"
	}
	if detail == "" {
		detail = "the request line or a header cannot be parsed"
	}
	body, _ := json.Marshal(errorBody{Error: errorObject{
		Message: "Malformed HTTP request: " + detail + ".", Type: typeInvalidRequest, Code: &code}})
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}
