package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeStopsOnSIGTERM: serve, sent SIGTERM (docker stop, Kubernetes,
// systemd), shuts down gracefully and exits 0, as on Ctrl-C, instead of
// being killed by the signal with its connections cut.
func TestServeStopsOnSIGTERM(t *testing.T) {
	if os.Getenv("STARTER_MAIN_ARGS") != "" {
		t.Skip("the helper process runs main")
	}
	cmd, lines := startServe(t, "serve --addr 127.0.0.1:0", "FRONTDOOR_TOKENS="+strings.Repeat("t", 40)+"=acme")
	listening := false
	timeout := time.After(30 * time.Second)
	for !listening {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before it listened")
			}
			listening = strings.HasPrefix(line, "front door listening")
		case <-timeout:
			t.Fatal("serve did not listen within 30 s")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, want a graceful exit 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM")
	}
}

// startServe runs the starter with args as a process of its own, Temporal
// unreachable, with env added, and returns it with its stdout's lines
// (closed when it exits). It is killed when the test ends.
func startServe(t *testing.T, args string, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainHelper$")
	cmd.Env = append(append(os.Environ(), "STARTER_MAIN_ARGS="+args, "TEMPORAL_ADDRESS=127.0.0.1:1"), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// TestMainHelper runs main with STARTER_MAIN_ARGS, for tests that need the
// process itself (its signals, its exit code).
func TestMainHelper(t *testing.T) {
	args := os.Getenv("STARTER_MAIN_ARGS")
	if args == "" {
		t.Skip("run by other tests as a process")
	}
	os.Args = append([]string{"starter"}, strings.Fields(args)...)
	main()
}
