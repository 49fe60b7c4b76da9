// Package testenv starts the real parts integration tests and benchmarks
// run against: a Temporal dev server from the pinned CLI in ./bin (never
// downloaded), with the LLM search attributes registered.
package testenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/workflows"
)

// TemporalCLI finds the pinned Temporal CLI: $TEMPORAL_CLI, else bin/temporal
// at the module root.
func TemporalCLI() (string, error) {
	if p := os.Getenv("TEMPORAL_CLI"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "temporal")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("the Temporal CLI is not built: run `make temporal` (looked for %s)", p)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; set TEMPORAL_CLI")
		}
		dir = parent
	}
}

// ServerOptions tune StartServer.
type ServerOptions struct {
	// DBFile makes the server file-backed (restartable); empty: in memory.
	DBFile string
	// UIPort enables the Web UI on that port ("" : no UI).
	UIPort string
	// HostPort binds the frontend; empty: a free port.
	HostPort string
	// Log receives the server's output; default discarded.
	Log io.Writer
	// ExtraArgs for `temporal server start-dev`.
	ExtraArgs []string
}

// SearchAttributeArgs are the --search-attribute flags for the LLM search
// attributes, given as name=type pairs.
func SearchAttributeArgs(attrs map[string]string) []string {
	var args []string
	for n, t := range attrs {
		args = append(args, "--search-attribute", n+"="+t)
	}
	return args
}

// StartServer starts a dev server with the given search attributes
// (name → type). The caller stops it.
func StartServer(ctx context.Context, attrs map[string]string, o ServerOptions) (*testsuite.DevServer, error) {
	cli, err := TemporalCLI()
	if err != nil {
		return nil, err
	}
	out := o.Log
	if out == nil {
		out = io.Discard
	}
	opts := testsuite.DevServerOptions{
		ExistingPath:  cli,
		ClientOptions: &client.Options{HostPort: o.HostPort, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))},
		DBFilename:    o.DBFile,
		LogLevel:      "error",
		ExtraArgs:     append(SearchAttributeArgs(attrs), o.ExtraArgs...),
		Stdout:        out,
		Stderr:        out,
	}
	if o.UIPort != "" {
		opts.EnableUI, opts.UIPort = true, o.UIPort
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return testsuite.StartDevServer(ctx, opts)
}

// Server starts a dev server for one test and stops it when the test ends.
// It skips the test in -short mode.
func Server(t testing.TB, attrs map[string]string, o ServerOptions) *testsuite.DevServer {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server (skipped in -short mode)")
	}
	s, err := StartServer(context.Background(), attrs, o)
	if err != nil {
		t.Fatalf("start Temporal dev server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// Shared is one dev server with the LLM search attributes for all the
// integration tests of a package, started on first use. Declare one per
// package and stop it from TestMain:
//
//	var shared testenv.Shared
//
//	func TestMain(m *testing.M) { code := m.Run(); shared.Stop(); os.Exit(code) }
type Shared struct {
	once sync.Once
	srv  *testsuite.DevServer
	err  error
}

// Server returns the package's dev server, starting it on the first call.
// It skips the test in -short mode.
func (s *Shared) Server(t testing.TB) *testsuite.DevServer {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server (skipped in -short mode)")
	}
	s.once.Do(func() {
		s.srv, s.err = StartServer(context.Background(), workflows.SearchAttributes, ServerOptions{})
	})
	if s.err != nil {
		t.Fatalf("start Temporal dev server: %v", s.err)
	}
	return s.srv
}

// Stop stops the server if it was started.
func (s *Shared) Stop() {
	if s.srv != nil {
		_ = s.srv.Stop()
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (for
// servers that must be told their port, like the Web UI).
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return port
}

// WaitServes polls url until it answers 200, for up to a minute.
func WaitServes(t testing.TB, url string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s does not serve: %s", url, last)
}
