package main

import (
	"bufio"
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainHelper$")
	cmd.Env = append(os.Environ(), "STARTER_MAIN_ARGS=serve --addr 127.0.0.1:0",
		"FRONTDOOR_TOKENS="+strings.Repeat("t", 40)+"=acme", "TEMPORAL_ADDRESS=127.0.0.1:1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "front door listening") {
				listening <- true
			}
		}
		close(listening)
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("serve exited before it listened")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not listen within 30 s")
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
