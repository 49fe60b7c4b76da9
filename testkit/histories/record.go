package histories

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// Identities recorded in the histories instead of the default
// "pid@host@", so the files do not depend on the machine that made them.
const (
	clientIdentity = "history-recorder"
	workerIdentity = "history-recorder-worker"
	childIdentity  = "history-recorder-child-worker"
)

// Options configure Record. Zero values mean defaults.
type Options struct {
	// Dir receives <path>.json; required.
	Dir string
	// Only records the paths with these names; default every path.
	Only []string
	// Log receives a line per path; default discarded.
	Log io.Writer
	// Meter draws a bar over the paths (the command's); nil: none.
	Meter *progress.Display
	// HostPort of a running Temporal server to record on (its namespace
	// "default" needs the LLM search attributes); default: a dev server
	// started from the pinned CLI and stopped at the end.
	HostPort string
	// ChildWorker builds the command of a worker process for the paths
	// that kill one (class-worker_lost): a program that calls
	// ChildWorkerMain with args. Nil: those paths are skipped, with a line
	// in Log.
	ChildWorker func(args []string) *exec.Cmd

	// paths overrides the recorded paths (tests).
	paths []path
}

// Names lists the recorded paths, in recording order, with what each one
// shows.
func Names() [][2]string {
	var out [][2]string
	for _, p := range paths() {
		out = append(out, [2]string{p.name, p.doc})
	}
	return out
}

// Record runs every path (or Options.Only) on a real dev server with a
// real worker against llmsim, checks that each run took its path, and
// writes its history to Options.Dir/<path>.json. It stops at the first
// path that fails; files already written stay.
func Record(ctx context.Context, o Options) error {
	if o.Dir == "" {
		return errors.New("histories: an output directory is required")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	all := o.paths
	if all == nil {
		all = paths()
	}
	guardToo := len(o.Only) == 0 || slices.Contains(o.Only, GuardPath)
	only := slices.DeleteFunc(slices.Clone(o.Only), func(n string) bool { return n == GuardPath })
	todo, err := selectPaths(all, only)
	if err != nil {
		return err
	}
	if len(o.Only) > 0 && len(only) == 0 {
		todo = nil
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	hostPort := o.HostPort
	if hostPort == "" {
		srv, err := testenv.StartServer(ctx, workflows.SearchAttributes, testenv.ServerOptions{})
		if err != nil {
			return fmt.Errorf("histories: start the dev server: %w", err)
		}
		defer func() { _ = srv.Stop() }()
		hostPort = srv.FrontendHostPort()
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Identity: clientIdentity, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("histories: dial %s: %w", hostPort, err)
	}
	defer c.Close()

	total := len(todo)
	if guardToo && o.paths == nil {
		total++
	}
	step := o.Meter.Phase("recording golden histories", total)
	defer step.Done()
	for _, p := range todo {
		if p.childWorker && o.ChildWorker == nil {
			fmt.Fprintf(o.Log, "skip   %-32s needs a child worker process\n", p.name)
			step.Add(1)
			continue
		}
		start := time.Now()
		events, err := recordPath(ctx, c, hostPort, p, o)
		if err != nil {
			return fmt.Errorf("histories: path %s: %w", p.name, err)
		}
		fmt.Fprintf(o.Log, "saved  %-30s %3d events  %5s  %s\n", p.name, events,
			time.Since(start).Round(100*time.Millisecond), p.doc)
		step.Add(1)
	}
	if guardToo && o.paths == nil {
		defer step.Add(1)
		start := time.Now()
		events, err := recordGuard(ctx, c, o)
		if err != nil {
			return fmt.Errorf("histories: path %s: %w", GuardPath, err)
		}
		fmt.Fprintf(o.Log, "saved  %-30s %3d events  %5s  %s\n", GuardPath, events,
			time.Since(start).Round(100*time.Millisecond), "the fleet's guard: a run restored from the previous run's state, reports, continue-as-new")
	}
	return nil
}

func selectPaths(all []path, only []string) ([]path, error) {
	if len(only) == 0 {
		return all, nil
	}
	var out []path
	for _, name := range only {
		i := slices.IndexFunc(all, func(p path) bool { return p.name == name })
		if i < 0 {
			var names []string
			for _, p := range all {
				names = append(names, p.name)
			}
			return nil, fmt.Errorf("histories: no path %q (paths: %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// env is what one path runs on: its own llmsim, policy, task queue and
// worker, so per-process budgets and breakers never leak between paths.
type env struct {
	c        client.Client
	lc       *llmclient.Client
	hostPort string
	sim      *llmsim.Server
	cfg      *config.Config
	p        path
	tq       string
	o        Options
	w        *llmworker.Worker
}

// pathConfig is a path's policy with every model on the simulator.
func pathConfig(p path, simURL string) (*config.Config, error) {
	cfg := config.DefaultConfig()
	cfg.OverrideEndpoint(simURL, "")
	if p.policy != nil {
		p.policy(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("policy of path %s: %w", p.name, err)
	}
	return cfg, nil
}

func noKeys(string) string { return "" }

// recordPath records one path and returns the number of events saved.
func recordPath(ctx context.Context, c client.Client, hostPort string, p path, o Options) (int, error) {
	var sc *llmsim.Scenario
	if p.scenario != "" {
		var err error
		if sc, err = llmsim.BuiltinScenario(p.scenario); err != nil {
			return 0, err
		}
	}
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: sc})
	if err != nil {
		return 0, err
	}
	defer sim.Close()
	cfg, err := pathConfig(p, sim.BaseURL)
	if err != nil {
		return 0, err
	}
	e := &env{c: c, hostPort: hostPort, sim: sim, cfg: cfg, p: p, o: o, tq: workflows.TaskQueue + "-" + p.name}
	e.lc = &llmclient.Client{Temporal: c, TaskQueue: e.tq}
	defer e.stopWorker()
	if !p.childWorker {
		if err := e.startWorker(); err != nil {
			return 0, err
		}
	}
	if p.prepare != nil {
		if err := p.prepare(ctx, e); err != nil {
			return 0, fmt.Errorf("prepare: %w", err)
		}
	}
	drive := p.drive
	if drive == nil {
		drive = func(ctx context.Context, e *env, req workflows.CallRequest) (workflows.CallResult, error) {
			return e.call(ctx, req)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req := p.request
	id := request.KeyFor(req)
	res, callErr := drive(cctx, e, req)
	if callErr != nil && res.RequestID == "" {
		// A failed call's result so far comes from the state query.
		res, _ = e.lc.State(cctx, id)
	}
	if err := checkResult(p.want, res, callErr); err != nil {
		return 0, fmt.Errorf("the run did not take the path (%s): %w (its reason: %s)", p.doc, err, res.Reason)
	}
	h, err := replay.Fetch(cctx, c, id, "")
	if err != nil {
		return 0, err
	}
	if err := checkHistory(p.want, h); err != nil {
		return 0, err
	}
	if err := save(o.Dir, p.name, id, h); err != nil {
		return 0, err
	}
	return len(h.GetEvents()), nil
}

// save writes the history atomically and checks that the file replays
// against this build.
func save(dir, name, id string, h *historypb.History) error {
	data, err := replay.Marshal(h)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, name+".json")
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	defer os.Remove(tmp)
	r := worker.NewWorkflowReplayer()
	replay.RegisterThisBuild(r)
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	parsed, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	f.Close()
	if err != nil {
		return err
	}
	// Under its own workflow ID: child workflows' IDs derive from it.
	if err := r.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), parsed,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}); err != nil {
		return fmt.Errorf("the recorded history of %s does not replay: %s", id, replay.Reason(err))
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	return nil
}

func (e *env) startWorker() error {
	w, err := llmworker.New(e.c, llmworker.Options{
		Config: e.cfg, TaskQueue: e.tq, Getenv: noKeys,
		Worker: worker.Options{Identity: workerIdentity},
	})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	e.w = w
	return nil
}

func (e *env) stopWorker() {
	if e.w != nil {
		e.w.Stop()
		e.w = nil
	}
}

// call starts the call and waits for its result.
func (e *env) call(ctx context.Context, req workflows.CallRequest) (workflows.CallResult, error) {
	return e.lc.Call(ctx, req)
}

// prepCall runs an unrecorded call with its own key and returns its
// decisions.
func (e *env) prepCall(ctx context.Context, n int, question string) ([]string, error) {
	req := ask(fmt.Sprintf("%s-prep-%d", e.p.name, n), question)
	res, err := e.call(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Decisions(), nil
}

// openBreaker fails the first model until its breaker opens: calls that
// each fail on it twice (retry, then switch) until one finds it open.
func openBreaker(ctx context.Context, e *env) error {
	for i := 1; i <= 5; i++ {
		d, err := e.prepCall(ctx, i, "[[sim fault=server_error model=qwen-72b times=always]] "+plainQuestion)
		if err != nil {
			return err
		}
		if slices.Contains(d, "qwen-72b:breaker_open:switch_model") {
			return nil
		}
	}
	return errors.New("the breaker of qwen-72b did not open after 5 failing calls")
}

// primeCacheThenMaintenance has a model answer the recorded question,
// which the answer cache keeps, then puts every model under maintenance.
func primeCacheThenMaintenance(ctx context.Context, e *env) error {
	d, err := e.prepCall(ctx, 1, "How long does shipping to Canada take?")
	if err != nil {
		return err
	}
	if want := []string{"qwen-72b:ok:answer"}; !slices.Equal(d, want) {
		return fmt.Errorf("the call that fills the cache: attempts %v, want %v", d, want)
	}
	return e.sim.SetScenario(&llmsim.Scenario{Name: "maintenance", Models: llmsim.InstantModels(), Phases: []llmsim.Phase{{
		Name: "maintenance", Faults: []llmsim.FaultSpec{{Kind: llmsim.FaultMaintenance}},
	}}})
}

// spendBudget makes one retry, which spends the floor of a budget of one.
func spendBudget(ctx context.Context, e *env) error {
	d, err := e.prepCall(ctx, 1, "[[sim fault=error_body times=1]] "+plainQuestion)
	if err != nil {
		return err
	}
	if want := []string{"qwen-72b:body_error:retry", "qwen-72b:ok:answer"}; !slices.Equal(d, want) {
		return fmt.Errorf("the call that spends the budget: attempts %v, want %v", d, want)
	}
	return nil
}

// holdEndpoint starts a call whose first attempt gets a 429 with
// Retry-After 3 s, and returns once the simulator has answered it: the
// worker then holds the endpoint, and the recorded call waits for the hold.
func holdEndpoint(ctx context.Context, e *env) error {
	req := ask(e.p.name+"-prep-1", "[[sim fault=rate_limited retry_after=3s times=1]] "+plainQuestion)
	if _, err := e.lc.Start(ctx, req); err != nil {
		return err
	}
	return waitFor(ctx, "the 429 of the call that holds the endpoint", func() (bool, error) {
		return e.sim.Stats().Faults["rate_limited"] > 0, nil
	})
}

// cancelDuringBackoff starts the call, waits until it waits on its
// Retry-After timer and cancels it.
func cancelDuringBackoff(ctx context.Context, e *env, req workflows.CallRequest) (workflows.CallResult, error) {
	run, err := e.lc.Start(ctx, req)
	if err != nil {
		return workflows.CallResult{}, err
	}
	if err := waitFor(ctx, "the backoff timer", func() (bool, error) {
		h, err := replay.Fetch(ctx, e.c, run.GetID(), "")
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(h.GetEvents(), func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED
		}), nil
	}); err != nil {
		return workflows.CallResult{}, err
	}
	if err := e.c.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
		return workflows.CallResult{}, err
	}
	var res workflows.CallResult
	err = run.Get(ctx, &res)
	return res, err
}

// killWorkerMidAttempt starts the call on a worker process, kills the
// process (SIGKILL) once the upstream has seen the first attempt, and
// starts an in-process worker that finishes the call.
func killWorkerMidAttempt(ctx context.Context, e *env, req workflows.CallRequest) (workflows.CallResult, error) {
	cmd := e.o.ChildWorker([]string{"-address", e.hostPort, "-task-queue", e.tq, "-llm", e.sim.BaseURL, "-path", e.p.name})
	cmd.Stdout, cmd.Stderr = e.o.Log, e.o.Log
	if err := cmd.Start(); err != nil {
		return workflows.CallResult{}, fmt.Errorf("start the worker process: %w", err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	run, err := e.lc.Start(ctx, req)
	if err != nil {
		return workflows.CallResult{}, err
	}
	if err := waitFor(ctx, "the first attempt upstream", func() (bool, error) {
		return e.sim.Stats().Conversations[run.GetID()].Attempts >= 1, nil
	}); err != nil {
		return workflows.CallResult{}, err
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return workflows.CallResult{}, err
	}
	_ = cmd.Wait()
	killed = true
	if err := e.startWorker(); err != nil {
		return workflows.CallResult{}, err
	}
	var res workflows.CallResult
	if err := run.Get(ctx, &res); err != nil {
		return res, err
	}
	up := e.sim.Stats().Conversations[run.GetID()]
	if up.Attempts != 2 || len(up.Requests) != 2 || up.Requests[0].IdempotencyKey != up.Requests[1].IdempotencyKey {
		return res, fmt.Errorf("the upstream saw %+v, want the same attempt twice", up)
	}
	return res, nil
}

func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkResult checks the call's result and error against the path.
func checkResult(w want, res workflows.CallResult, err error) error {
	switch {
	case w.fails == failsCanceled:
		if !temporal.IsCanceledError(err) {
			return fmt.Errorf("want the call cancelled, got error %v", err)
		}
	case w.fails != "":
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != w.fails {
			return fmt.Errorf("want the call to fail with %s, got error %v", w.fails, err)
		}
	case err != nil:
		return fmt.Errorf("the call failed: %w", err)
	}
	want := w.decisions
	if want == nil {
		want = []string{}
	}
	if got := res.Decisions(); !slices.Equal(got, want) {
		return fmt.Errorf("attempts %v, want %v", got, want)
	}
	if res.Source != w.source {
		return fmt.Errorf("answered by %q, want %q", res.Source, w.source)
	}
	if w.check != nil {
		return w.check(res)
	}
	return nil
}

// checkHistory checks that the history closes as the path says and that
// no workflow task failed or timed out on the way.
func checkHistory(w want, h *historypb.History) error {
	evs := h.GetEvents()
	if len(evs) < 3 {
		return fmt.Errorf("history of %d events", len(evs))
	}
	closing := enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	switch {
	case w.fails == failsCanceled:
		closing = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
	case w.fails != "":
		closing = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
	}
	if last := evs[len(evs)-1].GetEventType(); last != closing {
		return fmt.Errorf("history ends with %s, want %s", last, closing)
	}
	timers := 0
	for _, ev := range evs {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			timers++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			return fmt.Errorf("workflow task failed (event %d): %s", ev.GetEventId(),
				ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			// A dead worker's sticky queue times out by design; any other
			// timeout means the machine was too busy for a clean recording.
			typ := ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType()
			if !w.stickyTimeout || typ != enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				return fmt.Errorf("workflow task timed out (event %d, %s): re-record on a quieter machine", ev.GetEventId(), typ)
			}
		}
	}
	if w.timers > 0 && timers != w.timers {
		return fmt.Errorf("history starts %d timer(s), want %d", timers, w.timers)
	}
	return nil
}

// Stale lists the .json files in dir that no path records.
func Stale(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	known := map[string]bool{GuardPath + ".json": true, GuardBeforeMemo + ".json": true, GuardBeforeFreshReports + ".json": true}
	for _, p := range paths() {
		known[p.name+".json"] = true
	}
	var stale []string
	for _, f := range files {
		if !known[filepath.Base(f)] {
			stale = append(stale, f)
		}
	}
	sort.Strings(stale)
	return stale, nil
}
