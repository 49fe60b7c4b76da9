package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestListenLimitsConnections: with --max-conns 2, two clients that hold
// their connections open (a request whose headers never end) keep a
// third from being served until one of them leaves.
func TestListenLimitsConnections(t *testing.T) {
	ln, err := listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// answered reports whether a GET on a new connection is answered
	// within wait.
	answered := func(c net.Conn, wait time.Duration) bool {
		t.Helper()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	first := dial()
	if !answered(first, time.Second) {
		t.Fatal("a first client is not served")
	}
	first.Close()
	slow1, slow2 := dial(), dial()
	for _, c := range []net.Conn{slow1, slow2} {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost:"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the server has seen the first client leave
	third := dial()
	if answered(third, 500*time.Millisecond) {
		t.Fatal("a third connection is served while two are open with --max-conns 2")
	}
	slow1.Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("the third client is not served once a connection closed: %v", err)
	}
	resp.Body.Close()
}
