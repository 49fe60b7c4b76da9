package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
)

// hangGuard bounds every wait of these tests for an answer: far beyond
// what an answer takes, far below the server's 2-minute idle timeout.
const hangGuard = 30 * time.Second

// startDoor serves h with doorServer on a loopback port and returns its
// address.
func startDoor(t *testing.T, h http.Handler, o connOptions) string {
	t.Helper()
	srv, ln, err := doorServer("127.0.0.1:0", h, o)
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// dialFrom opens a connection to addr from the loopback address from
// ("127.0.0.1", "127.0.0.2", …: all of 127/8 is this machine's).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends GET path on c (keep-alive) and reads the answer, within the
// hang guard; it returns the status and the body, or the error.
func get(c net.Conn, br *bufio.Reader, path, token string) (int, string, error) {
	head := "GET " + path + " HTTP/1.1\r\nHost: door\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		return 0, "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(hangGuard))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestIdleConnectionsDoNotBlockTheDoor: a client without a token holds
// --max-conns (1,024) idle keep-alive connections, each after one GET
// /healthz; a tenant's request on a new connection is still answered (the
// door, under pressure, closes connections idle for a second instead of
// two minutes).
func TestIdleConnectionsDoNotBlockTheDoor(t *testing.T) {
	const token = "tok-acme-5e1b9c3a7d2f4e6a8b0c1d3e5f7a9b2c"
	tenants, err := frontdoor.ParseTokens(token + "=acme")
	require.NoError(t, err)
	c, err := client.NewLazyClient(client.Options{HostPort: closedAddr(t)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h, err := frontdoor.New(frontdoor.Options{Client: &llmclient.Client{Temporal: c}, Tenants: tenants})
	require.NoError(t, err)
	// One address holds them all here: its cap is not what is tested.
	addr := startDoor(t, h, connOptions{MaxConns: defaultMaxConns, PerClient: 2 * defaultMaxConns})

	for i := range defaultMaxConns {
		conn := dialFrom(t, "127.0.0.1", addr)
		status, _, err := get(conn, bufio.NewReader(conn), "/healthz", "")
		require.NoError(t, err, "idle connection %d", i)
		require.Equal(t, http.StatusOK, status)
	}

	conn := dialFrom(t, "127.0.0.1", addr)
	status, body, err := get(conn, bufio.NewReader(conn), "/v1/models", token)
	require.NoError(t, err, "the tenant's request is not answered while %d idle connections are held", defaultMaxConns)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"qwen-72b"`)

	// What net/http refuses by itself is answered in OpenAI's shape too.
	conn = dialFrom(t, "127.0.0.1", addr)
	_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\n\r\n") // no Host
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var e struct{ Error struct{ Code string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), "not OpenAI's error shape")
	require.NotEmpty(t, e.Error.Code)
}

// TestConnectionsPerClientAddress: one address may hold --max-conns-per-
// client connections; a new one beyond takes the place of the address's
// idle one, and when none is idle it is answered 429 too_many_connections
// and closed, while another address is served.
func TestConnectionsPerClientAddress(t *testing.T) {
	entered, unblock := make(chan struct{}, 2), make(chan struct{}, 2)
	t.Cleanup(func() { unblock <- struct{}{}; unblock <- struct{}{} })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-unblock
		}
		_, _ = io.WriteString(w, "ok")
	})
	addr := startDoor(t, h, connOptions{MaxConns: 64, PerClient: 2})

	// Two requests of 127.0.0.1 being served: none of its connections is
	// idle.
	type held struct {
		conn net.Conn
		br   *bufio.Reader
		done chan error
	}
	var busy []held
	for range 2 {
		conn := dialFrom(t, "127.0.0.1", addr)
		hc := held{conn: conn, br: bufio.NewReader(conn), done: make(chan error, 1)}
		go func() {
			_, _, err := get(hc.conn, hc.br, "/block", "")
			hc.done <- err
		}()
		select {
		case <-entered:
		case <-time.After(hangGuard):
			t.Fatal("a first request is not served")
		}
		busy = append(busy, hc)
	}

	third := dialFrom(t, "127.0.0.1", addr)
	br := bufio.NewReader(third)
	status, body, err := get(third, br, "/healthz", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, status, body)
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.Equal(t, "too_many_connections", e.Error.Code)
	require.Contains(t, e.Error.Message, "at most 2 may be open at once")
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the refused connection is not closed")

	other := dialFrom(t, "127.0.0.2", addr)
	status, body, err = get(other, bufio.NewReader(other), "/healthz", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "another address is refused: %s", body)

	// One answered: its connection is idle, and a new one of the address
	// takes its place.
	unblock <- struct{}{}
	var idle held
	select {
	case err = <-busy[0].done:
		idle = busy[0]
	case err = <-busy[1].done:
		idle = busy[1]
	case <-time.After(hangGuard):
		t.Fatal("an unblocked request is not answered")
	}
	require.NoError(t, err)
	// The client reads the answer a moment before the server marks the
	// connection idle (http.Server's ConnState hook runs after the write):
	// a new connection within that moment is still refused, so try again
	// for a short while.
	deadline := time.Now().Add(2 * time.Second)
	for {
		fourth := dialFrom(t, "127.0.0.1", addr)
		status, body, err = get(fourth, bufio.NewReader(fourth), "/healthz", "")
		require.NoError(t, err)
		if status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		_ = fourth.Close()
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, http.StatusOK, status, "a new connection is refused while the address has an idle one: %s", body)
	_ = idle.conn.SetReadDeadline(time.Now().Add(hangGuard))
	_, err = idle.br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the address's idle connection is not closed for the new one")
}

// streamingDoor is a stand-in for the front door that holds each
// authenticated chat completion open until release is closed, streaming a
// chunk every 100 ms, as a call that is generating does, and each /slow
// request until then too: what is tested is the connection guard, not
// the calls.
func streamingDoor(tenants *frontdoor.Tenants, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			_, _ = io.WriteString(w, "ok")
			return
		case "/slow": // a request without a token that takes a while
			<-release
			_, _ = io.WriteString(w, "ok")
			return
		}
		if !tenants.Authenticates(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"authentication_error","param":null,"code":"invalid_api_key"}}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			_, _ = fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen-72b","choices":[{"index":0,"delta":{"content":"w%d "},"finish_reason":null}]}`+"\n\n", i)
			_ = rc.Flush()
			select {
			case <-release:
			case <-time.After(100 * time.Millisecond):
				continue
			}
			break
		}
		_, _ = io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen-72b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
}

// TestBusyAuthenticatedConnectionsAreNotCapped: one backend process (one
// address; behind a proxy every client is a handful of addresses) streams
// 300 chat completions at once with the official Go client: every one is
// answered, although --max-conns-per-client is 128, since a connection
// serving a tenant's request is governed by the tenant's limits, not by
// its address's cap. Meanwhile an unauthenticated flood from the same
// address is still held to the cap: its requests beyond it are answered
// 429 too_many_connections.
func TestBusyAuthenticatedConnectionsAreNotCapped(t *testing.T) {
	const token = "tok-acme-5e1b9c3a7d2f4e6a8b0c1d3e5f7a9c2b"
	tenants, err := frontdoor.ParseTokens(token + "=acme")
	require.NoError(t, err)
	release := make(chan struct{})
	addr := startDoor(t, streamingDoor(tenants, release), connOptions{MaxConns: defaultMaxConns, PerClient: defaultMaxConnsPerClient,
		Authenticated: tenants.Authenticates})
	oc := openai.NewClient(option.WithBaseURL("http://"+addr+"/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}))

	const n = 300
	var wg, serving sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		serving.Add(1)
		go func() {
			defer wg.Done()
			s := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "auto",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Question %d", i))}})
			defer s.Close()
			var text strings.Builder
			first := true
			for s.Next() {
				if first {
					first = false
					serving.Done()
				}
				if len(s.Current().Choices) > 0 {
					text.WriteString(s.Current().Choices[0].Delta.Content)
				}
			}
			if first {
				serving.Done()
			}
			if err := s.Err(); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
				return
			}
			if text.Len() == 0 {
				errs <- fmt.Errorf("stream %d: no text", i)
			}
		}()
	}
	// While they stream: requests of the same address that send no token
	// are held to the cap. A stream's connection counts as the tenant's
	// only once its request has been read, so the flood starts when every
	// stream has had its first chunk (until then a connection still
	// waiting to be read is rightly one of the address's 128).
	serving.Wait()
	const extra = 20
	statuses := make(chan int, defaultMaxConnsPerClient+extra)
	var slow sync.WaitGroup
	for range defaultMaxConnsPerClient + extra {
		conn := dialFrom(t, "127.0.0.1", addr)
		slow.Add(1)
		go func() {
			defer slow.Done()
			status, body, err := get(conn, bufio.NewReader(conn), "/slow", "")
			switch {
			case err != nil:
				statuses <- -1
			case status == http.StatusTooManyRequests && !strings.Contains(body, "too_many_connections"):
				statuses <- -2
			default:
				statuses <- status
			}
		}()
	}
	// The refusals come at once; the served requests and the streams are
	// held until they have (or for 10 s), so none ends and leaves an idle
	// connection that a later request of the flood could take the place of.
	counts := map[int]int{}
	for wait := time.After(10 * time.Second); counts[http.StatusTooManyRequests] < extra; {
		select {
		case s := <-statuses:
			counts[s]++
			continue
		case <-wait:
		}
		break
	}
	close(release)
	wg.Wait()
	close(errs)
	var failed []string
	for err := range errs {
		failed = append(failed, err.Error())
	}
	require.Empty(t, failed, "%d of %d streams from one address failed", len(failed), n)
	slow.Wait()
	close(statuses)
	for s := range statuses {
		counts[s]++
	}
	require.Equal(t, map[int]int{http.StatusOK: defaultMaxConnsPerClient, http.StatusTooManyRequests: extra}, counts,
		"requests without a token: the cap's worth served, the rest refused too_many_connections")
}

// TestIdleFloodFromOneAddressIsReclaimed: one address opens 1,024
// keep-alive connections without a token, each idle after a GET /healthz:
// with --max-conns-per-client at its default (128), each new one beyond
// the cap takes the place of the address's longest idle one, so at most
// 128 stay open, and a tenant's request from the same address is
// answered at once.
func TestIdleFloodFromOneAddressIsReclaimed(t *testing.T) {
	const token = "tok-acme-5e1b9c3a7d2f4e6a8b0c1d3e5f7a9c2b"
	tenants, err := frontdoor.ParseTokens(token + "=acme")
	require.NoError(t, err)
	released := make(chan struct{})
	close(released)
	addr := startDoor(t, streamingDoor(tenants, released), connOptions{MaxConns: 2 * defaultMaxConns, PerClient: defaultMaxConnsPerClient,
		Authenticated: tenants.Authenticates})
	type held struct {
		conn net.Conn
		br   *bufio.Reader
	}
	var flood []held
	for i := range defaultMaxConns {
		conn := dialFrom(t, "127.0.0.1", addr)
		br := bufio.NewReader(conn)
		status, _, err := get(conn, br, "/healthz", "")
		require.NoError(t, err, "idle connection %d", i)
		require.Equal(t, http.StatusOK, status)
		flood = append(flood, held{conn, br})
	}
	open := 0
	for _, h := range flood {
		_ = h.conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := h.br.ReadByte(); !errors.Is(err, io.EOF) {
			open++
		}
	}
	require.LessOrEqual(t, open, defaultMaxConnsPerClient, "idle connections of one address still open")

	conn := dialFrom(t, "127.0.0.1", addr)
	status, body, err := get(conn, bufio.NewReader(conn), "/healthz", token)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)
}
