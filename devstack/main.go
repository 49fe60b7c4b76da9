// Command devstack is `make run`: it starts everything a developer needs on
// one machine and stops all of it on Ctrl-C.
//
//   - the Temporal dev server from ./bin/temporal (file-backed in
//     .devstack/temporal.db so calls survive restarts; Web UI on :8233; the
//     LLM search attributes registered),
//   - llmsim with the mixed-faults scenario on :8000 when nothing names
//     an endpoint: not when LLM_BASE_URL is set, nor when POLICY_FILE names
//     its models' endpoints (unless it names llmsim's address); with
//     LLM_MODELS set, llmsim serves those model names (see planUpstream),
//   - the durable-llm worker,
//
// then prints how to ask a question and where to look.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/durable-llm/durable-llm/llmnexus"
	"github.com/durable-llm/durable-llm/workflows"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

type proc struct {
	name string
	cmd  *exec.Cmd
}

func run() error {
	temporalBin := flag.String("temporal", envOr("TEMPORAL_CLI", "bin/temporal"), "Temporal CLI binary")
	scenario := flag.String("scenario", envOr("LLMSIM_SCENARIO", "mixed"), "llmsim scenario (name or file)")
	port := flag.Int("port", 7233, "Temporal frontend port")
	uiPort := flag.Int("ui-port", 8233, "Web UI port")
	simAddr := flag.String("llmsim-addr", "127.0.0.1:8000", "llmsim address")
	flag.Parse()

	if _, err := os.Stat(*temporalBin); err != nil {
		return fmt.Errorf("Temporal CLI not found at %s: run `make temporal` (or `make run`, which builds it)", *temporalBin)
	}
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", *port), fmt.Sprintf("127.0.0.1:%d", *uiPort)} {
		if inUse(addr) {
			return fmt.Errorf("%s is already in use: is another `make run` or Temporal server running?", addr)
		}
	}
	up, err := planUpstream(os.Getenv, *simAddr)
	if err != nil {
		return err
	}
	fmt.Print(up) // where the models go, before anything starts
	if err := os.MkdirAll(".devstack", 0o755); err != nil {
		return err
	}
	fmt.Println("building the worker, llmsim and the starter into ./bin …")
	build := exec.Command("go", "build", "-o", "bin/", "./worker", "./starter", "./llmsim/cmd/llmsim")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var procs []*proc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			stopProc(procs[i])
		}
	}()
	start := func(name string, env []string, bin string, args ...string) (*proc, error) {
		logPath := filepath.Join(".devstack", name+".log")
		logf, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		p := &proc{name: name, cmd: cmd}
		procs = append(procs, p)
		return p, nil
	}

	args := []string{"server", "start-dev", "--db-filename", ".devstack/temporal.db",
		"--port", fmt.Sprint(*port), "--ui-port", fmt.Sprint(*uiPort), "--log-level", "warn"}
	names := make([]string, 0, len(workflows.SearchAttributes))
	for n := range workflows.SearchAttributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args = append(args, "--search-attribute", n+"="+workflows.SearchAttributes[n])
	}
	// A second namespace for agents that call durable-llm through Nexus.
	args = append(args, "--namespace", agentsNamespace)
	args = append(args, devServerLatencyArgs...)
	if _, err := start("temporal", nil, *temporalBin, args...); err != nil {
		return err
	}
	if err := waitListening(ctx, fmt.Sprintf("127.0.0.1:%d", *port), 30*time.Second); err != nil {
		return fmt.Errorf("Temporal dev server did not start (see .devstack/temporal.log): %w", err)
	}

	if err := createEndpoint(ctx, fmt.Sprintf("127.0.0.1:%d", *port)); err != nil {
		return err
	}

	workerEnv := up.workerEnv
	if up.sim {
		if inUse(*simAddr) {
			return fmt.Errorf("%s is already in use: stop what listens there or pass --llmsim-addr", *simAddr)
		}
		simArgs := []string{"--addr", *simAddr, "--scenario", *scenario}
		if up.simModels != "" {
			// A rehearsal of a provider's ladder: llmsim serves those names.
			simArgs = append(simArgs, "--models", up.simModels)
		}
		if _, err := start("llmsim", nil, "bin/llmsim", simArgs...); err != nil {
			return err
		}
		if err := waitListening(ctx, *simAddr, 15*time.Second); err != nil {
			return fmt.Errorf("llmsim did not start (see .devstack/llmsim.log): %w", err)
		}
	}
	workerEnv = append(workerEnv, fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", *port))
	if os.Getenv("WORKER_DEPLOYMENT") != "" {
		// A versioned worker that makes its build current (README
		// "Deploying a new build"). Off by default here: a restart after a
		// code change is a new build, and calls pinned to the old one would
		// wait for it.
		workerEnv = append(workerEnv, "WORKER_MAKE_CURRENT=1")
	}
	w, err := start("worker", workerEnv, "bin/worker")
	if err != nil {
		return err
	}

	fmt.Printf(`
durable-llm is running.

  Temporal Web UI   http://localhost:%[1]d
  worker metrics    http://127.0.0.1:9464/metrics
  logs              .devstack/{temporal,llmsim,worker}.log

%[2]s
Ask a question (in another terminal):

  go run ./starter ask "Where is my order?"
  go run ./starter ask "我的订单什么时候发货？"
  go run ./starter ask "[[sim fault=rate_limited times=1]] Where is my order?"

Then open the Web UI link it prints to see every attempt, wait and decision.
Workflows in namespace %[3]s call it through the Nexus endpoint %[4]s
(docs/nexus.md). Ctrl-C stops everything.
`, *uiPort, up, agentsNamespace, endpointName)

	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping…")
	case err := <-exited:
		w.cmd = nil
		return fmt.Errorf("the worker exited (%v); the end of .devstack/worker.log:\n%s", err, tail(filepath.Join(".devstack", "worker.log"), 5))
	}
	return nil
}

func stopProc(p *proc) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func inUse(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func waitListening(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if inUse(addr) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New(addr + " is not listening after " + timeout.String())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// tail is the last n lines of the file at path (empty when unreadable).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// devServerLatencyArgs take time out of every call on the dev server
// (docs/operating.md "A call's floor", where the measurements are): the
// task queue in one partition (a dev server has one worker fleet and no
// load to spread), eager activity dispatch (the worker that completes a
// workflow task starts the activity it schedules, no round trip through
// matching), and a transfer-queue reader that may poll its shard 1000
// times a second instead of 20, so a new workflow task waits a few
// milliseconds to be dispatched instead of up to 50.
var devServerLatencyArgs = []string{
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
}

// The namespace for agents and the Nexus endpoint make run creates.
const (
	agentsNamespace = "agents"
	endpointName    = "durable-llm"
)

// createEndpoint creates the Nexus endpoint durable-llm, whose target is
// the worker's namespace and task queue, once the server answers.
func createEndpoint(ctx context.Context, addr string) error {
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var c client.Client
		c, err = client.Dial(client.Options{HostPort: addr, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			continue
		}
		err = llmnexus.EnsureEndpoint(ctx, c, endpointName, client.DefaultNamespace, workflows.TaskQueue)
		c.Close()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("create the Nexus endpoint %s: %w", endpointName, err)
}
