package codec_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/codec"
)

// rawPost opens a connection to ts, sends head and the start of a body
// whose Content-Length is far larger, then nothing more.
func rawPost(t *testing.T, ts *httptest.Server, head string, length int) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, strings.ReplaceAll(head, "\n", "\r\n")+"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(length)+"\r\n\r\n"+`{"payloads":[`)
	require.NoError(t, err)
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	return conn, bufio.NewReader(conn)
}

// closedAfter reads the response and then expects the server to close
// the connection rather than wait for the rest of the body.
func closedAfter(t *testing.T, conn net.Conn, br *bufio.Reader, status int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no response: the server waits for the body")
	require.Equal(t, status, resp.StatusCode)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the connection stayed open for the rest of the body")
}

// TestCodecServerSlowAndLarge: a refused request (no token) is answered
// at once and its connection closed without reading its body; an
// authorised body that trickles is cut off after BodyTimeout, so neither
// can hold the server.
func TestCodecServerSlowAndLarge(t *testing.T) {
	c := mustCodec(t, k1)
	token := strings.Repeat("t0k", 12)
	ts := httptest.NewServer(codec.NewHTTPHandler(c, codec.HandlerOptions{Token: token, BodyTimeout: 300 * time.Millisecond}))
	t.Cleanup(ts.Close) // after the connections' cleanups: Close waits for their handlers

	// 200 kB: under the 256 KB Go's server would read, without a
	// deadline, after the handler is done.
	conn, br := rawPost(t, ts, "POST /decode HTTP/1.1\nHost: x", 200_000)
	closedAfter(t, conn, br, http.StatusUnauthorized)

	conn, br = rawPost(t, ts, "POST /decode HTTP/1.1\nHost: x\nAuthorization: Bearer "+token, 30_000_000)
	start := time.Now()
	// The server answers (400: the body did not arrive) or just closes;
	// either way the connection ends, long before the client's own 5 s.
	var err error
	if resp, rerr := http.ReadResponse(br, nil); rerr == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for err == nil {
		_, err = br.ReadByte()
	}
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept waiting for the trickled body: %v", err)
	require.Less(t, time.Since(start), 3*time.Second, "a trickled body held the connection past the body timeout")
}
