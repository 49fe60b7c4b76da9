package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/replay"
)

const replayUsage = `usage: starter replay FILE…
       starter replay --query 'WorkflowType="LLMCall" AND ExecutionStatus="Completed"' [--limit N]

Replays workflow histories against the LLMCall of this build, one line per
workflow (OK, NON-DETERMINISTIC or REPLAY-FAILED with the workflow ID), and
stops with exit status 1 at the first history that does not replay: the
check to run before deploying a changed workflow.

FILE is a history as "temporal workflow show --output json" writes it.
--query lists workflows on the Temporal server (TEMPORAL_ADDRESS, …) by
visibility, newest first, and replays each one's history. Encrypted
histories need the keys that wrote them in LLM_PAYLOAD_KEYS.

`

// replayCmd is `starter replay`.
func replayCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	query := fs.String("query", "", "visibility query of the workflows to replay from the server")
	limit := fs.Int("limit", 1000, "with --query: replay at most this many workflows (0: all)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *query == "" && fs.NArg() == 0:
		return errors.New("replay: give history files, or --query to replay workflows from the server")
	case *query != "" && fs.NArg() > 0:
		return errors.New("replay: give history files or --query, not both")
	case *limit < 0:
		return fmt.Errorf("replay: --limit must be 0 (all) or more, got %d", *limit)
	}
	var ropts worker.WorkflowReplayerOptions
	if _, err := codec.ConfigureReplayer(&ropts, os.Getenv); err != nil {
		return err
	}
	chk, err := replay.New(replay.Options{Replayer: ropts, Out: out})
	if err != nil {
		return err
	}
	var n int
	if *query != "" {
		lc, closeFn, err := dial()
		if err != nil {
			return err
		}
		defer closeFn()
		n, err = chk.Query(ctx, lc.Temporal, *query, *limit)
		if err != nil {
			return fmt.Errorf("replay: %w%s", err, keyHint(err))
		}
		if n == 0 {
			fmt.Fprintf(out, "no workflow matches %s: nothing was checked\n", *query)
			return nil
		}
	} else if n, err = chk.Files(fs.Args()); err != nil {
		return fmt.Errorf("replay: %w%s", err, keyHint(err))
	}
	fmt.Fprintf(out, "%d histor%s replay against this build\n", n, map[bool]string{true: "y", false: "ies"}[n == 1])
	return nil
}

// keyHint says what to do when a history is encrypted with keys this
// process does not have.
func keyHint(err error) string {
	if strings.Contains(err.Error(), codec.EncodingEncrypted) {
		return " (the history is encrypted: set " + codec.EnvKeys + " to the keys that wrote it)"
	}
	return ""
}
