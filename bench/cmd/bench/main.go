// Command bench runs durable-llm's benchmarks side by side with their
// baselines, prints a table per benchmark and writes the tables (Markdown)
// and charts (PNG) to bench/results:
//
//	storm          retry storms, flapping and sporadic faults and a metastable case: a one-shot client, five retrying ones and durable-llm
//	overhead       durable-llm vs a bare one-activity workflow vs a direct call
//	stream         time to first token and total time of a streamed answer: direct vs llmclient.Stream vs the front door
//	stream-events  history events per second of generation of a streamed call, per stream.batch_interval
//	hedge          a slow tail: not hedged vs hedged (adaptive, fixed delay): p50/p95/p99 and extra requests
//	memory         worker RSS and goroutines with 1,000 calls in flight, streamed and not
//	paths          one model call from an agent: bare child workflow, llmworkflow.Call, Nexus, front door (not in the default set)
//	fairness       one tenant floods the front door at 10× its quota, with calls or with refused, expensive requests: another tenant's p99 alone vs during the flood
//	sweep          incident shapes drawn from a seed: one-shot, impatient one-shot, LiteLLM-style and durable-llm judged per shape against the reachable limit (not in the default set; -seed, -shapes a..b)
//
// Usage:
//
//	go run ./bench/cmd/bench                         # everything (make bench)
//	go run ./bench/cmd/bench -bench storm -storm spike
//	go run ./bench/cmd/bench -short                  # a quick smoke run
//
// It starts its own Temporal dev servers from the pinned CLI (bin/temporal,
// or $TEMPORAL_CLI) and its own simulators.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"

	"github.com/durable-llm/durable-llm/bench"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
	"go.temporal.io/sdk/testsuite"
)

// display draws the benchmarks' progress on stderr: bars with elapsed
// time and an estimate on a terminal, lines in a log.
var display = progress.New(os.Stderr)

func main() {
	defer display.Wait()
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	benches     []string
	scaleCalls  []int
	scaleTokens int
	storms      []string
	contenders  []string
	without     []guard.RuleName
	scope       config.RateLimitScope
	short       bool
	deadline    time.Duration
	out         string
	command     string
	calls       int
	conc        int
	window      time.Duration
	inflight    int
	raw         bool
	note        string
	streamN     int
	streamCons  []string
	tokens      int
	eventsN     int
	eventsIv    []time.Duration
	memEnv      string
	memProfile  string
	memModes    []string
	memTTFT     time.Duration
	memTPS      float64
	memTokens   int
	hedgeN      int
	fairWindow  time.Duration
	fairProps   int
	fleetSizes  []int
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	benches := fs.String("bench", "storm,overhead,stream,stream-events,hedge,memory,fairness", "benchmarks to run, comma-separated: storm, overhead, stream, stream-events, hedge, memory, fairness")
	storms := fs.String("storm", strings.Join(bench.StormCaseNames, ","), "storm cases to run: "+strings.Join(bench.StormCaseNames, ", "))
	contenders := fs.String("contenders", "", "storm contenders to run (default all): "+strings.Join(bench.StormContenders, ", "))
	short := fs.Bool("short", false, "smoke run: shorter storms, fewer and shorter calls, 100 calls in flight for memory (the worker's defaults only)")
	deadline := fs.Duration("deadline", 20*time.Second, "per-call deadline in the storm benchmark (every contender)")
	out := fs.String("out", filepath.Join("bench", "results"), "directory for the tables (.md) and charts (.png)")
	calls := fs.Int("overhead-calls", 150, "overhead: sequential calls per contender at concurrency 1")
	conc := fs.Int("overhead-concurrency", 30, "overhead: concurrent callers for the throughput run")
	window := fs.Duration("overhead-window", 12*time.Second, "overhead: total length of each contender's throughput rounds")
	inflight := fs.Int("memory-calls", 1000, "memory: calls in flight")
	raw := fs.Bool("raw", false, "storm: also write every call's outcome to storm-<case>.csv")
	note := fs.String("note", "", "storm: a line added to each report's header, saying what code or settings the run measured")
	streamN := fs.Int("stream-calls", 30, "stream: sequential streamed calls per contender")
	streamCons := fs.String("stream-contenders", "", "stream: contenders to run (default all; the direct call always runs): "+strings.Join(bench.StreamContenders, ", "))
	tokens := fs.Int("stream-tokens", 500, "stream, stream-events: tokens of every streamed answer")
	eventsN := fs.Int("events-calls", 3, "stream-events: calls per batch interval and subscriber setting")
	eventsIv := fs.String("events-intervals", "200ms,300ms,400ms,500ms", "stream-events: stream.batch_interval values to measure, comma-separated")
	memProfiles := fs.String("memory-profiles", "", "memory: save the worker's heap and goroutine profiles, taken with the calls in flight, in this folder")
	memEnv := fs.String("memory-env", "defaults;"+bench.SDKDefaults, "memory: worker settings to measure, ';'-separated; each is \"defaults\" or space-separated VAR=value added to the worker's environment")
	memModes := fs.String("memory-modes", "plain,stream", "memory: calls to measure with each setting: plain (not streamed), stream (streamed, one subscriber each)")
	memTTFT := fs.Duration("memory-ttft", time.Minute, "memory: the upstream's time to first token")
	memTPS := fs.Float64("memory-tps", 1, "memory: the upstream's tokens per second")
	memTokens := fs.Int("memory-tokens", 60, "memory: tokens of every answer")
	hedgeN := fs.Int("hedge-calls", 400, "hedge: calls per contender")
	fairWindow := fs.Duration("fairness-window", 15*time.Second, "fairness: how long tenant B's calls are measured in each row")
	fairRefused := fs.Int("fairness-refused-properties", 4999, "fairness: properties of the tool schema of tenant A's refused requests (compiled before the refusal)")
	fleetSizes := fs.String("fleet-workers", "3,30,100,300", "fleet: fleet sizes to measure, comma-separated")
	scaleCalls := fs.String("scale-calls", "50,100,300", "stream-scale: calls at once to measure, comma-separated")
	scaleTokens := fs.Int("scale-tokens", 400, "stream-scale: tokens of every answer (400: 10 s at llmsim's 40 tokens/s)")
	without := fs.String("without", "", "storm: guard rules durable-llm's workers do not apply, comma-separated: a rule's removal, measured (never in production)")
	scope := fs.String("rate-limit-scope", "", "storm: durable-llm's rate_limit_scope for every model (endpoint, key, model, auto; default the policy's and the case's)")
	sweep := addSweepFlags(fs)
	srvArgs := fs.String("server-args", "", "extra arguments of every benchmark's `temporal server start-dev`, space-separated (e.g. --dynamic-config-value KEY=VALUE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	serverArgs = strings.Fields(*srvArgs)
	removed, err := guard.ParseRules(*without)
	if err != nil {
		return fmt.Errorf("-without: %w", err)
	}
	o := options{without: removed, scope: config.RateLimitScope(*scope),
		benches: split(*benches), storms: split(*storms), contenders: split(*contenders),
		short: *short, deadline: *deadline, out: *out,
		command: strings.TrimSpace("go run ./bench/cmd/bench " + strings.Join(withoutOut(args), " ")),
		calls:   *calls, conc: *conc, window: *window, inflight: *inflight, raw: *raw, note: *note,
		streamN: *streamN, streamCons: split(*streamCons), tokens: *tokens, eventsN: *eventsN,
		memEnv: *memEnv, memProfile: *memProfiles, memModes: split(*memModes), memTTFT: *memTTFT, memTPS: *memTPS, memTokens: *memTokens, hedgeN: *hedgeN, fairWindow: *fairWindow, fairProps: *fairRefused,
	}
	o.scaleTokens = *scaleTokens
	for _, v := range split(*scaleCalls) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("-scale-calls: want positive numbers of calls such as 100, got %q", v)
		}
		o.scaleCalls = append(o.scaleCalls, n)
	}
	for _, v := range split(*fleetSizes) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("-fleet-workers: want positive numbers of workers such as 30, got %q", v)
		}
		o.fleetSizes = append(o.fleetSizes, n)
	}
	for _, v := range split(*eventsIv) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("-events-intervals: want positive durations such as 300ms, got %q", v)
		}
		o.eventsIv = append(o.eventsIv, d)
	}
	if len(args) == 0 {
		o.command = "make bench  (go run ./bench/cmd/bench)"
	}
	if o.short {
		o.calls, o.window, o.inflight = min(o.calls, 40), min(o.window, 5*time.Second), min(o.inflight, 100)
		o.deadline = min(o.deadline, 15*time.Second)
		o.streamN, o.tokens, o.eventsN = min(o.streamN, 3), min(o.tokens, 80), min(o.eventsN, 1)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	for _, b := range o.benches {
		var err error
		switch b {
		case "storm":
			err = runStorms(ctx, o)
		case "overhead":
			err = runOverhead(ctx, o)
		case "stream":
			err = runStream(ctx, o)
		case "stream-events":
			err = runStreamEvents(ctx, o)
		case "hedge":
			err = runHedge(ctx, o)
		case "memory":
			err = runMemory(ctx, o)
		case "fairness":
			err = runFairness(ctx, o)
		case "paths":
			err = runPaths(ctx, o)
		case "sweep":
			err = runSweep(ctx, o, sweep)
		case "fleet":
			err = runFleet(ctx, o)
		case "stream-scale":
			err = runStreamScale(ctx, o)
		default:
			err = fmt.Errorf("unknown benchmark %q (have storm, overhead, stream, stream-events, stream-scale, hedge, memory, fairness, paths, fleet)", b)
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(display, "bench: done in %s; results in %s\n", time.Since(started).Round(time.Second), o.out)
	return nil
}

// withoutOut drops -out and -note and their values from the command the
// reports show: where the results were written is not part of how they
// were made, and the note has a line of its own.
func withoutOut(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-out" || a == "--out" || a == "-note" || a == "--note":
			i++
		case strings.HasPrefix(a, "-out=") || strings.HasPrefix(a, "--out=") || strings.HasPrefix(a, "-note=") || strings.HasPrefix(a, "--note="):
		default:
			out = append(out, a)
		}
	}
	return out
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// write prints a report and writes it to name in the output directory.
func write(o options, name, md string) error {
	fmt.Println(md)
	return os.WriteFile(filepath.Join(o.out, name), []byte(md), 0o644)
}

// serverArgs are the -server-args of every benchmark's dev server.
var serverArgs []string

// devServer starts a Temporal dev server for one benchmark.
func devServer(ctx context.Context, bench string) (*testsuite.DevServer, error) {
	fmt.Fprintf(display, "bench: %s — starting a Temporal dev server %s\n", bench, strings.Join(serverArgs, " "))
	srv, err := testenv.StartServer(ctx, workflows.SearchAttributes, testenv.ServerOptions{ExtraArgs: serverArgs})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server: %w", err)
	}
	return srv, nil
}

// runFleet measures the guards shared by fleets of synthetic workers, a
// dev server for each size.
func runFleet(ctx context.Context, o options) error {
	var rows []bench.FleetRow
	for _, n := range o.fleetSizes {
		srv, err := devServer(ctx, fmt.Sprintf("fleet of %d", n))
		if err != nil {
			return err
		}
		r, err := bench.RunFleet(ctx, srv.Client(), bench.FleetOptions{Workers: []int{n}, Seed: 1,
			Progress: func(f string, a ...any) { fmt.Fprintf(display, "bench: "+f+"\n", a...) }})
		_ = srv.Stop()
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	return write(o, "fleet.md", bench.FleetMarkdown(rows, o.command, time.Now()))
}

func runStorms(ctx context.Context, o options) error {
	for _, name := range o.storms {
		c, err := bench.LoadStormCase(name, o.deadline, o.short)
		if err != nil {
			return err
		}
		srv, err := devServer(ctx, "storm "+name)
		if err != nil {
			return err
		}
		date := time.Now()
		rep, err := bench.RunStorm(ctx, c, bench.StormOptions{Temporal: srv.Client(), Contenders: o.contenders, Progress: display, Meter: display, Without: o.without, Scope: o.scope})
		_ = srv.Stop()
		if err != nil {
			return err
		}
		chart := "storm-" + name + ".png"
		if err := bench.WriteStormChart(filepath.Join(o.out, chart), rep); err != nil {
			return err
		}
		if o.raw {
			var buf bytes.Buffer
			if err := rep.WriteCSV(&buf); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(o.out, "storm-"+name+".csv"), buf.Bytes(), 0o644); err != nil {
				return err
			}
		}
		h := rep.Header(o.command, bench.ThisMachine(), date)
		if o.note != "" {
			h.Params = append([]string{"note: " + o.note}, h.Params...)
		}
		md := rep.Markdown(h, chart)
		if err := write(o, "storm-"+name+".md", md); err != nil {
			return err
		}
	}
	return nil
}

func runOverhead(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "overhead")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	pid, err := bench.DevServerPID(srv.FrontendHostPort())
	if err != nil {
		fmt.Fprintf(display, "bench: overhead — server CPU per call not measured: %v\n", err)
	}
	date := time.Now()
	rep, err := bench.RunOverhead(ctx, bench.OverheadOptions{
		Temporal: srv.Client(), Calls: o.calls, Concurrency: o.conc, Window: o.window, Progress: display, Meter: display,
		ServerPID: pid,
	})
	if err != nil {
		return err
	}
	return write(o, "overhead.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date), nil))
}
func runPaths(ctx context.Context, o options) error {
	fmt.Fprintf(display, "bench: paths — starting a Temporal dev server\n")
	srv, err := testenv.StartServer(ctx, workflows.SearchAttributes, testenv.ServerOptions{ExtraArgs: []string{"--namespace", bench.PathsNamespace}})
	if err != nil {
		return fmt.Errorf("start the Temporal dev server: %w", err)
	}
	defer func() { _ = srv.Stop() }()
	date := time.Now()
	calls := 100
	if o.short {
		calls = 10
	}
	rep, err := bench.RunPaths(ctx, bench.PathsOptions{Temporal: srv.Client(), HostPort: srv.FrontendHostPort(), Calls: calls, Progress: display})
	if err != nil {
		return err
	}
	return write(o, "paths.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date)))
}

func runStream(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "stream")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	date := time.Now()
	rep, err := bench.RunStream(ctx, bench.StreamOptions{Temporal: srv.Client(), Contenders: o.streamCons, Calls: o.streamN, Tokens: o.tokens, Progress: display, Meter: display})
	if err != nil {
		return err
	}
	chart := "stream.png"
	if err := bench.WriteStreamChart(filepath.Join(o.out, chart), rep); err != nil {
		return err
	}
	return write(o, "stream.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date), chart))
}

// runStreamScale measures streamed answers at scale through the front
// door, on a dev server of its own.
func runStreamScale(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "stream-scale")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	pid, err := bench.DevServerPID(srv.FrontendHostPort())
	if err != nil {
		return err
	}
	date := time.Now()
	rep, err := bench.RunStreamScale(ctx, bench.StreamScaleOptions{Temporal: srv.Client(), ServerPID: pid, Concurrency: o.scaleCalls,
		Tokens: o.scaleTokens, Progress: display})
	if err != nil {
		return err
	}
	return write(o, "stream-scale.md", rep.Header(o.command, bench.ThisMachine(), date).Markdown()+"\n"+rep.Table())
}

func runStreamEvents(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "stream-events")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	date := time.Now()
	rep, err := bench.RunStreamEvents(ctx, bench.StreamEventsOptions{Temporal: srv.Client(), Intervals: o.eventsIv, Calls: o.eventsN, Tokens: o.tokens, Progress: display, Meter: display})
	if err != nil {
		return err
	}
	return write(o, "stream-events.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date)))
}

func runHedge(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "hedge")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	date := time.Now()
	ho := bench.HedgeOptions{Temporal: srv.Client(), Calls: o.hedgeN, Progress: display, Meter: display}
	if o.short {
		ho.Calls = min(ho.Calls, 60)
	}
	rep, err := bench.RunHedge(ctx, ho)
	if err != nil {
		return err
	}
	return write(o, "hedge.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date)))
}

func runMemory(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "memory")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	date := time.Now()
	mo := bench.MemoryOptions{Temporal: srv.Client(), HostPort: srv.FrontendHostPort(), Calls: o.inflight, Progress: display, Meter: display,
		TTFT: o.memTTFT, TokensPerSecond: o.memTPS, Tokens: o.memTokens, ProfileDir: o.memProfile}
	if o.short {
		mo.TTFT, mo.Tokens = min(mo.TTFT, 15*time.Second), min(mo.Tokens, 10)
		o.memEnv = strings.Split(o.memEnv, ";")[0]
	}
	for _, set := range strings.Split(o.memEnv, ";") {
		set = strings.TrimSpace(set)
		v := bench.MemoryVariant{Name: "defaults"}
		if set != "" && set != "defaults" {
			v.Name, v.Env = strings.Join(strings.Fields(set), " "), strings.Fields(set)
		}
		for _, mode := range o.memModes {
			switch mode {
			case "plain":
				mo.Variants = append(mo.Variants, v)
			case "stream":
				v.Stream = true
				mo.Variants = append(mo.Variants, v)
				v.Stream = false
			default:
				return fmt.Errorf("-memory-modes: unknown mode %q (have plain, stream)", mode)
			}
		}
	}
	rep, err := bench.RunMemory(ctx, mo)
	if err != nil {
		return err
	}
	return write(o, "memory.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date)))
}

func runFairness(ctx context.Context, o options) error {
	srv, err := devServer(ctx, "fairness")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	date := time.Now()
	fo := bench.FairnessOptions{Temporal: srv.Client(), Window: o.fairWindow, Refused: o.fairProps, Progress: display, Meter: display}
	if o.short {
		fo.Window, fo.Warmup = min(fo.Window, 5*time.Second), 3*time.Second
	}
	rep, err := bench.RunFairness(ctx, fo)
	if err != nil {
		return err
	}
	return write(o, "fairness.md", rep.Markdown(rep.Header(o.command, bench.ThisMachine(), date)))
}
