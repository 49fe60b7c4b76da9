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

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
)

// MemoryOptions configure RunMemory.
type MemoryOptions struct {
	// Temporal is a client of the dev server; HostPort its frontend address
	// for the worker process. Both required.
	Temporal client.Client
	HostPort string
	// Calls is the number of calls to hold in flight; default 1000.
	Calls int
	// Latency is the upstream's service time; default 60 s (long enough to
	// start every call before the first one answers).
	Latency time.Duration
	// Variants are the worker settings to measure, one worker process
	// each; default MemoryVariants.
	Variants []MemoryVariant
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
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

// MemoryVariant is one way to run the worker process.
type MemoryVariant struct {
	// Name says what is set.
	Name string
	// Env is added to the worker's environment.
	Env []string
}

// MemoryVariants are the default variants: the worker as shipped, and with
// a small sticky workflow cache and a soft memory limit for the Go runtime.
var MemoryVariants = []MemoryVariant{
	{Name: "defaults"},
	{Name: "WORKER_STICKY_CACHE_SIZE=64, GOMEMLIMIT=150MiB", Env: []string{"WORKER_STICKY_CACHE_SIZE=64", "GOMEMLIMIT=150MiB"}},
}

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
	// Answered counts calls answered by a model, of Calls.
	Answered int
	// MaxInFlight is the most requests llmsim served at once.
	MaxInFlight int
	// StartRate is how fast the calls were started (calls per second).
	StartRate float64
}

// memoryPolicy is the worker's policy: the default ladder with attempt and
// first-token timeouts above the upstream latency, so every call stays in its
// first attempt.
func memoryPolicy(latency time.Duration) string {
	t := (latency + 60*time.Second).String()
	return fmt.Sprintf(`# Memory benchmark: attempts wait for a slow upstream.
model_defaults:
  timeout: %[1]s
  first_token_timeout: %[1]s
models:
  - {name: qwen-72b, base_url: http://127.0.0.1:1/v1, context_window: 32768, system_prompt: full}
  - {name: qwen-14b, base_url: http://127.0.0.1:1/v1, context_window: 8192, system_prompt: partial}
  - {name: llama-8b, base_url: http://127.0.0.1:1/v1, context_window: 4096, system_prompt: none}
call:
  deadline: 10m
`, t)
}

// RunMemory builds ./worker, runs it as a process of its own against the
// dev server and a slow llmsim, holds Calls calls in flight and reads the
// process's RSS (/proc/<pid>/status) and goroutines (its /metrics).
func RunMemory(ctx context.Context, o MemoryOptions) (*MemoryReport, error) {
	if o.Calls <= 0 {
		o.Calls = 1000
	}
	if o.Latency <= 0 {
		o.Latency = 60 * time.Second
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
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
	if err := os.WriteFile(policy, []byte(memoryPolicy(o.Latency)), 0o644); err != nil {
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
		progress("memory: worker with %s", v.Name)
		run, err := runMemoryVariant(ctx, o, v, bin, policy, progress)
		if err != nil {
			return nil, fmt.Errorf("memory, %s: %w", v.Name, err)
		}
		rep.Runs = append(rep.Runs, *run)
	}
	return rep, nil
}

func runMemoryVariant(ctx context.Context, o MemoryOptions, v MemoryVariant, bin, policy string, progress func(string, ...any)) (*MemoryRun, error) {
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{
		Name: "slow-upstream",
		Models: []llmsim.ModelSpec{
			{Name: llmsim.ModelQwen72B, Latency: llmsim.Fixed(o.Latency)},
			{Name: llmsim.ModelQwen14B, Latency: llmsim.Fixed(o.Latency)},
			{Name: llmsim.ModelLlama8B, Latency: llmsim.Fixed(o.Latency)},
		},
	}})
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
	lc := &llmclient.Client{Temporal: o.Temporal, TaskQueue: tq}
	// A few calls first, so the idle sample is of a worker that has run.
	if err := startCalls(ctx, lc, tq, 0, 5, 5); err != nil {
		return nil, err
	}
	sleepCtx(ctx, 3*time.Second)
	if err := sample("worker started, 5 calls in flight"); err != nil {
		return nil, err
	}
	progress("memory: starting %d calls against a %s upstream", o.Calls, fmtDur(o.Latency))
	begin := time.Now()
	var started atomic.Int64
	startErr := make(chan error, 1)
	go func() {
		startErr <- startCallsCounted(ctx, lc, tq, 5, o.Calls-5, 32, &started)
	}()
	held := false
	deadline := begin.Add(o.Latency - 5*time.Second)
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
	// Three samples a second apart; report the largest.
	best := MemorySample{}
	for k := 0; k < 3; k++ {
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
	rep.Answered = waitAnswers(ctx, lc, tq, o.Calls, o.Latency+90*time.Second)
	sleepCtx(ctx, 2*time.Second)
	if err := sample("all calls finished"); err != nil {
		return nil, err
	}
	hwm, err := procStatusKB(pid, "VmHWM")
	if err != nil {
		return nil, err
	}
	rep.PeakRSS = hwm * 1024
	return rep, nil
}

func startCalls(ctx context.Context, lc *llmclient.Client, run string, from, n, workers int) error {
	var c atomic.Int64
	return startCallsCounted(ctx, lc, run, from, n, workers, &c)
}

// startCallsCounted starts calls from..from+n-1 with workers goroutines
// without waiting for their answers.
func startCallsCounted(ctx context.Context, lc *llmclient.Client, run string, from, n, workers int, started *atomic.Int64) error {
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
				if _, err := lc.Start(ctx, DurableRequest(run, i, 10*time.Minute)); err != nil {
					errs <- err
					return
				}
				started.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitAnswers waits up to timeout for calls 0..n-1 and counts those a
// model answered.
func waitAnswers(ctx context.Context, lc *llmclient.Client, run string, n int, timeout time.Duration) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var answered atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			id, _ := llmclient.Key(DurableRequest(run, i, 10*time.Minute))
			res, err := lc.Result(ctx, id)
			if err == nil && res.Model != "" {
				answered.Add(1)
			}
		}(i)
	}
	wg.Wait()
	return int(answered.Load())
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
	return Header{Title: fmt.Sprintf("Memory — the worker with %d calls in flight", o.Calls), Command: command, Machine: m, Date: date, Params: []string{
		"worker: ./worker built and run as a process of its own (so RSS is the worker's alone); SDK default worker options (1,000 concurrent activities, 1,000 concurrent workflow tasks, sticky workflow cache 10,000) unless the variant says otherwise",
		fmt.Sprintf("upstream: llmsim, every model answers after %s, unlimited slots; policy: the default ladder with attempt and header timeouts above that latency, so each call waits in its first attempt", fmtDur(o.Latency)),
		fmt.Sprintf("calls started with llmclient from 32 goroutines (%s); RSS from /proc/<pid>/status (VmRSS, peak VmHWM), goroutines, heap and stacks from the worker's /metrics", strings.Join(rates, ", ")),
	}}
}

// Table returns every variant's samples.
func (r *MemoryReport) Table() Table {
	t := Table{Left: 2, Columns: []string{"worker", "moment", "upstream requests in flight", "worker RSS", "goroutines", "Go heap in use", "goroutine stacks"}}
	for _, run := range r.Runs {
		for _, s := range run.Samples {
			t.Rows = append(t.Rows, []string{run.Variant.Name, s.State, fmt.Sprint(s.InFlight), mb(s.RSS), fmt.Sprint(s.Goroutines), mb(s.HeapInuse), mb(s.StackInuse)})
		}
		t.Rows = append(t.Rows, []string{run.Variant.Name, "peak (VmHWM over the run)", "", mb(run.PeakRSS), "", "", ""})
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
	b.WriteString("\n" + r.Table().Markdown() + "\n")
	for _, run := range r.Runs {
		l := run.loaded()
		if len(run.Samples) > 0 && l.InFlight > 0 {
			idle := run.Samples[0]
			n := float64(max(1, l.InFlight-idle.InFlight))
			fmt.Fprintf(&b, "- %s: per call in flight %.0f KB of RSS (%.0f KB heap, %.0f KB stacks) and %.1f goroutines over the near-idle worker; %d of %d calls answered by a model.\n",
				run.Variant.Name, float64(l.RSS-idle.RSS)/1024/n, float64(l.HeapInuse-idle.HeapInuse)/1024/n, float64(l.StackInuse-idle.StackInuse)/1024/n,
				float64(l.Goroutines-idle.Goroutines)/n, run.Answered, r.Options.Calls)
		}
	}
	b.WriteString("\nTarget: RSS ≤ 200 MB with " + fmt.Sprint(r.Options.Calls) + " calls in flight:\n\n")
	for _, run := range r.Runs {
		l := run.loaded()
		verdict := "met"
		if l.RSS > 200<<20 || l.InFlight < r.Options.Calls {
			verdict = "MISSED"
		}
		fmt.Fprintf(&b, "- %s: %s with %d in flight (peak over the run %s) — %s\n", run.Variant.Name, mb(l.RSS), l.InFlight, mb(run.PeakRSS), verdict)
	}
	return b.String()
}
