package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// MemoryOptions configure RunMemory.
type MemoryOptions struct {
	// Temporal is a client of the dev server; HostPort its frontend address
	// for the worker process. Both required.
	Temporal client.Client
	HostPort string
	// Calls is the number of calls to hold in flight; default 1000.
	Calls int
	// The upstream's slow generation: every model sends its first token
	// TTFT after the request (default 60 s: a GPU server with a long
	// queue), then TokensPerSecond tokens a second (default 1) to an
	// answer of Tokens tokens (default 60), so a call stays in flight 2
	// minutes: every call starts before the first token of the first one,
	// and the answers are then streamed to the worker for a minute.
	TTFT            time.Duration
	TokensPerSecond float64
	Tokens          int
	// Variants are the worker settings to measure, one worker process
	// each; default MemoryVariants.
	Variants []MemoryVariant
	// ProfileDir, when set, receives the worker's heap and goroutine
	// profiles taken with the calls in flight (<variant>-heap.pb.gz,
	// <variant>-goroutines.txt) and again halfway through the generation
	// (<variant>-generating-…); the worker runs with WORKER_PPROF=1.
	ProfileDir string
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per phase (cmd/bench); nil: none.
	Meter *progress.Display
}

// MemorySample is the worker process's footprint at one moment.
type MemorySample struct {
	// State says when it was taken.
	State string
	// InFlight is the number of requests llmsim was serving.
	InFlight int
	// RSS is the resident set size (VmRSS); Goroutines the worker's
	// go_goroutines.
	RSS        int64
	Goroutines int
	// HeapInuse and StackInuse are the Go runtime's heap and stack spans
	// in use (go_memstats_heap_inuse_bytes, go_memstats_stack_inuse_bytes).
	HeapInuse, StackInuse int64
}

// MemoryVariant is one way to run the worker process and its calls.
type MemoryVariant struct {
	// Name says what is set.
	Name string
	// Env is added to the worker's environment.
	Env []string
	// Stream makes the calls ask to stream (stream: true), each followed
	// by a subscriber (llmclient.Follow in the benchmark's process) as the
	// front door would.
	Stream bool
}

// Calls says how the variant's calls run.
func (v MemoryVariant) Calls() string {
	if v.Stream {
		return "streamed, 1 subscriber each"
	}
	return "not streamed"
}

// MemoryVariants are the default variants: the worker as shipped and with
// the SDK's and Go's settings (sticky cache of 10,000 workflows, no memory
// limit, GOGC 100, adaptive goroutine stack sizes), with calls not streamed
// and streamed.
var MemoryVariants = []MemoryVariant{
	{Name: "defaults"},
	{Name: "defaults", Stream: true},
	{Name: SDKDefaults, Env: strings.Fields(SDKDefaults)},
	{Name: SDKDefaults, Env: strings.Fields(SDKDefaults), Stream: true},
}

// SDKDefaults is the worker's environment for the SDK's and Go's settings
// instead of the worker's defaults.
const SDKDefaults = "WORKER_STICKY_CACHE_SIZE=10000 GOMEMLIMIT=off GOGC=100 GODEBUG=adaptivestackstart=1"

// MemoryReport is the memory benchmark's result.
type MemoryReport struct {
	Options MemoryOptions
	Runs    []MemoryRun
}

// MemoryRun is one variant's measurements.
type MemoryRun struct {
	Variant MemoryVariant
	Samples []MemorySample
	// PeakRSS is the worker's high-water mark (VmHWM) at the end.
	PeakRSS int64
	// Generating is the largest sample while the answers were generated,
	// after every call had started.
	Generating MemorySample
	// Answered counts calls answered by a model, of Calls; Retried those
	// that took more than one attempt; Failed the failed attempts by
	// class; Upstream the requests llmsim received (5 warm-up calls
	// included).
	Answered, Retried int
	Failed            map[string]int
	Upstream          int
	// MaxInFlight is the most requests llmsim served at once.
	MaxInFlight int
	// StartRate is how fast the calls were started (calls per second).
	StartRate float64
	// CPU is the worker's CPU time (user + system) from the first call
	// started to the last answer.
	CPU time.Duration
	// History is the mean history of a few of the calls.
	History HistoryProfile
	// Generation is the mean time a call's upstream request took.
	Generation time.Duration
}

// generation returns the upstream's time to answer a call.
func (o MemoryOptions) generation() time.Duration {
	return o.TTFT + time.Duration(float64(o.Tokens)/o.TokensPerSecond*float64(time.Second))
}

// memoryPolicy is the worker's policy: the default ladder with attempt,
// first-token and idle timeouts well above the upstream's times (a loaded
// machine can be slow to read), so every call stays in its first attempt.
func memoryPolicy(ttft, gen time.Duration) string {
	return fmt.Sprintf(`# Memory benchmark: attempts wait for a slow upstream.
model_defaults:
  timeout: %s
  first_token_timeout: %s
  idle_timeout: 60s
models:
  - {name: qwen-72b, base_url: http://127.0.0.1:1/v1, context_window: 32768, system_prompt: full}
  - {name: qwen-14b, base_url: http://127.0.0.1:1/v1, context_window: 8192, system_prompt: partial}
  - {name: llama-8b, base_url: http://127.0.0.1:1/v1, context_window: 4096, system_prompt: none}
call:
  deadline: 10m
`, gen+120*time.Second, ttft+60*time.Second)
}

// RunMemory builds ./worker, runs it as a process of its own against the
// dev server and a slow llmsim, holds Calls calls in flight and reads the
// process's RSS (/proc/<pid>/status) and goroutines (its /metrics).
func RunMemory(ctx context.Context, o MemoryOptions) (*MemoryReport, error) {
	if o.Calls <= 0 {
		o.Calls = 1000
	}
	if o.TTFT <= 0 {
		o.TTFT = time.Minute
	}
	if o.TokensPerSecond <= 0 {
		o.TokensPerSecond = 1
	}
	if o.Tokens <= 0 {
		o.Tokens = 60
	}
	progress := progressTo(o.Progress)
	dir, err := os.MkdirTemp("", "durable-llm-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	progress("memory: building the worker")
	bin := filepath.Join(dir, "worker")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/durable-llm/durable-llm/worker").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build worker: %v\n%s", err, out)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(memoryPolicy(o.TTFT, o.generation())), 0o644); err != nil {
		return nil, err
	}
	if _, err := config.LoadConfig(policy); err != nil {
		return nil, err
	}
	if len(o.Variants) == 0 {
		o.Variants = MemoryVariants
	}
	rep := &MemoryReport{Options: o}
	for _, v := range o.Variants {
		progress("memory: worker with %s, calls %s", v.Name, v.Calls())
		run, err := runMemoryVariant(ctx, o, v, bin, policy, progress)
		if err != nil {
			return nil, fmt.Errorf("memory, %s: %w", v.Name, err)
		}
		rep.Runs = append(rep.Runs, *run)
	}
	return rep, nil
}

func runMemoryVariant(ctx context.Context, o MemoryOptions, v MemoryVariant, bin, policy string, progress func(string, ...any)) (*MemoryRun, error) {
	itl := llmsim.Duration(float64(time.Second) / o.TokensPerSecond)
	models := llmsim.DefaultModels()
	for i := range models {
		models[i].TTFT = &llmsim.Latency{Dist: llmsim.DistFixed, Value: llmsim.Duration(o.TTFT)}
		models[i].ITL = &itl
	}
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{Name: "slow-generation", Models: models}, KeepGenerations: 2*o.Calls + 10})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	tq := "bench-memory-" + randomID()
	var logs bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+o.HostPort, "TEMPORAL_NAMESPACE=default",
		"POLICY_FILE="+policy, "LLM_BASE_URL="+sim.BaseURL, "LLM_API_KEY=",
		"WORKER_TASK_QUEUE="+tq, "METRICS_ADDR="+metricsAddr, "LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, v.Env...)
	if o.ProfileDir != "" {
		cmd.Env = append(cmd.Env, "WORKER_PPROF=1")
	}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	pid := cmd.Process.Pid
	metricsURL := "http://" + metricsAddr + "/metrics"
	if err := waitHTTP(ctx, metricsURL, 30*time.Second, exited); err != nil {
		return nil, fmt.Errorf("worker did not start: %w\n%s", err, logs.String())
	}
	rep := &MemoryRun{Variant: v}
	sample := func(state string) error {
		rss, err := procStatusKB(pid, "VmRSS")
		if err != nil {
			return err
		}
		m, err := scrapeGauges(metricsURL, "go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes")
		if err != nil {
			return err
		}
		in, _ := sim.InFlight(llmsim.ModelQwen72B)
		rep.Samples = append(rep.Samples, MemorySample{State: state, InFlight: in, RSS: rss * 1024,
			Goroutines: int(m[0]), HeapInuse: int64(m[1]), StackInuse: int64(m[2])})
		return nil
	}
	gen := o.generation()
	lc := &llmclient.Client{Temporal: o.Temporal, TaskQueue: tq}
	calls := &memoryCalls{lc: lc, run: tq, tokens: o.Tokens, stream: v.Stream}
	// A few calls first, so the idle sample is of a worker that has run.
	if err := calls.start(ctx, 0, 5, 5, nil); err != nil {
		return nil, err
	}
	sleepCtx(ctx, 3*time.Second)
	if err := sample("worker started, 5 calls in flight"); err != nil {
		return nil, err
	}
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	progress("memory: starting %d calls against an upstream that takes %s per answer (%d tokens)", o.Calls, fmtDur(gen), o.Tokens)
	begin := time.Now()
	var started atomic.Int64
	startErr := make(chan error, 1)
	go func() {
		startErr <- calls.start(ctx, 5, o.Calls-5, 32, &started)
	}()
	held := false
	deadline := begin.Add(gen - 5*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		in, _ := sim.InFlight(llmsim.ModelQwen72B)
		rep.MaxInFlight = max(rep.MaxInFlight, in)
		if in >= o.Calls {
			held = true
			break
		}
		select {
		case err := <-startErr:
			if err != nil {
				return nil, err
			}
			startErr <- nil
		case <-exited:
			return nil, fmt.Errorf("worker exited\n%s", logs.String())
		case <-time.After(250 * time.Millisecond):
		}
	}
	rep.StartRate = float64(started.Load()+5) / time.Since(begin).Seconds()
	state := fmt.Sprintf("%d calls in flight", o.Calls)
	if !held {
		state = fmt.Sprintf("most calls in flight reached (%d of %d)", rep.MaxInFlight, o.Calls)
	}
	progress("memory: %s after %s", state, fmtDur(time.Since(begin)))
	// profile saves the worker's heap and goroutine profiles (when asked),
	// named by the variant and the moment.
	profile := func(moment string) error {
		if o.ProfileDir == "" {
			return nil
		}
		name := strings.NewReplacer(" ", "_", "=", "-", ",", "").Replace(v.Name + "-" + v.Calls() + moment)
		for file, path := range map[string]string{name + "-heap.pb.gz": "/debug/pprof/heap", name + "-goroutines.txt": "/debug/pprof/goroutine?debug=1"} {
			if err := fetchTo(ctx, "http://"+metricsAddr+path, filepath.Join(o.ProfileDir, file)); err != nil {
				return fmt.Errorf("profile %s: %w", path, err)
			}
		}
		progress("memory: profiles in %s", o.ProfileDir)
		return nil
	}
	if err := profile(""); err != nil {
		return nil, err
	}
	// Five samples a second apart; report the largest.
	best := MemorySample{}
	for k := 0; k < 5; k++ {
		if err := sample(state); err != nil {
			return nil, err
		}
		s := rep.Samples[len(rep.Samples)-1]
		rep.Samples = rep.Samples[:len(rep.Samples)-1]
		if s.RSS > best.RSS {
			best = s
		}
		sleepCtx(ctx, time.Second)
	}
	rep.Samples = append(rep.Samples, best)
	progress("memory: waiting for the answers")
	answered := make(chan answers, 1)
	go func() { answered <- waitAnswers(ctx, lc, tq, o.Calls, o.Tokens, gen+180*time.Second) }()
	// Samples every 2 s while the answers are generated; keep the largest.
	// The bar counts the seconds of the upstream's generation.
	step := o.Meter.Phase("memory: "+v.Name+", answers generated (seconds)", int(gen.Seconds()))
	defer step.Done()
	best = MemorySample{}
	// The profiles once more while every call generates: halfway from the
	// last call's first token to the first call's last.
	lastFirst, firstLast := time.Now().Add(o.TTFT), begin.Add(gen)
	midway := time.After(time.Until(lastFirst.Add(max(0, firstLast.Sub(lastFirst)) / 2)))
	for waiting := true; waiting; {
		select {
		case a := <-answered:
			rep.Answered, rep.Retried, rep.Failed = a.Answered, a.Retried, a.Failed
			waiting = false
		case <-midway:
			if err := profile("-generating"); err != nil {
				return nil, err
			}
		case <-time.After(2 * time.Second):
			step.Add(2)
			if err := sample(""); err != nil {
				return nil, err
			}
			s := rep.Samples[len(rep.Samples)-1]
			rep.Samples = rep.Samples[:len(rep.Samples)-1]
			if s.RSS > best.RSS {
				best = s
			}
		}
	}
	if best.RSS > 0 {
		best.State = "while the answers are generated (largest of samples every 2 s)"
		rep.Samples = append(rep.Samples, best)
		rep.Generating = best
	}
	calls.wait()
	if cpu1, err := procCPU(pid); err == nil {
		rep.CPU = cpu1 - cpu0
	}
	sleepCtx(ctx, 2*time.Second)
	if err := sample("all calls finished"); err != nil {
		return nil, err
	}
	hwm, err := procStatusKB(pid, "VmHWM")
	if err != nil {
		return nil, err
	}
	rep.PeakRSS = hwm * 1024
	rep.Upstream = sim.Stats().Totals.Arrivals
	rep.History, rep.Generation = memoryHistory(ctx, o, lc, tq, sim)
	return rep, nil
}

// memoryHistory returns the mean history of a few calls of the run and the
// mean generation time of their upstream requests.
func memoryHistory(ctx context.Context, o MemoryOptions, lc *llmclient.Client, run string, sim *llmsim.Server) (HistoryProfile, time.Duration) {
	mean := HistoryProfile{ByType: map[string]int{}}
	var gen time.Duration
	n := 0
	for i := 0; i < o.Calls; i += max(1, o.Calls/10) {
		id, _ := llmclient.Key(memoryRequest(run, i, o.Tokens, false))
		p, err := historyProfile(ctx, lc.Temporal, id, id)
		if err != nil {
			continue
		}
		for _, g := range sim.Generations(id) {
			gen += g.Service.D()
		}
		n++
		mean.Events += p.Events
		mean.Bytes += p.Bytes
		mean.WorkflowTasks += p.WorkflowTasks
		for k, c := range p.ByType {
			mean.ByType[k] += c
		}
	}
	if n == 0 {
		return mean, 0
	}
	mean.Events, mean.Bytes, mean.WorkflowTasks = mean.Events/n, mean.Bytes/n, mean.WorkflowTasks/n
	for k := range mean.ByType {
		mean.ByType[k] /= n
	}
	return mean, gen / time.Duration(n)
}

// memoryRequest is call i of a memory run: an answer of tokens tokens,
// streamed or not. The key does not depend on stream.
func memoryRequest(run string, i, tokens int, stream bool) workflows.CallRequest {
	req := StreamRequest(run, i, tokens, 10*time.Minute)
	req.Stream = stream
	return req
}

// memoryCalls starts a memory run's calls and, for streamed calls, a
// subscriber for each.
type memoryCalls struct {
	lc     *llmclient.Client
	run    string
	tokens int
	stream bool
	subs   sync.WaitGroup
}

// start starts calls from..from+n-1 with workers goroutines without
// waiting for their answers; started counts them (nil: not counted).
func (m *memoryCalls) start(ctx context.Context, from, n, workers int, started *atomic.Int64) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	next.Store(int64(from))
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= from+n || ctx.Err() != nil {
					return
				}
				run, err := m.lc.Start(ctx, memoryRequest(m.run, i, m.tokens, m.stream))
				if err != nil {
					errs <- err
					return
				}
				if m.stream {
					m.subs.Add(1)
					go func(id string) {
						defer m.subs.Done()
						_, _ = m.lc.Follow(ctx, id, 0, "", func(llmclient.StreamItem) error { return nil })
					}(run.GetID())
				}
				if started != nil {
					started.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// wait waits for the subscribers.
func (m *memoryCalls) wait() { m.subs.Wait() }

// procCPU returns the user + system CPU time of process pid
// (/proc/<pid>/stat, in clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(u+st) * 10 * time.Millisecond, nil
}

// answers is how a memory run's calls ended.
type answers struct {
	// Answered counts calls answered by a model; Retried those that took
	// more than one attempt, Failed the attempts that failed, by class.
	Answered, Retried int
	Failed            map[string]int
}

// waitAnswers waits up to timeout for calls 0..n-1 and counts those a
// model answered and those that needed a retry.
func waitAnswers(ctx context.Context, lc *llmclient.Client, run string, n, tokens int, timeout time.Duration) answers {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := answers{Failed: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			id, _ := llmclient.Key(memoryRequest(run, i, tokens, false))
			res, err := lc.Result(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && res.Model != "" {
				out.Answered++
			}
			if len(res.Attempts) > 1 {
				out.Retried++
			}
			for _, a := range res.Attempts {
				if a.Class != "" {
					out.Failed[a.Class]++
				}
			}
		}(i)
	}
	wg.Wait()
	return out
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration, exited <-chan error) error {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("timed out")
}

// procStatusKB reads a "kB" field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatusKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// scrapeGauges reads unlabelled metrics from a Prometheus text endpoint.
func scrapeGauges(url string, names ...string) ([]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	vals := make([]float64, len(names))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for i, n := range names {
			if v, ok := strings.CutPrefix(sc.Text(), n+" "); ok {
				if vals[i], err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
					return nil, fmt.Errorf("%s: %s: %w", url, n, err)
				}
				found++
			}
		}
	}
	if found < len(names) {
		return nil, fmt.Errorf("%s: missing some of %v", url, names)
	}
	return vals, nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// Header returns the report's header.
func (r *MemoryReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	rates := make([]string, len(r.Runs))
	for i, run := range r.Runs {
		rates[i] = fmt.Sprintf("%.0f/s", run.StartRate)
	}
	return Header{Title: fmt.Sprintf("Memory — the worker with %d calls in flight against slow generation", o.Calls), Command: command, Machine: m, Date: date, Params: []string{
		"worker: ./worker built and run as a process of its own (so RSS is the worker's alone), with its defaults (sticky workflow cache of 1,000, no GOMEMLIMIT, GOGC=40, GODEBUG=adaptivestackstart=0, HTTP buffers of 1 KiB; SDK worker options: 1,000 concurrent activities and workflow tasks) unless the variant sets them (" + SDKDefaults + ": the SDK's and Go's settings)",
		fmt.Sprintf("upstream: llmsim, unlimited slots, every model streams its first token after %s, then %g tokens/s, answers of %d tokens: %s per call (slow generation); policy: the default ladder with attempt, first-token and idle timeouts well above that, so each call stays in its first attempt", fmtDur(o.TTFT), o.TokensPerSecond, o.Tokens, fmtDur(o.generation())),
		"streamed calls: stream: true (the call activity publishes deltas, the first at once, then one batch per stream.batch_interval, " + fmtDur(config.DefaultConfig().Stream.BatchInterval.D()) + " by default), each followed by a subscriber (llmclient.Follow in the benchmark's process, as the front door does)",
		fmt.Sprintf("calls started with llmclient from 32 goroutines (%s); RSS from /proc/<pid>/status (VmRSS, the largest of 5 samples a second apart; peak VmHWM), goroutines, heap and stacks from the worker's /metrics; worker CPU from /proc/<pid>/stat, from the first call started to the last answer", strings.Join(rates, ", ")),
	}}
}

func (r *MemoryRun) label() string { return r.Variant.Name + " · " + r.Variant.Calls() }

// Table returns every variant's samples.
func (r *MemoryReport) Table() Table {
	t := Table{Left: 2, Columns: []string{"worker · calls", "moment", "upstream requests in flight", "worker RSS", "goroutines", "Go heap in use", "goroutine stacks"}}
	for _, run := range r.Runs {
		for _, s := range run.Samples {
			t.Rows = append(t.Rows, []string{run.label(), s.State, fmt.Sprint(s.InFlight), mb(s.RSS), fmt.Sprint(s.Goroutines), mb(s.HeapInuse), mb(s.StackInuse)})
		}
		t.Rows = append(t.Rows, []string{run.label(), "peak (VmHWM over the run)", "", mb(run.PeakRSS), "", "", ""})
	}
	return t
}

// Summary returns one row per variant: RSS in flight, peak, CPU and what
// a call cost in history.
func (r *MemoryReport) Summary() Table {
	t := Table{Left: 2, Columns: []string{"worker", "calls", fmt.Sprintf("RSS, %d in flight", r.Options.Calls), "RSS, answers generating (max)", "peak RSS", "goroutines", "worker CPU", "answered", "retried", "upstream requests", "history events per call", "signals per call", "upstream time per call"}}
	for _, run := range r.Runs {
		l := run.loaded()
		t.Rows = append(t.Rows, []string{run.Variant.Name, run.Variant.Calls(), mb(l.RSS), mb(run.Generating.RSS), mb(run.PeakRSS), fmt.Sprint(l.Goroutines),
			fmtDur(run.CPU.Round(time.Second)), fmt.Sprintf("%d/%d", run.Answered, r.Options.Calls), fmt.Sprint(run.Retried), fmt.Sprint(run.Upstream),
			fmt.Sprint(run.History.Events), fmt.Sprint(run.History.ByType["WorkflowExecutionSignaled"]), fmtDur(run.Generation)})
	}
	return t
}

// loaded returns the sample with the most requests in flight.
func (r *MemoryRun) loaded() MemorySample {
	var best MemorySample
	for _, s := range r.Samples {
		if s.InFlight > best.InFlight {
			best = s
		}
	}
	return best
}

// Markdown renders the report.
func (r *MemoryReport) Markdown(h Header) string {
	var b strings.Builder
	b.WriteString(h.Markdown())
	b.WriteString("\n" + r.Summary().Markdown() + "\n")
	b.WriteString(r.Table().Markdown() + "\n")
	for _, run := range r.Runs {
		l := run.loaded()
		if len(run.Samples) > 0 && l.InFlight > 0 {
			idle := run.Samples[0]
			n := float64(max(1, l.InFlight-idle.InFlight))
			fmt.Fprintf(&b, "- %s: per call in flight %.0f KB of RSS (%.0f KB heap, %.0f KB stacks) and %.1f goroutines over the near-idle worker; %d of %d calls answered by a model.\n",
				run.label(), float64(l.RSS-idle.RSS)/1024/n, float64(l.HeapInuse-idle.HeapInuse)/1024/n, float64(l.StackInuse-idle.StackInuse)/1024/n,
				float64(l.Goroutines-idle.Goroutines)/n, run.Answered, r.Options.Calls)
		}
	}
	for _, run := range r.Runs {
		if len(run.Failed) > 0 {
			var cl []string
			for _, k := range sortedKeys(run.Failed) {
				cl = append(cl, fmt.Sprintf("%s ×%d", k, run.Failed[k]))
			}
			fmt.Fprintf(&b, "- %s: %d calls needed a retry; failed attempts: %s.\n", run.label(), run.Retried, strings.Join(cl, ", "))
		}
	}
	b.WriteString("\nTarget: RSS ≤ 200 MB with " + fmt.Sprint(r.Options.Calls) + " calls in flight:\n\n")
	for _, run := range r.Runs {
		l := run.loaded()
		verdict := "met"
		if l.RSS > 200<<20 || l.InFlight < r.Options.Calls {
			verdict = "MISSED"
		}
		fmt.Fprintf(&b, "- %s: %s with %d in flight (peak over the run %s) — %s\n", run.label(), mb(l.RSS), l.InFlight, mb(run.PeakRSS), verdict)
	}
	return b.String()
}

// fetchTo saves the body of GET url in file.
func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
