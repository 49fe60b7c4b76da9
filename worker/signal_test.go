package main

import (
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestOnSignalExitsAfterTheDrain: the first signal stops the worker; the
// process exits at a second signal, or once the limit passes while the
// stop is still under way (an attempt that ignores its context, a close
// that hangs).
func TestOnSignalExitsAfterTheDrain(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name   string
		second bool
		limit  time.Duration
	}{
		{"the limit passes", false, 10 * time.Millisecond},
		{"a second signal", true, time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			sig := make(chan os.Signal, 2)
			interrupt := make(chan any)
			exited := make(chan struct{})
			go onSignal(sig, interrupt, time.Second, c.limit, logger, func() { close(exited) })
			sig <- syscall.SIGTERM
			select {
			case <-interrupt:
			case <-time.After(time.Minute):
				t.Fatal("the first signal did not stop the worker")
			}
			if c.second {
				select {
				case <-exited:
					t.Fatal("exited before the second signal, with an hour left")
				default:
				}
				sig <- syscall.SIGINT
			}
			select {
			case <-exited:
			case <-time.After(time.Minute):
				t.Fatal("the process did not exit")
			}
		})
	}
}
