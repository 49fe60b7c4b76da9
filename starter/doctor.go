package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/starter/internal/doctor"
	"github.com/durable-llm/durable-llm/workflows"
)

// errChecksFailed is doctor's exit status when a check failed.
var errChecksFailed = errors.New("doctor: some checks failed (see the FAIL rows)")

// doctorCmd prints a table of what stands between this machine and a
// first call (package doctor) and fails when a check fails.
func doctorCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	policyFile := fs.String("policy", os.Getenv("POLICY_FILE"), "policy YAML file of the workers (env POLICY_FILE; default: the embedded policy, with LLM_MODELS, LLM_BASE_URL and LLM_API_KEY applied)")
	taskQueue := fs.String("task-queue", envOr("WORKER_TASK_QUEUE", workflows.TaskQueue), "task queue the workers poll")
	probe := fs.Bool("probe", false, "also send each rung one request for 1 token (a real provider bills it)")
	timeout := fs.Duration("timeout", 5*time.Second, "bound of each network check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("doctor takes no arguments, got %q", fs.Args())
	}
	cfg, err := config.LoadConfigOrDefault(*policyFile)
	if err != nil {
		return err
	}
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		return err
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return fmt.Errorf("temporal client settings: %w", err)
	}
	opts.Logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	hostPort, ns := opts.HostPort, opts.Namespace
	if hostPort == "" {
		hostPort = client.DefaultHostPort
	}
	if ns == "" {
		ns = client.DefaultNamespace
	}
	if *probe {
		fmt.Fprintln(out, "probing every rung with a 1-token request: a real provider bills these")
	}
	rows := doctor.Run(ctx, doctor.Options{
		Config: cfg, Getenv: os.Getenv, HostPort: hostPort, Namespace: ns, TaskQueue: *taskQueue,
		Probe: *probe, Timeout: *timeout,
		Dial: func() (client.Client, error) {
			dctx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			return client.DialContext(dctx, opts)
		},
	})
	if !doctor.Print(out, rows) {
		return errChecksFailed
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
