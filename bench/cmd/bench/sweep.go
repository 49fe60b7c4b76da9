package main

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/bench"
)

// sweepFlags are the sweep's own flags.
type sweepFlags struct {
	seed   *uint64
	shapes *string
}

// addSweepFlags registers the sweep's flags on fs.
func addSweepFlags(fs *flag.FlagSet) sweepFlags {
	return sweepFlags{
		seed:   fs.Uint64("seed", 1, "sweep: the seed the shapes are drawn from (the same seed draws the same shapes)"),
		shapes: fs.String("shapes", "0..31", "sweep: the shapes to run, first..last (inclusive), so that the sweep can run in parts"),
	}
}

// parseShapes reads "a..b" (or one index).
func parseShapes(s string) (from, to int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "..")
	if !ok {
		b = a
	}
	from, err1 := strconv.Atoi(strings.TrimSpace(a))
	to, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || from < 0 || to < from {
		return 0, 0, fmt.Errorf("-shapes: want first..last such as 0..7, got %q", s)
	}
	return from, to, nil
}

// runSweep runs shapes of the sweep, a dev server for each, and writes the
// part's results and the sweep's merged results to <out>/sweep; every run
// is logged in <out>/sweep/runs.log.
func runSweep(ctx context.Context, o options, f sweepFlags) (err error) {
	from, to, err := parseShapes(*f.shapes)
	if err != nil {
		return err
	}
	seed := *f.seed
	params := bench.DefaultSweepParams(o.deadline)
	dir := filepath.Join(o.out, "sweep")
	began := time.Now()
	rep := &bench.SweepReport{Format: bench.SweepFormat, Seed: seed, Params: params, Command: o.command, Machine: bench.ThisMachine(), Note: o.note}
	defer func() {
		if lerr := bench.LogSweepRun(dir, began, o.command, revision(), rep, time.Since(began), err); lerr != nil && err == nil {
			err = lerr
		}
	}()
	for _, s := range bench.GenerateSweep(seed, from, to, params) {
		fmt.Fprintf(display, "bench: sweep shape %d: %s\n", s.Index, s.Describe())
		srv, err := devServer(ctx, "sweep shape "+strconv.Itoa(s.Index))
		if err != nil {
			return err
		}
		out, err := bench.RunSweepShape(ctx, s, bench.SweepOptions{
			StormOptions: bench.StormOptions{Temporal: srv.Client(), Progress: display, Meter: display, Without: o.without, Scope: o.scope}, Params: params,
			CallsDir: filepath.Join(dir, "calls")})
		_ = srv.Stop()
		if err != nil {
			return err
		}
		fmt.Println(out.ShapeLine())
		rep.Outcomes = append(rep.Outcomes, *out)
		// Written after every shape, so an interrupted part keeps the
		// shapes it finished.
		if err := bench.WriteSweep(dir, bench.SweepPartName(seed, from, to), rep, began); err != nil {
			return err
		}
		merged, err := bench.MergeSweep(dir, seed)
		if err != nil {
			return err
		}
		if err := bench.WriteSweep(dir, bench.SweepName(seed), merged, time.Now()); err != nil {
			return err
		}
	}
	fmt.Println(rep.Markdown(began))
	if merged, err := bench.MergeSweep(dir, seed); err == nil && len(merged.Outcomes) > len(rep.Outcomes) {
		fmt.Printf("all shapes of seed %d run so far: %s\n", seed, merged.Verdict())
	}
	return nil
}

// revision is the commit the run measured, marked when the working tree
// had changes; "unknown" outside a git checkout.
func revision() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += " (working tree modified)"
	}
	return rev
}
