package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"
	"golang.org/x/net/netutil"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/internal/logging"
	"github.com/durable-llm/durable-llm/internal/tracing"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// serve runs the OpenAI-compatible front door (package frontdoor).
func serve(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", serveEnv("FRONTDOOR_ADDR", "127.0.0.1:8080"), "listen address (env FRONTDOOR_ADDR)")
	policyFile := fs.String("policy", os.Getenv("POLICY_FILE"), "policy YAML file of the workers: its models and limits (env POLICY_FILE; default: the embedded policy)")
	tokensFile := fs.String("tokens", os.Getenv("FRONTDOOR_TOKENS_FILE"), "YAML file mapping bearer tokens to tenants (env FRONTDOOR_TOKENS_FILE)")
	taskQueue := fs.String("task-queue", serveEnv("WORKER_TASK_QUEUE", workflows.TaskQueue), "task queue of the workers (env WORKER_TASK_QUEUE)")
	keepAlive := fs.Duration("keep-alive", 5*time.Second, "SSE keep-alive interval while a streamed call retries")
	logLevel := fs.String("log-level", serveEnv("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	maxConns := fs.Int("max-conns", defaultMaxConns, "most connections open at once; more wait to be accepted, and from 90 % of it on idle ones are closed after 1s (env FRONTDOOR_MAX_CONNS)")
	perClient := fs.Int("max-conns-per-client", defaultMaxConnsPerClient, "most connections open at once from one client address that are idle or serve a request without a valid token (those serving a tenant's request are the tenant's limits' to govern); beyond, its longest idle one is closed, else a request without a token is answered 429 (env FRONTDOOR_MAX_CONNS_PER_CLIENT)")
	bodyTimeout := fs.Duration("body-timeout", 30*time.Second, "most time a request's body may take to arrive; slower: 408, connection closed")
	metricsAddr := fs.String("metrics-addr", serveEnv("FRONTDOOR_METRICS_ADDR", "127.0.0.1:9465"), "address of the front door's Prometheus /metrics, apart from the door's own (env FRONTDOOR_METRICS_ADDR; empty: off)")
	withWorker := fs.Bool("worker", os.Getenv("FRONTDOOR_WORKER") == "1", "also run a worker for the task queue in this process, on the door's Temporal client, and start calls with Temporal's Eager Workflow Start: a call's first workflow task comes back with the start instead of waiting for a poll (env FRONTDOOR_WORKER=1; needs Temporal reachable at start; not with worker versioning, which an eager start does not follow)")
	drain := fs.String("drain", serveEnv("FRONTDOOR_DRAIN", "10s"), "on SIGTERM or Ctrl-C, how long the requests being served (streams included) may take to end before their connections are closed (env FRONTDOOR_DRAIN)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: starter serve [--addr 127.0.0.1:8080] [--policy FILE] [--tokens FILE]

Serves the OpenAI-compatible front door: POST /v1/chat/completions starts
(or attaches to) a durable LLMCall; GET /v1/models lists the policy's
models; GET /v1/calls/{id} returns a call started with
"Prefer: respond-async". Point any OpenAI client at http://ADDR/v1 with a
tenant's token as its API key.

Tokens map to tenants through %s="<token>=acme,<token>=globex"
(tokens of at least %d characters, e.g. from openssl rand -hex 32) and/or
a tenants file (--tokens), which also sets each tenant's limits: requests,
tokens and milliseconds of validation per minute and calls in flight,
counted by this process (a call over one is answered 429 with
Retry-After). Temporal settings come
from TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, …; %s, when set, encrypts
payloads as the workers do. %s keys the workflow IDs (shared by every
client of the deployment); without it serve listens only on loopback.

`, frontdoor.TokensEnv, frontdoor.MinTokenLen, codec.EnvKeys, request.EnvIDSecret)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	if err := connLimit(fs, maxConns, "FRONTDOOR_MAX_CONNS"); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := countSetting(fs, "max-conns-per-client", perClient, "FRONTDOOR_MAX_CONNS_PER_CLIENT"); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	drainFor, err := time.ParseDuration(*drain)
	if err != nil || drainFor < 0 {
		return fmt.Errorf("serve: --drain (FRONTDOOR_DRAIN): want a duration such as 30s, got %q", *drain)
	}
	// Workflow IDs keyed with LLM_ID_SECRET; without it only on loopback.
	ids, err := frontdoor.IDsFor(*addr, os.Getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}

	// With payloads encrypted, logs must not quote the prompt either.
	logger, flush, err := logging.New(logging.Options{Level: *logLevel, Private: strings.TrimSpace(os.Getenv(codec.EnvKeys)) != ""})
	if err != nil {
		return err
	}
	defer flush()

	cfg, err := config.LoadConfigOrDefault(*policyFile)
	if err != nil {
		return err // names the file, the field and what is expected
	}
	if err := cfg.ApplyEnv(os.Getenv); err != nil { // the workers' LLM_MODELS, LLM_BASE_URL
		return err
	}
	tenants, err := frontdoor.LoadTenantsFromEnv(*tokensFile, os.Getenv(frontdoor.TokensEnv))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}

	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return fmt.Errorf("temporal client settings: %w", err)
	}
	if _, err := codec.ConfigureClient(&opts, os.Getenv); err != nil {
		return err
	}
	opts.Logger = log.NewStructuredLogger(logger)
	traced := tracing.On(os.Getenv)
	if traced {
		// A server span per request, in the trace of the call it starts
		// (docs/operating.md "Tracing").
		shutdown, err := tracing.Setup(ctx, "durable-llm-frontdoor")
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = shutdown(sctx)
			cancel()
		}()
		ti, err := tracing.Interceptor()
		if err != nil {
			return err
		}
		opts.Interceptors = append(opts.Interceptors, ti)
	}
	// Lazy: the front door starts even when Temporal is down, and answers
	// 503 with Retry-After until it is reachable.
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return fmt.Errorf("temporal client: %w", err)
	}
	defer c.Close()
	hostPort := opts.HostPort
	if hostPort == "" {
		hostPort = client.DefaultHostPort
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := c.CheckHealth(hctx, &client.CheckHealthRequest{}); err != nil {
		logger.Warn("Temporal is not reachable yet; calls are answered 503 until it is",
			"temporal", hostPort, "error", err)
	}
	cancel()

	if *withWorker {
		// The door's worker: the same client, so that the server hands a
		// call's first workflow task to it with the start's answer. It
		// stops after the door has drained (deferred before the door's
		// shutdown runs, so after it).
		if err := doorWorkerAllowed(cfg, os.Getenv); err != nil {
			return err
		}
		w, err := llmworker.New(c, llmworker.Options{Config: cfg, TaskQueue: *taskQueue, Namespace: opts.Namespace, Logger: logger,
			Tracing: traced, Guards: llmworker.GuardOptions{DataConverter: opts.DataConverter}})
		if err == nil {
			err = w.Start()
		}
		if err != nil {
			return fmt.Errorf("serve --worker: %w", err)
		}
		defer w.Stop()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h, err := frontdoor.New(frontdoor.Options{
		Client: &llmclient.Client{Temporal: c, TaskQueue: *taskQueue, Namespace: opts.Namespace, Limits: cfg.Limits, EagerStart: *withWorker,
			IDs: ids, Deadline: cfg.Call.Deadline.D(), ReplayWindow: cfg.Idempotency.ReplayWindow.D(), KeyWindow: cfg.Idempotency.KeyWindow.D()},
		Tenants: tenants, Config: cfg, DataConverter: opts.DataConverter, KeepAlive: *keepAlive, BodyTimeout: *bodyTimeout,
		Logger: logger, Metrics: reg,
	})
	if err != nil {
		return err
	}
	metricsAt := serveMetrics(*metricsAddr, reg, logger)
	defer metricsAt.close()
	go warnUnsharedSettings(ctx, c, *taskQueue, llmworker.PrintSettings(cfg, os.Getenv), logger)
	var handler http.Handler = h
	if traced {
		handler = tracing.Handler(h)
	}
	srv, ln, err := doorServer(*addr, handler, connOptions{MaxConns: *maxConns, PerClient: *perClient, Authenticated: tenants.Authenticates})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	models := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		models[i] = m.Name
	}
	worker := ""
	if *withWorker {
		worker = " (and a worker of it in this process: calls start eagerly)"
	}
	fmt.Fprintf(out, "front door listening on http://%s/v1 (at most %d connections, %d per client address)\n  tenants: %s (%d tokens)\n  models:  %s (policy %s)\n  temporal: %s, task queue %s%s\n  metrics: %s; drain on stop: %s\n",
		ln.Addr(), *maxConns, *perClient, strings.Join(tenants.Names(), ", "), tenants.Len(), strings.Join(models, ", "), cfg.Source, hostPort, *taskQueue, worker,
		metricsAt.describe(), drainFor)
	for _, name := range tenants.Names() {
		l := tenants.Limits(name)
		fmt.Fprintf(out, "  limits of %s: %s, %s, %s, %s\n", name,
			limitText(l.RequestsPerMinute, "requests/min"), limitText(l.TokensPerMinute, "tokens/min"), limitText(l.MaxInFlight, "calls in flight"),
			limitText(l.ValidationMSPerMinute, "ms of validation/min"))
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Calls in flight go on in Temporal; their clients get them again with
	// the same request or Idempotency-Key.
	sctx, stop := context.WithTimeout(context.Background(), drainFor)
	defer stop()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// doorWorkerAllowed refuses serve --worker where the worker command does
// what the door's worker cannot: a shared store (the answer cache and the
// usage table), spend caps (which meter every attempt of a tenant) and
// worker versioning (which an eager start does not follow).
func doorWorkerAllowed(cfg *config.Config, getenv func(string) string) error {
	switch {
	case cfg.Store.Shared():
		return fmt.Errorf("serve --worker: the policy (%s) shares a store (store.kind %s), which only the worker command opens: run the workers with it", cfg.Source, cfg.Store.Kind)
	case cfg.Spend.Capped():
		return fmt.Errorf("serve --worker: the policy (%s) caps tenants' spend, which only the worker command meters: run the workers with it", cfg.Source)
	case getenv("WORKER_DEPLOYMENT") != "":
		return errors.New("serve --worker: WORKER_DEPLOYMENT is set, and an eager start does not follow worker versioning: run the workers with the worker command")
	}
	return nil
}

// defaultMaxConns is --max-conns' default.
const defaultMaxConns = 1024

// connLimit settles --max-conns of fs: the flag when given, else the
// variable env when set, else its default; it must be 1 or more.
func connLimit(fs *flag.FlagSet, maxConns *int, env string) error {
	return countSetting(fs, "max-conns", maxConns, env)
}

// countSetting settles the connection count of the flag name of fs: the
// flag when given, else the variable env when set, else its default; it
// must be 1 or more.
func countSetting(fs *flag.FlagSet, name string, n *int, env string) error {
	if !flagSet(fs, name) {
		if v := os.Getenv(env); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want a whole number of connections", env, v)
			}
			*n = i
		}
	}
	if *n < 1 {
		return fmt.Errorf("--%s (%s) is %d; want 1 or more", name, env, *n)
	}
	return nil
}

// listen listens on addr and accepts at most maxConns connections at once:
// beyond, a client waits in the kernel's queue until one closes, and no
// number of idle or trickling clients can take more of the process's
// file descriptors and memory than that.
func listen(addr string, maxConns int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(ln, maxConns), nil
}

// limitText says a limit, or that there is none (0).
func limitText(n int, unit string) string {
	if n == 0 {
		return "no limit of " + unit
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// serveEnv returns the environment variable k, or def when it is empty.
func serveEnv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// metricsServer is the front door's /metrics listener (nil: none).
type metricsServer struct {
	srv  *http.Server
	addr string
}

// serveMetrics serves reg's /metrics on addr ("" : off). A door that
// cannot take the address still serves calls: it says so and goes on
// without metrics (two doors on one host need two addresses).
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) *metricsServer {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Warn("front-door metrics off: the address is taken or refused; set --metrics-addr (FRONTDOOR_METRICS_ADDR)", "addr", addr, "error", err)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr().String()}
	go func() { _ = m.srv.Serve(ln) }()
	return m
}

// describe says where the metrics are served.
func (m *metricsServer) describe() string {
	if m == nil {
		return "off"
	}
	return "http://" + m.addr + "/metrics"
}

func (m *metricsServer) close() {
	if m != nil {
		_ = m.srv.Close()
	}
}

// warnUnsharedSettings says, once at start, which of the settings every
// process must share (the ladder, LLM_ID_SECRET, LLM_PAYLOAD_KEYS) this
// front door has otherwise than the workers polling queue: calls it
// starts would get other workflow IDs (a retry through another door
// starts a second call), models the workers do not know, or payloads
// they cannot read.
func warnUnsharedSettings(ctx context.Context, c client.Client, queue string, mine llmworker.SettingsPrint, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	diffs, err := llmworker.CompareFleetSettings(ctx, c, queue, mine)
	if err != nil {
		return // Temporal not reachable yet: calls are answered 503 meanwhile
	}
	for _, d := range diffs {
		logger.Warn("a setting every process must share is not shared: "+d, "see", "docs/calling.md, settings every process shares")
	}
}
