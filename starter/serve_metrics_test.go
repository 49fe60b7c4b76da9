package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeMetricsAndDrain: serve exports its Prometheus metrics on an
// address of their own (a request it answered is counted there by route
// and status), and on SIGTERM it waits for the requests it serves only as
// long as --drain says: a request whose body never comes keeps it 1 s, not
// the 30 s its body may take.
func TestServeMetricsAndDrain(t *testing.T) {
	if os.Getenv("STARTER_MAIN_ARGS") != "" {
		t.Skip("the helper process runs main")
	}
	token := strings.Repeat("t", 40)
	cmd, lines := startServe(t, "serve --addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --drain 1s", "FRONTDOOR_TOKENS="+token+"=acme")
	var door, metrics, drain string
	timeout := time.After(30 * time.Second)
	for metrics == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before it said where it listens")
			}
			line = strings.TrimSpace(line)
			if rest, ok := strings.CutPrefix(line, "front door listening on http://"); ok {
				door, _, _ = strings.Cut(rest, "/v1")
			}
			if rest, ok := strings.CutPrefix(line, "metrics: http://"); ok {
				metrics, drain, _ = strings.Cut(rest, "/metrics; drain on stop: ")
			}
		case <-timeout:
			t.Fatal("serve did not say where it listens within 30 s")
		}
	}
	a := struct{ door, metrics, drain string }{door, metrics, drain}
	if a.drain != "1s" {
		t.Fatalf("drain on stop %q, want 1s", a.drain)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.door+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /v1/models: %v %v", res, err)
	}
	_ = res.Body.Close()
	res, err = http.Get("http://" + a.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if want := `durable_llm_frontdoor_requests_total{route="/v1/models",status="200"} 1`; !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %s:\n%s", want, body)
	}

	// A request whose body never comes is in flight at the stop.
	conn, err := net.Dial("tcp", a.door)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+token+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	time.Sleep(300 * time.Millisecond)
	stopped := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		if took := time.Since(stopped); took > 6*time.Second {
			t.Fatalf("serve took %v to stop with --drain 1s", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM")
	}
}
