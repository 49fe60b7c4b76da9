package histories

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmworker"
)

// ChildWorkerCommand is the first argument with which the recorder's
// command runs ChildWorkerMain instead of recording.
const ChildWorkerCommand = "child-worker"

// ChildWorkerMain runs a worker for one path in this process until the
// process is killed or ctx ends: the worker the recorder kills in the
// middle of an attempt. args are the ones Options.ChildWorker receives.
func ChildWorkerMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(ChildWorkerCommand, flag.ContinueOnError)
	address := fs.String("address", "", "Temporal frontend host:port")
	tq := fs.String("task-queue", "", "task queue")
	llm := fs.String("llm", "", "llmsim base URL")
	name := fs.String("path", "", "the path whose policy the worker uses")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *address == "" || *tq == "" || *llm == "" || *name == "" {
		return errors.New("child worker: -address, -task-queue, -llm and -path are required")
	}
	ps, err := selectPaths(paths(), []string{*name})
	if err != nil {
		return err
	}
	cfg, err := pathConfig(ps[0], *llm)
	if err != nil {
		return err
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: *address, Identity: childIdentity, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("child worker: dial %s: %w", *address, err)
	}
	defer c.Close()
	w, err := llmworker.New(c, llmworker.Options{
		Config: cfg, TaskQueue: *tq, Getenv: noKeys,
		Worker: worker.Options{Identity: childIdentity},
	})
	if err != nil {
		return err
	}
	stop := make(chan any)
	go func() {
		<-ctx.Done()
		close(stop)
	}()
	return w.Run(stop)
}
