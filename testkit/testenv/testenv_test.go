package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAFailedStartLeavesNoServer: a start that does not answer in time
// (here its context ends after 100 ms) kills the server it started, so no
// dev server is left running on its port, and the error says why.
func TestAFailedStartLeavesNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal CLI (skipped in -short mode)")
	}
	cli, err := TemporalCLI()
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	srv, err := StartServer(ctx, nil, ServerOptions{HostPort: "127.0.0.1:" + port})
	if err == nil {
		_ = srv.Stop()
		t.Fatal("a dev server answered within 100 ms; the test needs a start that does not")
	}
	if !strings.Contains(err.Error(), "try 1") || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("error %q, want the try and the deadline", err)
	}
	// The kill is a signal; give the kernel a moment to reap the process.
	deadline := time.Now().Add(5 * time.Second)
	for serverOnPort(t, cli, port) {
		if time.Now().After(deadline) {
			t.Fatalf("a dev server is still running on port %s after the failed start", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serverOnPort reports whether a live process of cli runs with --port port.
func serverOnPort(t *testing.T, cli, port string) bool {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc: cannot look for the process")
	}
	for _, p := range procs {
		raw, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue // a zombie: dead, waiting for its parent
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if args[0] != cli {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--port" && args[i+1] == port {
				return true
			}
		}
	}
	return false
}

// TestAFailedStartKeepsTheCauseOfAPanic: what a failed start printed is
// kept from both ends, so a panic's first line (its cause) survives a
// stack far longer than the buffer.
func TestAFailedStartKeepsTheCauseOfAPanic(t *testing.T) {
	out := &headTail{max: 64}
	_, _ = out.Write([]byte("panic: listen tcp 127.0.0.1:7233: bind: address already in use\n"))
	for i := range 200 {
		_, _ = out.Write([]byte("goroutine frame " + strings.Repeat("x", i%7) + "\n"))
	}
	_, _ = out.Write([]byte("main.main()\n"))
	got := out.String()
	if !strings.HasPrefix(got, "panic: listen tcp 127.0.0.1:7233: bind") {
		t.Errorf("the cause is lost: %q", got)
	}
	if !strings.HasSuffix(got, "main.main()") {
		t.Errorf("the end is lost: %q", got)
	}
	if !strings.Contains(got, "bytes) …") || len(got) > 200 {
		t.Errorf("the middle is not cut and marked: %d bytes: %q", len(got), got)
	}

	short := &headTail{max: 64}
	_, _ = short.Write([]byte("started\n"))
	if got := short.String(); got != "started" {
		t.Errorf("short output changed: %q", got)
	}
}
