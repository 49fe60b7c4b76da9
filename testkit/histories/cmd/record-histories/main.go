// Command record-histories records the golden LLMCall histories (`make
// histories`): one real run per path on a dev server, checked, then saved
// as JSON for the replay tests.
//
//	record-histories [-out DIR] [-only name,name] [-list]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"

	"github.com/durable-llm/durable-llm/internal/progress"
	"github.com/durable-llm/durable-llm/testkit/histories"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == histories.ChildWorkerCommand {
		if err := histories.ChildWorkerMain(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "child worker:", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "workflows/testdata/histories", "directory of the history files")
	only := flag.String("only", "", "comma-separated paths to record (default: all)")
	list := flag.Bool("list", false, "list the paths and exit")
	flag.Parse()
	if *list {
		for _, p := range histories.Names() {
			fmt.Printf("%-32s %s\n", p[0], p[1])
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "record-histories:", err)
		os.Exit(1)
	}
	display := progress.New(os.Stderr)
	defer display.Wait()
	o := histories.Options{
		Dir: *out, Log: display, Meter: display,
		ChildWorker: func(args []string) *exec.Cmd {
			return exec.Command(exe, append([]string{histories.ChildWorkerCommand}, args...)...)
		},
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if err := histories.Record(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "record-histories:", err)
		os.Exit(1)
	}
	stale, err := histories.Stale(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "record-histories:", err)
		os.Exit(1)
	}
	for _, f := range stale {
		fmt.Fprintf(os.Stderr, "warning: %s is not recorded by any path: delete it if the path is gone\n", f)
	}
}
