// Package testenv starts the real parts integration tests and benchmarks
// run against: a Temporal dev server from the pinned CLI in ./bin (never
// downloaded), with the LLM search attributes registered.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
//
// A start that does not answer within a minute is tried again, up to three
// times, on fresh ports (a port picked free can be taken by another
// package's server before this one binds it, and a loaded machine can make
// a start slow). A fixed HostPort is tried again too: the server still
// picks its HTTP, metrics and membership ports at random, and one of those
// can be taken the same way. The process of a failed start is killed, and
// the error carries the start and the end of what it printed.
func StartServer(ctx context.Context, attrs map[string]string, o ServerOptions) (*testsuite.DevServer, error) {
	cli, err := TemporalCLI()
	if err != nil {
		return nil, err
	}
	var errs []error
	for try := 1; try <= 3; try++ {
		srv, err := startOnce(ctx, cli, attrs, o)
		if err == nil {
			return srv, nil
		}
		errs = append(errs, fmt.Errorf("try %d: %w", try, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// startOnce is one start of the dev server on free ports.
func startOnce(ctx context.Context, cli string, attrs map[string]string, o ServerOptions) (*testsuite.DevServer, error) {
	printed := &headTail{max: 2 << 10}
	var out io.Writer = printed
	if o.Log != nil {
		out = io.MultiWriter(o.Log, printed)
	}
	hostPort := o.HostPort
	if hostPort == "" {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		hostPort = "127.0.0.1:" + p
	}
	opts := testsuite.DevServerOptions{
		ExistingPath:  cli,
		ClientOptions: &client.Options{HostPort: hostPort, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))},
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
	srv, err := testsuite.StartDevServer(ctx, opts)
	if err != nil {
		killServer(cli, hostPort)
		return nil, fmt.Errorf("%w; the server printed: %q", err, printed.String())
	}
	return srv, nil
}

// headTail keeps the first and the last max bytes written to it: a panic
// names its cause at the head and its stack runs on far past any tail.
type headTail struct {
	mu         sync.Mutex
	max        int
	head, tail []byte
	dropped    int
}

func (t *headTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := t.max - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.max; over > 0 {
		t.tail = t.tail[over:]
		t.dropped += over
	}
	return n, nil
}

func (t *headTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped == 0 {
		return strings.TrimSpace(string(t.head) + string(t.tail))
	}
	return strings.TrimSpace(string(t.head)) + fmt.Sprintf(" … (%d bytes) … ", t.dropped) + strings.TrimSpace(string(t.tail))
}

// killServer kills the dev server process started from cli on hostPort's
// port, found by its command line in /proc (testsuite.StartDevServer does
// not hand back the process of a start that never answered). Where there
// is no /proc it does nothing.
func killServer(cli, hostPort string) {
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
		if len(args) == 0 || string(args[0]) != cli {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if string(args[i]) == "--port" && string(args[i+1]) == port {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
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
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
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

// PendingActivityWorker is the identity of the worker that last took
// the call id's pending activity of type activity ("" while none holds
// one): the process that holds an attempt, as an operator reads it.
func PendingActivityWorker(ctx context.Context, c client.Client, id, activity string) string {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return ""
	}
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() == activity {
			return pa.GetLastWorkerIdentity()
		}
	}
	return ""
}
