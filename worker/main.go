// Command worker runs the durable-llm worker: LLMCall workflows and their
// activities on task queue llm-calls.
//
// It is the thin main over package llmworker, the library that builds and
// runs the worker (and that tests, benchmarks and tools use in process):
// this command only reads flags and the environment, builds the logger
// (internal/logging) and the Temporal client, and handles signals.
//
// Temporal connection settings come from Temporal's standard environment
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings, or a
// profile in the Temporal config file). The policy file comes from --policy
// or POLICY_FILE (default: the embedded policy). LLM_BASE_URL and
// LLM_API_KEY, when set, point every model of the ladder at one
// OpenAI-compatible endpoint.
// LLM_PAYLOAD_KEYS, when set, encrypts every payload the worker writes
// (see package codec).
// WORKER_MAX_CALLS caps the upstream attempts the worker runs at once
// (default 1,000); memory grows with it, about 125 KB per call in flight
// (150 KB streamed). WORKER_STICKY_CACHE_SIZE caps the workflows kept in
// memory between their tasks (default WORKER_MAX_CALLS; the SDK's is
// 10,000). A smaller cache saves memory when many calls wait on slow
// upstreams, but a streamed call that is evicted replays its history at
// each batch of deltas. GOMEMLIMIT, Go's soft memory limit, is not set by
// default: one sized to the calls made the collector starve heartbeats
// with 1,000 streams in flight, and 18 % of them lost their answer (`go
// run ./bench/cmd/bench -bench memory`, docs/benchmarks.md).
// GOGC is 40 unless set: each call in flight holds little live memory but
// streams make much short-lived garbage, and with Go's 100 the heap ran at
// twice its live size (40 against 50: 4 MB less with 1,000 streamed calls
// in flight, 1 s more CPU). New goroutines start with Go's smallest stack
// (GODEBUG=adaptivestackstart=0, set by re-executing the worker once when
// GODEBUG does not say): the worker's deep workflow and activity stacks
// would otherwise size every new goroutine, the seven of each streamed call
// included. With HTTP buffers of 1 KiB they took 1,000 streamed calls in
// flight from 251 MB to 192 MB (docs/benchmarks.md).
// WORKER_PPROF=1 serves Go's profiles at /debug/pprof/ on the metrics
// address.
// WORKER_LIVE_ADDR is where the worker serves its streamed attempts' text
// to the front doors and clients that follow the calls (default
// 127.0.0.1:0, this host only; "off": deltas go through the calls'
// histories), and WORKER_LIVE_URL where they reach it (default
// http://<that address>, with the host name for an address of every
// interface such as ":9466").
package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/internal/logging"
	"github.com/durable-llm/durable-llm/internal/tracing"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/store"
	"github.com/durable-llm/durable-llm/workflows"
)

func main() {
	smallStacks()
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) { // -h: the flags were printed, as asked
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	policyFile := fs.String("policy", os.Getenv("POLICY_FILE"), "policy YAML file (env POLICY_FILE; default: the embedded policy)")
	metricsAddr := fs.String("metrics-addr", envOr("METRICS_ADDR", "127.0.0.1:9464"), "address of the Prometheus /metrics endpoint (env METRICS_ADDR; empty: off)")
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	taskQueue := fs.String("task-queue", envOr("WORKER_TASK_QUEUE", workflows.TaskQueue), "task queue to poll (env WORKER_TASK_QUEUE)")
	deployment := fs.String("deployment", os.Getenv("WORKER_DEPLOYMENT"),
		"Worker Deployment to join as a versioned worker (env WORKER_DEPLOYMENT; empty: unversioned): each call runs to its end on the build that started it")
	buildID := fs.String("build-id", os.Getenv("WORKER_BUILD_ID"), "this build's ID in the deployment (env WORKER_BUILD_ID; default: the VCS revision, else a hash of the binary)")
	makeCurrent := fs.Bool("make-current", os.Getenv("WORKER_MAKE_CURRENT") == "1",
		"make this build the deployment's current version once it polls, so new calls come to it (env WORKER_MAKE_CURRENT=1)")
	liveAddr := fs.String("live-addr", envOr("WORKER_LIVE_ADDR", "127.0.0.1:0"),
		"address to serve streamed attempts' live text at (env WORKER_LIVE_ADDR; off: their deltas go through the calls' histories)")
	liveURL := fs.String("live-url", os.Getenv("WORKER_LIVE_URL"), "where front doors and clients reach --live-addr (env WORKER_LIVE_URL; default http://<its address>)")
	modelCheck := fs.String("model-check", envOr("LLM_MODEL_CHECK", "strict"),
		"at start, ask each endpoint's GET /v1/models: strict (refuse to start when its list lacks a ladder model; an endpoint that lists nothing is logged), warn (log that too), off (env LLM_MODEL_CHECK)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	// With payloads encrypted, logs must not quote the prompt either.
	logger, flush, err := logging.New(logging.Options{Level: *logLevel, Private: strings.TrimSpace(os.Getenv(codec.EnvKeys)) != ""})
	if err != nil {
		return err
	}
	defer flush()

	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}

	cfg, err := config.LoadConfigOrDefault(*policyFile)
	if err != nil {
		return err // names the file, the field and what is expected
	}
	if err := cfg.ApplyEnv(os.Getenv); err != nil { // LLM_MODELS, LLM_BASE_URL, LLM_API_KEY
		return err
	}
	ends, err := checkModels(cfg, *modelCheck, logger)
	if err != nil {
		return err
	}
	learnWindows(cfg, logger)

	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return fmt.Errorf("temporal client settings: %w", err)
	}
	enc, err := codec.ConfigureClient(&opts, os.Getenv) // payload encryption, when LLM_PAYLOAD_KEYS is set
	if err != nil {
		return err
	}
	if enc != nil {
		logger.Info("payload encryption on (AES-256-GCM)", "encrypt_key_id", enc.ActiveKeyID(), "decrypt_key_ids", enc.KeyIDs())
	}
	opts.Logger = log.NewStructuredLogger(logger)
	traced := tracing.On(os.Getenv)
	if traced {
		// OpenTelemetry over OTLP (docs/operating.md "Tracing"): the workflow, its
		// activities and each upstream request join the caller's trace.
		shutdown, err := tracing.Setup(context.Background(), "durable-llm-worker")
		if err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = shutdown(ctx)
			cancel()
		}()
		ti, err := tracing.Interceptor()
		if err != nil {
			return err
		}
		opts.Interceptors = append(opts.Interceptors, ti)
	}
	metrics, err := llmworker.StartMetrics(*metricsAddr, logger)
	if err != nil {
		return err
	}
	defer metrics.Close()
	metrics.Init(cfg)
	opts.MetricsHandler = metrics.Handler()
	var shared *store.Postgres
	var usage *llmworker.Usage
	if cfg.Store.Shared() {
		// The answer cache and the usage table, shared by every worker.
		dsn := os.Getenv(cfg.Store.DSNEnv)
		if dsn == "" {
			return fmt.Errorf("%s: store.kind is %s, but %s is not set (the PostgreSQL URL, postgres://user:password@host:5432/db)",
				cfg.Source, config.StorePostgres, cfg.Store.DSNEnv)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		shared, err = store.Open(ctx, dsn)
		cancel()
		if err != nil {
			return fmt.Errorf("%s (from %s): %w", cfg.Store.DSNEnv, cfg.Source, err)
		}
		defer shared.Close()
		usage = llmworker.NewUsage(shared, cfg.Store.UsageFlush.D(), logger)
	} else if cfg.Spend.Capped() {
		usage = llmworker.NewUsage(nil, time.Minute, logger) // spend of this worker's calls only
	}
	if usage != nil {
		defer usage.Close()
		if cfg.Spend.Capped() {
			usage.PriceWith(func(model, kind string, n int64) float64 {
				c, _ := cfg.TokenCost(model, kind, n)
				return c
			})
		}
		opts.MetricsHandler = usage.Handler(opts.MetricsHandler)
	}

	c, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s (set TEMPORAL_ADDRESS, or a profile in the Temporal config file): %w", hostPort(opts), err)
	}
	defer c.Close()

	ns := opts.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	calls, err := positiveEnv("WORKER_MAX_CALLS", defaultMaxCalls, "calls in flight")
	if err != nil {
		return err
	}
	cache, err := positiveEnv("WORKER_STICKY_CACHE_SIZE", calls, "cached workflows")
	if err != nil {
		return err
	}
	worker.SetStickyWorkflowCacheSize(cache)

	wo := llmworker.Options{Config: cfg, Metrics: metrics.Activities(), TaskQueue: *taskQueue, Namespace: ns, Logger: logger,
		Worker: worker.Options{MaxConcurrentActivityExecutionSize: calls}, Tracing: traced,
		Guards: llmworker.GuardOptions{DataConverter: opts.DataConverter},
		Live:   llmworker.LiveOptions{Off: *liveAddr == "off", Addr: *liveAddr, URL: *liveURL},
		// What the model check heard decides, at Start, whether the
		// example FAQ may answer (nil with the check off: Start asks).
		Endpoints: ends}
	if shared != nil {
		wo.SharedCache = shared
	}
	if usage != nil && cfg.Spend.Capped() {
		wo.Spend = usage
	}
	if *deployment != "" {
		if *buildID == "" {
			if *buildID, err = selfBuildID(); err != nil {
				return err
			}
		}
		wo.Deployment = llmworker.Deployment{Name: *deployment, BuildID: *buildID}
	}
	w, err := llmworker.New(c, wo)
	if err != nil {
		return err
	}
	models := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		models[i] = m.Name + "@" + config.RedactURL(m.BaseURL)
		if len(m.Deployments) > 0 {
			where := make([]string, len(m.Deployments))
			for j, d := range m.Deployments {
				where[j] = d.Name + "=" + config.RedactURL(d.BaseURL)
			}
			models[i] = m.Name + "@[" + strings.Join(where, " ") + "]"
		}
	}
	logger.Info("durable-llm worker starting", "temporal", hostPort(opts), "namespace", ns, "task_queue", *taskQueue,
		"policy", cfg.Source, "ladder", models, "metrics", *metricsAddr, "live", cmp.Or(w.LiveURL(), "off"), "store", cfg.Store.Kind, "tracing", traced,
		"max_calls", calls, "sticky_cache", cache, "memory_limit", memoryLimit(), "gogc", gcPercent(), "godebug", os.Getenv("GODEBUG"))

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	interrupt := make(chan any)
	go onSignal(sig, interrupt, w.StopTimeout(), w.StopTimeout()+llmworker.StopSlack+exitSlack, logger, func() {
		flush()
		os.Exit(1)
	})
	if err := w.Start(); err != nil {
		return err
	}
	if d := wo.Deployment; d.Name != "" {
		logger.Info("versioned worker", "deployment", d.Name, "build_id", d.BuildID, "make_current", *makeCurrent)
		if *makeCurrent {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := llmworker.MakeCurrent(ctx, c, ns, d.Name, d.BuildID)
			cancel()
			if err != nil {
				w.Stop()
				return err
			}
			logger.Info("this build is current: new calls come to it", "deployment", d.Name, "build_id", d.BuildID)
		} else {
			warnNotCurrent(c, d, logger)
		}
	}
	<-interrupt
	w.Stop()
	logger.Info("worker stopped")
	return nil
}

// exitSlack is how long the closes after the worker's Stop (the Temporal
// client, the usage flush, the store, the tracer's last export) may take
// before the process exits without them.
const exitSlack = 10 * time.Second

// onSignal closes interrupt at the first signal, which stops the worker
// (its attempts have drain to finish), and calls exit at a second signal,
// or once limit has passed without the process ending: a worker stops
// within its drain timeout (and the slack of its shutdown) whatever its
// attempts, or the closes after them, are doing.
func onSignal(sig <-chan os.Signal, interrupt chan<- any, drain, limit time.Duration, logger *slog.Logger, exit func()) {
	s := <-sig
	logger.Info("stopping: draining in-flight activities", "signal", s.String(), "drain_timeout", drain)
	close(interrupt)
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case s := <-sig:
		logger.Warn("second signal: exiting without waiting for the attempts in flight", "signal", s.String())
	case <-t.C:
		logger.Error("still stopping after the drain timeout and its slack: exiting", "limit", limit)
	}
	exit()
}

// warnNotCurrent says loudly when this versioned worker's build is not the
// deployment's current version: it gets no new calls until it is.
func warnNotCurrent(c client.Client, d llmworker.Deployment, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := c.WorkerDeploymentClient().GetHandle(d.Name).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	cur := ""
	if err == nil && desc.Info.RoutingConfig.CurrentVersion != nil {
		cur = desc.Info.RoutingConfig.CurrentVersion.BuildID
	}
	if cur != d.BuildID {
		logger.Warn("this build is not the deployment's current version: it gets no new calls until it is",
			"deployment", d.Name, "build_id", d.BuildID, "current", cur,
			"make it current", "temporal worker deployment set-current-version --deployment-name "+d.Name+" --build-id "+d.BuildID)
	}
}

// selfBuildID names this build: its VCS revision when built from a clean
// tree, else the first 12 hex digits of the binary's SHA-256 (a changed
// binary is a new build).
func selfBuildID() (string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", true
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				dirty = kv.Value == "true"
			}
		}
		if rev != "" && !dirty {
			return rev[:min(len(rev), 12)], nil
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("build ID: %w (set WORKER_BUILD_ID)", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("build ID: %w (set WORKER_BUILD_ID)", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("build ID: %w (set WORKER_BUILD_ID)", err)
	}
	return "bin-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// checkModels asks every endpoint of the ladder for its models and refuses
// to start when one does not offer a ladder model (mode strict or warn),
// or lists none (strict; warn logs it).
// It returns what the endpoints said (nil when the check is off).
func checkModels(cfg *config.Config, mode string, logger *slog.Logger) ([]llmworker.EndpointModels, error) {
	switch mode {
	case "off":
		return nil, nil
	case "strict", "warn":
	default:
		return nil, fmt.Errorf("-model-check (LLM_MODEL_CHECK): want strict, warn or off, got %q", mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends := llmworker.AskModels(ctx, cfg, os.Getenv, 5*time.Second)
	warnings, err := llmworker.CheckModels(ends, mode == "warn")
	for _, w := range warnings {
		logger.Warn("model ladder not checked", "detail", w)
	}
	if err != nil {
		return ends, fmt.Errorf("the model ladder (policy %s): %v. Name the models the endpoint offers, in order, with %s=a,b (or a policy file); "+
			"LLM_MODEL_CHECK=warn starts anyway (for a provider whose list leaves out names it serves)", cfg.Source, err, config.EnvModels)
	}
	return ends, nil
}

// learnWindows asks the servers for the context windows the policy does
// not set (at most llmworker.WindowProbeTimeout; an unreachable server
// keeps the assumed window), uses them for pruning and says each model's
// window and where it came from.
func learnWindows(cfg *config.Config, logger *slog.Logger) {
	ws := llmworker.LearnWindows(context.Background(), cfg, os.Getenv, llmworker.WindowProbeTimeout)
	llmworker.ApplyWindows(cfg, ws)
	for _, w := range ws {
		switch w.Source {
		case llmworker.WindowAssumed:
			logger.Warn("context window assumed", "model", w.Model, "tokens", w.Tokens, "from", w.From)
		case llmworker.WindowBound:
			logger.Warn("context window: only an upper bound is known", "model", w.Model, "tokens", w.Tokens, "from", w.From)
		default:
			logger.Info("context window", "model", w.Model, "tokens", w.Tokens, "from", w.From)
		}
	}
}

// memoryLimit words the Go runtime's soft memory limit (GOMEMLIMIT).
func memoryLimit() string {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return fmt.Sprintf("%d MiB", l>>20)
	}
	return "none"
}

// defaultGOGC is the collector's target when GOGC is unset (Go's is 100),
// chosen with the memory benchmark (see the package doc).
const defaultGOGC = 40

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// defaultMaxCalls is the calls (upstream attempts) a worker runs at once,
// the SDK's default of concurrent activities; the sticky cache holds as
// many workflows by default (see the package doc for why not fewer).
const defaultMaxCalls = 1000

// positiveEnv reads a positive count from the environment variable name,
// def when it is unset.
func positiveEnv(name string, def int, what string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: want a positive number of %s, got %q", name, what, v)
	}
	return n, nil
}

func hostPort(o client.Options) string {
	if o.HostPort == "" {
		return client.DefaultHostPort
	}
	return o.HostPort
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
