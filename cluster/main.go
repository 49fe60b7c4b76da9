// Command cluster is `make cluster`: the production topology on this
// machine, each part its own process, stopped by Ctrl-C:
//
//   - PostgreSQL (Debian's package) on 127.0.0.1:5433, data in
//     .cluster/postgres: Temporal's store and SQL visibility (with the LLM
//     search attributes), and the workers' shared answer cache and usage,
//   - Temporal's server (built from the Go module proxy, one process with
//     every service) on 127.0.0.1:7233 and its Web UI on :8233,
//   - llmsim (mixed faults) on :8000, unless LLM_BASE_URL is set or the
//     POLICY_FILE names its models' endpoints (base_url),
//   - three workers (metrics on :9464, :9465, :9466) and two front doors
//     (:8080, :8081; metrics on :9467, :9468).
//
// Calls, guards, cache and usage survive a restart of any part, or of all
// of it: the state is in .cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/durable-llm/durable-llm/testkit/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	workers := flag.Int("workers", 3, "worker processes")
	frontDoors := flag.Int("front-doors", 2, "front-door processes")
	dir := flag.String("dir", ".cluster", "state directory: PostgreSQL's data, configuration, logs")
	bin := flag.String("bin", "bin", "directory of the programs (make cluster-bin)")
	scenario := flag.String("scenario", envOr("LLMSIM_SCENARIO", "mixed"), "llmsim scenario (name or file)")
	flag.Parse()

	ports := cluster.DefaultPorts(*workers, *frontDoors)
	fmt.Println("building the worker, llmsim and the starter into ./bin …")
	build := exec.Command("go", "build", "-o", *bin+"/", "./worker", "./starter", "./llmsim/cmd/llmsim")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cluster.Start(ctx, cluster.Options{
		Dir: *dir, Bin: *bin, Workers: *workers, FrontDoors: *frontDoors, Ports: ports,
		Scenario: *scenario, Upstream: os.Getenv("LLM_BASE_URL"), Policy: os.Getenv("POLICY_FILE"),
		SimModels: os.Getenv("LLM_MODELS"), // the workers read it too: llmsim serves the ladder's names
		Log:       os.Stdout,
	})
	if err != nil {
		return err
	}
	defer c.Stop()

	fmt.Printf(`
durable-llm's cluster is running (state in %[1]s; logs in %[1]s/logs).

  Temporal          %[2]s (PostgreSQL at 127.0.0.1:%[3]d, databases temporal, temporal_visibility, durable_llm)
  Temporal Web UI   %[4]s
  front doors       %[5]s
  worker metrics    %[6]s
`, *dir, c.TemporalAddress(), ports.Postgres, c.UIURL(), frontDoorList(c, *frontDoors), workerMetrics(c, *workers))
	fmt.Printf(`
Ask through a front door, or through Temporal:

  curl -s %s/chat/completions -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"model":"auto","messages":[{"role":"user","content":"Where is my order?"}]}'
  LLM_ID_SECRET=$(cat %s/id-secret) TEMPORAL_ADDRESS=%s go run ./starter ask "Where is my order?"

(Tenants acme and globex; their tokens are in %s/tenants.yaml. Workflow IDs are keyed
with %s/id-secret, as in production.)

Kill any process (kill -9 <pid>, pids above): calls in flight finish on what is left.
Ctrl-C stops everything; the next make cluster resumes from %s.
`, c.FrontDoorURL(0), c.Token("acme"), *dir, c.TemporalAddress(), *dir, *dir, *dir)

	exits := make(chan string, len(c.Names()))
	for _, name := range c.Names() {
		go func() {
			if ch := c.Exited(name); ch != nil {
				<-ch
				exits <- name
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nstopping…")
			return nil
		case name := <-exits:
			fmt.Printf("%s exited (log: %s); the rest keeps running\n", name, c.LogPath(name))
		}
	}
}

// frontDoorList names each front door with its own metrics address.
func frontDoorList(c *cluster.Cluster, n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += "\n                    "
		}
		s += c.FrontDoorURL(i) + " (metrics " + c.FrontDoorMetricsURL(i) + ")"
	}
	return s
}

func workerMetrics(c *cluster.Cluster, n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ", "
		}
		s += c.WorkerMetricsURL(i)
	}
	return s
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
