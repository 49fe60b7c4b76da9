// Package cluster runs the production topology on one machine, each part
// its own process: PostgreSQL, Temporal's server on it (both stores, SQL
// visibility with the LLM search attributes), Temporal's Web UI, llmsim,
// several workers and several front doors. `make cluster` runs it for a
// person; the cluster test (cluster_test.go) kills and restarts its parts
// mid-call.
//
// Temporal's server, its SQL tool and the Web UI server are built from
// the Go module proxy (`make cluster-bin`, see Makefile); PostgreSQL comes
// from Debian's packages.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/testkit/pgserver"
)

// The programs a cluster runs, in Options.Bin.
const (
	TemporalServerBin = "temporal-server"
	SQLToolBin        = "temporal-sql-tool"
	UIServerBin       = "temporal-ui-server"
	WorkerBin         = "worker"
	StarterBin        = "starter"
	LLMSimBin         = "llmsim"
)

// Databases on the cluster's PostgreSQL: Temporal's two and the shared
// store's (answer cache and usage).
const (
	TemporalDB   = "temporal"
	VisibilityDB = "temporal_visibility"
	StoreDB      = "durable_llm"
)

// Options of Start.
type Options struct {
	// Dir holds the cluster's state: PostgreSQL's data, the generated
	// configuration and one log per process. It survives restarts.
	Dir string
	// Bin is the directory of the programs (the constants above).
	Bin                 string
	Workers, FrontDoors int
	Ports               Ports
	// Scenario of llmsim (name or file); empty: "mixed".
	Scenario string
	// Upstream is the workers' LLM_BASE_URL; empty: llmsim.
	Upstream string
	// SimModels, comma-separated, are the model names llmsim serves
	// instead of its scenario's (its --models).
	SimModels string
	// Policy is the workers' and front doors' policy file; empty: the
	// embedded defaults with the shared store on the cluster's PostgreSQL.
	// A policy whose models name their base_url keeps its endpoints: no
	// llmsim is started for it unless Upstream says otherwise.
	Policy string
	// Env is added to the workers' and front doors' environment.
	Env []string
	// Log receives one line per step; nil: none.
	Log io.Writer
}

// Cluster is a running cluster. Its processes are named "temporal", "ui",
// "llmsim", "worker-1"…, "frontdoor-1"….
type Cluster struct {
	o  Options
	pg *pgserver.Server

	// tokens maps each tenant of the front doors to its bearer token.
	tokens map[string]string

	mu    sync.Mutex
	procs map[string]*proc
	order []string
}

type proc struct {
	name    string
	argv    []string
	env     []string
	ready   string // the address that listens once it is up; "" for workers
	metrics string // where it serves /metrics, said when it starts; "" for none
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start starts every part, in order, and returns once Temporal answers,
// the namespace "default" and the LLM search attributes exist, and every
// listening part listens. Stop stops all of it.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Workers < 1 || o.FrontDoors < 0 {
		return nil, fmt.Errorf("cluster: %d workers and %d front doors: at least one worker is needed", o.Workers, o.FrontDoors)
	}
	if len(o.Ports.FrontDoors) < o.FrontDoors || len(o.Ports.FrontDoorMetrics) < o.FrontDoors || len(o.Ports.Metrics) < o.Workers {
		return nil, errors.New("cluster: Ports has fewer front-door, front-door metrics or metrics ports than front doors or workers")
	}
	for _, b := range []string{TemporalServerBin, SQLToolBin, UIServerBin, WorkerBin, StarterBin, LLMSimBin} {
		if _, err := os.Stat(filepath.Join(o.Bin, b)); err != nil {
			return nil, fmt.Errorf("cluster: %s is missing from %s (make cluster-bin builds Temporal's server, SQL tool and Web UI)", b, o.Bin)
		}
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{o: o, procs: map[string]*proc{}}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()

	c.logf("PostgreSQL on 127.0.0.1:%d (data in %s)", o.Ports.Postgres, filepath.Join(o.Dir, "postgres"))
	if c.pg, err = pgserver.Start(pgserver.Options{Dir: filepath.Join(o.Dir, "postgres"), Port: o.Ports.Postgres}); err != nil {
		return nil, err
	}
	if err := c.setupSchemas(ctx); err != nil {
		return nil, err
	}
	if err := writeConfigs(o.Dir, o.Ports); err != nil {
		return nil, err
	}
	c.add(&proc{name: "temporal", ready: addr(o.Ports.Frontend), argv: []string{
		filepath.Join(o.Bin, TemporalServerBin), "--root", filepath.Join(o.Dir, "temporal"), "--config", "config",
		"--env", "development", "--allow-no-auth", "start"}})
	c.add(&proc{name: "ui", ready: addr(o.Ports.UI), argv: []string{
		filepath.Join(o.Bin, UIServerBin), "--root", filepath.Join(o.Dir, "ui"), "--config", "config", "--env", "development", "start"}})
	upstream := o.Upstream
	own, err := policyEndpoints(o.Policy)
	if err != nil {
		return nil, err
	}
	if upstream == "" && !own {
		scenario := o.Scenario
		if scenario == "" {
			scenario = "mixed"
		}
		c.add(&proc{name: "llmsim", ready: addr(o.Ports.LLMSim), argv: []string{
			filepath.Join(o.Bin, LLMSimBin), "--addr", addr(o.Ports.LLMSim), "--scenario", scenario, "--log-level", "warn", "--models", o.SimModels}})
		upstream = "http://" + addr(o.Ports.LLMSim) + "/v1"
	}
	policy := o.Policy
	if policy == "" {
		policy = filepath.Join(o.Dir, "policy.yaml")
		if err := os.WriteFile(policy, []byte(clusterPolicy), 0o644); err != nil {
			return nil, err
		}
	}
	tenants, err := c.writeTenants()
	if err != nil {
		return nil, err
	}
	idSecret, err := c.secret("id-secret", 32)
	if err != nil {
		return nil, err
	}
	common := append([]string{
		"TEMPORAL_ADDRESS=" + c.TemporalAddress(), "TEMPORAL_NAMESPACE=default",
		"LLM_BASE_URL=" + upstream, "POLICY_FILE=" + policy, "LLM_STORE_DSN=" + c.pg.DSN(StoreDB),
		// Keyed workflow IDs, as in production (docs/how-it-works.md
		// "Idempotency and audit"); starter ask against the cluster reads the same file.
		"LLM_ID_SECRET=" + idSecret,
	}, o.Env...)
	for i := range o.Workers {
		c.add(&proc{name: fmt.Sprintf("worker-%d", i+1), argv: []string{filepath.Join(o.Bin, WorkerBin)},
			metrics: c.WorkerMetricsURL(i),
			env:     append([]string{"METRICS_ADDR=" + addr(o.Ports.Metrics[i])}, common...)})
	}
	for i := range o.FrontDoors {
		// Each door its own metrics address: by default every door would
		// take the same one, and all but the first run without metrics.
		c.add(&proc{name: fmt.Sprintf("frontdoor-%d", i+1), ready: addr(o.Ports.FrontDoors[i]), metrics: c.FrontDoorMetricsURL(i),
			argv: []string{filepath.Join(o.Bin, StarterBin), "serve", "--addr", addr(o.Ports.FrontDoors[i]), "--tokens", tenants,
				"--metrics-addr", addr(o.Ports.FrontDoorMetrics[i])},
			env: common})
	}

	for _, name := range []string{"temporal", "ui", "llmsim"} {
		if c.procs[name] == nil {
			continue
		}
		if err := c.Restart(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := c.prepareNamespace(ctx); err != nil {
		return nil, err
	}
	for _, name := range c.order {
		if p := c.procs[name]; p.cmd == nil {
			if err := c.Restart(ctx, name); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	return c, nil
}

// clusterPolicy: the embedded defaults with the answer cache and the usage
// table shared through the cluster's PostgreSQL (LLM_STORE_DSN).
const clusterPolicy = `# Written by durable-llm's cluster: the embedded defaults, with the
# answer cache and the usage table in the cluster's PostgreSQL.
store:
  kind: postgres
  dsn_env: LLM_STORE_DSN
  usage_flush: 5s
`

// Tenants of the front doors: each gets a random bearer token, written
// once to Dir/tenants.yaml (readable by its owner only) and kept across
// restarts.
var Tenants = []string{"acme", "globex"}

// writeTenants reads Dir/tenants.yaml, writing it first when absent, and
// returns its path.
func (c *Cluster) writeTenants() (string, error) {
	path := filepath.Join(c.o.Dir, "tenants.yaml")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var f frontdoor.TenantsFile
		for _, name := range Tenants {
			tok := make([]byte, 24)
			if _, err := rand.Read(tok); err != nil {
				return "", err
			}
			f.Tenants = append(f.Tenants, frontdoor.TenantEntry{Name: name, Tokens: []string{"dl-" + hex.EncodeToString(tok)}})
		}
		if b, err = yaml.Marshal(f); err != nil {
			return "", err
		}
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return "", err
	}
	var f frontdoor.TenantsFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	c.tokens = map[string]string{}
	for _, t := range f.Tenants {
		if len(t.Tokens) > 0 {
			c.tokens[t.Name] = t.Tokens[0]
		}
	}
	return path, nil
}

// secret reads Dir/name, writing n random bytes (hex) there first when it
// is absent, readable by its owner only.
func (c *Cluster) secret(name string, n int) (string, error) {
	path := filepath.Join(c.o.Dir, name)
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	s := hex.EncodeToString(b)
	return s, os.WriteFile(path, []byte(s+"\n"), 0o600)
}

// Token is the bearer token of tenant at the front doors ("" when it has
// none in clear).
func (c *Cluster) Token(tenant string) string { return c.tokens[tenant] }

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func (c *Cluster) add(p *proc) {
	c.procs[p.name] = p
	c.order = append(c.order, p.name)
}

func (c *Cluster) logf(format string, args ...any) {
	if c.o.Log != nil {
		fmt.Fprintf(c.o.Log, format+"\n", args...)
	}
}

// setupSchemas creates Temporal's databases and brings their schemas to
// the server's version with its SQL tool (the schemas it embeds).
func (c *Cluster) setupSchemas(ctx context.Context) error {
	for _, db := range []struct{ name, schema string }{
		{TemporalDB, "postgresql/v12/temporal"},
		{VisibilityDB, "postgresql/v12/visibility"},
		{StoreDB, ""},
	} {
		if err := c.pg.CreateDatabase(ctx, db.name); err != nil {
			return err
		}
		if db.schema == "" {
			continue
		}
		fresh, err := c.noSchema(ctx, db.name)
		if err != nil {
			return err
		}
		tool := []string{"--plugin", "postgres12", "--ep", "127.0.0.1", "--port", strconv.Itoa(c.o.Ports.Postgres),
			"--user", "postgres", "--db", db.name}
		if fresh {
			c.logf("Temporal schema %s → database %s", db.schema, db.name)
			if err := c.sqlTool(ctx, append(tool, "setup-schema", "--version", "0.0")...); err != nil {
				return err
			}
		}
		if err := c.sqlTool(ctx, append(tool, "update-schema", "--schema-name", db.schema)...); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) noSchema(ctx context.Context, db string) (bool, error) {
	conn, err := pgx.Connect(ctx, c.pg.DSN(db))
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var exists bool
	err = conn.QueryRow(ctx, "SELECT to_regclass('public.schema_version') IS NOT NULL").Scan(&exists)
	return !exists, err
}

func (c *Cluster) sqlTool(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.o.Bin, SQLToolBin), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", SQLToolBin, args, err, out)
	}
	return nil
}

// prepareNamespace waits until Temporal answers, registers the namespace
// "default" (a server of its own has none) and the LLM search attributes.
func (c *Cluster) prepareNamespace(ctx context.Context) error {
	tc, err := c.Client(ctx)
	if err != nil {
		return err
	}
	defer tc.Close()
	ns := tc.WorkflowService()
	_, err = ns.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: "default", WorkflowExecutionRetentionPeriod: durationpb.New(72 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace default: %w", err)
	}
	// The frontend's namespace cache learns of a new namespace within
	// seconds; until then the namespace's calls are refused.
	return retry(ctx, time.Minute, func() error {
		return llmworker.EnsureSearchAttributes(ctx, tc, "default")
	})
}

// Client connects to the cluster's Temporal (namespace default), waiting
// for it to answer.
func (c *Cluster) Client(ctx context.Context) (client.Client, error) {
	var tc client.Client
	err := retry(ctx, time.Minute, func() error {
		var err error
		// No SDK log lines while the server is still starting.
		tc, err = client.DialContext(ctx, client.Options{HostPort: c.TemporalAddress(), Namespace: "default",
			Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return err
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			tc.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("Temporal at %s (log: %s): %w", c.TemporalAddress(), c.LogPath("temporal"), err)
	}
	return tc, nil
}

func retry(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Restart starts process name (again, when it was killed or stopped) and
// waits until it listens.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	c.mu.Lock()
	p := c.procs[name]
	var running <-chan struct{}
	if p != nil && p.cmd != nil {
		running = p.done
	}
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("cluster: no process %q", name)
	}
	if running != nil {
		select {
		case <-running:
		default:
			return fmt.Errorf("cluster: %s is running", name)
		}
	}
	logf, err := os.OpenFile(c.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	c.mu.Lock()
	p.cmd, p.done = cmd, done
	c.mu.Unlock()
	if p.metrics != "" {
		c.logf("%-12s pid %d  log %s  metrics %s", name, cmd.Process.Pid, c.LogPath(name), p.metrics)
	} else {
		c.logf("%-12s pid %d  log %s", name, cmd.Process.Pid, c.LogPath(name))
	}
	if p.ready == "" {
		return nil
	}
	deadline := time.Now().Add(90 * time.Second)
	for !listening(p.ready) {
		select {
		case <-done:
			return fmt.Errorf("%s exited at start (log: %s)", name, c.LogPath(name))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen on %s after 90s (log: %s)", name, p.ready, c.LogPath(name))
		}
	}
	return nil
}

func listening(a string) bool {
	conn, err := net.DialTimeout("tcp", a, 300*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// Kill kills process name at once (SIGKILL to its process group), as a
// crash or a lost machine would, and waits until it is gone.
func (c *Cluster) Kill(name string) error { return c.signal(name, syscall.SIGKILL, 0) }

// signal sends sig to name's process group and waits for it to exit,
// killing it after grace (0: wait as long as it takes).
func (c *Cluster) signal(name string, sig syscall.Signal, grace time.Duration) error {
	c.mu.Lock()
	p := c.procs[name]
	var pid int
	var done <-chan struct{}
	if p != nil && p.cmd != nil {
		pid, done = p.cmd.Process.Pid, p.done
	}
	c.mu.Unlock()
	if done == nil {
		return fmt.Errorf("cluster: %s is not running", name)
	}
	_ = syscall.Kill(-pid, sig)
	if grace > 0 {
		select {
		case <-done:
			return nil
		case <-time.After(grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	<-done
	return nil
}

// Pid is the process ID of name (0 when it never started).
func (c *Cluster) Pid(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil && p.cmd != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Exited is closed when name's current process exits.
func (c *Cluster) Exited(name string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil && p.done != nil {
		return p.done
	}
	return nil
}

// Names lists the processes in their start order.
func (c *Cluster) Names() []string { return append([]string(nil), c.order...) }

// Stop stops every process (SIGTERM, then SIGKILL after 10 s), in reverse
// order, then PostgreSQL. The data stays in Options.Dir.
func (c *Cluster) Stop() {
	for i := len(c.order) - 1; i >= 0; i-- {
		name := c.order[i]
		select {
		case <-c.Exited(name):
			continue
		default:
		}
		if c.Pid(name) != 0 {
			_ = c.signal(name, syscall.SIGTERM, 10*time.Second)
		}
	}
	if c.pg != nil {
		c.pg.Stop()
	}
}

// LogPath is the log file of process name.
func (c *Cluster) LogPath(name string) string { return filepath.Join(c.o.Dir, "logs", name+".log") }

// TemporalAddress is the host:port of Temporal's frontend.
func (c *Cluster) TemporalAddress() string { return addr(c.o.Ports.Frontend) }

// UIURL is the Web UI's address.
func (c *Cluster) UIURL() string { return "http://" + addr(c.o.Ports.UI) }

// FrontDoorURL is the base URL (…/v1) of front door i (from 0).
func (c *Cluster) FrontDoorURL(i int) string {
	return "http://" + addr(c.o.Ports.FrontDoors[i]) + "/v1"
}

// FrontDoorMetricsURL is where front door i (from 0) serves its
// Prometheus metrics.
func (c *Cluster) FrontDoorMetricsURL(i int) string {
	return "http://" + addr(c.o.Ports.FrontDoorMetrics[i]) + "/metrics"
}

// WorkerMetricsURL is where worker i (from 0) serves its Prometheus
// metrics.
func (c *Cluster) WorkerMetricsURL(i int) string {
	return "http://" + addr(c.o.Ports.Metrics[i]) + "/metrics"
}

// policyEndpoints reports whether the policy file at path names an
// endpoint (a base_url) for any of its models: its models then go where
// it says, and the cluster starts no simulator to send them to ("" : no
// policy, no endpoints).
func policyEndpoints(path string) (bool, error) {
	if path == "" {
		return false, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	// Read loosely: a policy without endpoints is valid only once
	// LLM_BASE_URL names one, which is what is being decided here.
	var p struct {
		Defaults struct {
			BaseURL string `yaml:"base_url"`
		} `yaml:"model_defaults"`
		Models []struct {
			BaseURL     string `yaml:"base_url"`
			Deployments []any  `yaml:"deployments"`
		} `yaml:"models"`
	}
	if err := yaml.Unmarshal(data, &p); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if p.Defaults.BaseURL != "" {
		return true, nil
	}
	for _, m := range p.Models {
		if m.BaseURL != "" || len(m.Deployments) > 0 {
			return true, nil
		}
	}
	return false, nil
}
