package llmworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/livestream"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmnexus"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
	"github.com/google/uuid"
)

// Options configure New.
type Options struct {
	// Config is the policy; default config.DefaultConfig().
	Config *config.Config
	// Metrics of the activities; default none.
	Metrics activities.Metrics
	// Getenv reads API keys; default os.Getenv.
	Getenv func(string) string
	// Transport under the activities' HTTP client (tests); default the
	// standard transport.
	Transport http.RoundTripper
	// Worker options passed to the Temporal worker. WorkerStopTimeout
	// defaults to the slowest model's timeout + 5 s, so a stopping worker
	// drains its attempts.
	Worker worker.Options
	// TaskQueue; default workflows.TaskQueue.
	TaskQueue string
	// Namespace of the client, where Start registers the LLM search
	// attributes when they are missing; default "default".
	Namespace string
	// Logger of the worker's own messages (the guard sync); default
	// slog.Default().
	Logger *slog.Logger
	// SharedCache is the answer cache every worker shares (store.kind
	// postgres); nil: this worker's own.
	SharedCache activities.SharedCache
	// Spend meters each tenant's spend of the day for the policy's spend
	// caps (Usage with PriceWith); nil: caps are not enforced.
	Spend activities.SpendMeter
	// Tracing adds a span per upstream attempt (GenAI attributes) and its
	// HTTP client span, in the global tracer provider; the client's
	// tracing interceptor puts them in the call's trace (package tracing).
	Tracing bool
	// Without are guard rules the worker does not apply: a rule's removal
	// as the benchmarks measure it (activities.Options.Without).
	Without []guard.RuleName
	// Deployment, when its Name is set, makes this a versioned worker of
	// that Worker Deployment at BuildID (docs/deploying.md "Deploying a new build"):
	// each call runs to its end on the build that started it (pinned),
	// the fleet's guard moves to new builds (auto-upgrade), and the worker
	// gets work only once its version is current (MakeCurrent).
	Deployment Deployment
	// Guards shares the retry budgets, breakers and rate-limit holds with
	// the other workers of the task queue (docs/how-it-works.md "Shared guards").
	Guards GuardOptions
	// Live is where the worker serves its streamed attempts' text, so
	// that it need not go through the calls' histories.
	Live LiveOptions
	// Endpoints is what the ladder's endpoints said of their models
	// (AskModels), when the caller asked them already (the worker's
	// model check); nil: Start asks them. With no faq.file in the policy,
	// the embedded example FAQ (a made-up shop) answers only when every
	// endpoint is the simulator; otherwise the FAQ is off and a failed
	// call gets a rule's card or the placeholder.
	Endpoints []EndpointModels
}

// LiveOptions say where a worker serves its streamed attempts' text while
// they generate (package livestream, docs/how-it-works.md "Streaming").
type LiveOptions struct {
	// Off puts every streamed attempt's deltas on its call's workflow
	// stream instead: a history write per batch of tokens.
	Off bool
	// Addr is the address to listen on; default 127.0.0.1:0 (a free port,
	// reachable from this host only).
	Addr string
	// URL is where the processes that follow calls (front doors,
	// llmclient) reach it; default http://<the address listened on>, with
	// this host's name when Addr is every interface (":9466").
	URL string
}

// Deployment names a worker's Worker Deployment version.
type Deployment struct {
	Name    string
	BuildID string
}

// GuardOptions tune the guards shared by a task queue's workers.
type GuardOptions struct {
	// Local keeps this worker's guards to itself.
	Local bool
	// Interval between two syncs with the fleet's guard workflow (a
	// report when one is due, then a read of the guard's view); default
	// 500 ms.
	Interval time.Duration
	// Stale is the age past which the fleet's view is not used (the
	// guard unreachable: each worker decides alone); default 2 s.
	Stale time.Duration
	// ReportsPerRun is how many reports a guard run takes before it
	// continues as new, when this worker starts it; default 200.
	ReportsPerRun int
	// DataConverter of the client, to read the guard's memo (encrypted
	// when the client encrypts payloads); default the SDK's.
	DataConverter converter.DataConverter
}

// Worker is a registered, not yet started, durable-llm worker.
type Worker struct {
	worker.Worker
	// Activities are the per-process activities (budget, breakers).
	Activities *activities.Activities
	// Sync is the worker's link to the fleet's guard; nil with
	// GuardOptions.Local.
	Sync *guard.Sync
	// Reviews is the worker of the risk reviews' own task queue
	// (workflows.ReviewTaskQueue), started and stopped with this one.
	Reviews worker.Worker
	// Rules are the learners' rule states admission reads (RuleStates).
	Rules *RuleStates

	client    client.Client
	namespace string
	link      *GuardLink
	stop      context.CancelFunc
	done      chan struct{}
	// stopTimeout is the SDK workers' WorkerStopTimeout.
	stopTimeout time.Duration
	// live and liveSrv serve the live attempts (nil when off).
	live    *activities.Live
	liveSrv *http.Server
	log     *slog.Logger // the worker's own messages
	// example is set while Start has to decide about the example FAQ.
	example *exampleFAQ
}

// New builds the activities and a Temporal worker with LLMCall and every
// activity registered.
func New(c client.Client, o Options) (*Worker, error) {
	if o.Config == nil {
		o.Config = config.DefaultConfig()
	}
	if o.Guards.Interval <= 0 {
		o.Guards.Interval = 500 * time.Millisecond
	}
	if o.Guards.Stale <= 0 {
		o.Guards.Stale = 2 * time.Second
	}
	var sync *guard.Sync
	if !o.Guards.Local {
		name := o.Worker.Identity
		if name == "" {
			host, _ := os.Hostname()
			name = fmt.Sprintf("%d@%s", os.Getpid(), host)
		}
		sync = guard.NewSync(name+"/"+uuid.NewString()[:8], o.Guards.Stale)
	}
	ruleStates := NewRuleStates(c, o.Config, cmp.Or(o.Logger, slog.Default()).With("component", "rule-states"))
	live, liveSrv, err := serveLive(o.Live)
	if err != nil {
		return nil, err
	}
	acts, err := activities.New(activities.Options{
		Config: o.Config, Metrics: o.Metrics, Getenv: o.Getenv, Transport: o.Transport, Sync: sync, Shared: o.SharedCache,
		Tracing: o.Tracing, Spend: o.Spend, RuleGate: ruleStates.Gate, Live: live,
		Without: o.Without,
	})
	if err != nil {
		if liveSrv != nil {
			_ = liveSrv.Close()
		}
		return nil, err
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// The example FAQ's shop is made up: off until Start has heard every
	// endpoint say it is the simulator.
	example := holdExampleFAQ(acts, o.Config, getenv, o.Endpoints)
	tq := o.TaskQueue
	if tq == "" {
		tq = workflows.TaskQueue
	}
	if o.Worker.WorkerStopTimeout == 0 {
		// On SIGTERM, let in-flight attempts finish rather than turning
		// them into failures: as long as the slowest model may take.
		for _, m := range o.Config.Models {
			o.Worker.WorkerStopTimeout = max(o.Worker.WorkerStopTimeout, m.Timeout.D()+5*time.Second)
		}
	}
	if o.Worker.MaxHeartbeatThrottleInterval == 0 {
		// The SDK holds an activity's heartbeats back for 80 % of its
		// heartbeat timeout, which leaves 2 s of a 10 s timeout for the
		// send: with 1,000 streamed attempts started together and a
		// busy CPU, 19 % of them were lost to heartbeat timeouts
		// (bench/results/memory.md). Half the timeout leaves half. (Not
		// less: the interval is also the heartbeat RPC's timeout, never
		// under 1 s, and at 1 ms 987 of 1,000 attempts were lost.)
		o.Worker.MaxHeartbeatThrottleInterval = o.Config.Call.HeartbeatTimeout.D() / 2
	}
	guardBehavior := workflow.VersioningBehaviorUnspecified
	if d := o.Deployment; d.Name != "" {
		if d.BuildID == "" {
			return nil, fmt.Errorf("llmworker: deployment %q needs a build ID", d.Name)
		}
		o.Worker.DeploymentOptions = worker.DeploymentOptions{
			UseVersioning: true,
			Version:       worker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID},
			// A call's history replays only on the code that wrote it.
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		}
		// The guard runs for ever and continues as new: it moves to the
		// current build at its next workflow task.
		guardBehavior = workflow.VersioningBehaviorAutoUpgrade
	}
	ids, err := request.IDsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	// Workflows of other namespaces call through Nexus (llmnexus).
	svc, err := llmnexus.Service(llmnexus.Options{TaskQueue: tq, IDs: ids, Client: llmclient.Client{Deadline: o.Config.Call.Deadline.D()}})
	if err != nil {
		return nil, err
	}
	// Its identity carries the settings every process must share, hashed
	// (SettingsPrint): a front door compares its own with the pollers'.
	identity := o.Worker.Identity
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%d@%s", os.Getpid(), host)
	}
	o.Worker.Identity = identity + " " + PrintSettings(o.Config, getenv).String()
	w := worker.New(c, tq, o.Worker)
	w.RegisterNexusService(svc)
	w.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
	w.RegisterActivity(acts)
	w.RegisterWorkflowWithOptions(workflows.LLMGuard, workflow.RegisterOptions{Name: workflows.GuardWorkflowName, VersioningBehavior: guardBehavior})
	w.RegisterWorkflowWithOptions(workflows.RulesLearner, workflow.RegisterOptions{Name: workflows.LearnerWorkflowName, VersioningBehavior: guardBehavior})
	// A review waits days for an operator: it moves to new builds.
	reviews := worker.New(c, workflows.ReviewTaskQueue, o.Worker)
	reviews.RegisterWorkflowWithOptions(workflows.RiskReview, workflow.RegisterOptions{Name: workflows.ReviewWorkflowName, VersioningBehavior: guardBehavior})
	var link *GuardLink
	if sync != nil {
		link = NewGuardLink(c, sync, GuardLinkOptions{
			TaskQueue: tq, Interval: o.Guards.Interval, DataConverter: o.Guards.DataConverter, Logger: o.Logger,
			Input: workflows.GuardInput{Breaker: o.Config.Breaker, ReportsPerRun: o.Guards.ReportsPerRun},
		})
	}
	return &Worker{
		Worker: w, Activities: acts, Sync: sync, Reviews: reviews, Rules: ruleStates, client: c, namespace: cmp.Or(o.Namespace, client.DefaultNamespace), link: link,
		stopTimeout: o.Worker.WorkerStopTimeout, log: cmp.Or(o.Logger, slog.Default()), live: live, liveSrv: liveSrv,
		example: example,
	}, nil
}

// serveLive starts serving live attempts per o; nil, nil when off.
func serveLive(o LiveOptions) (*activities.Live, *http.Server, error) {
	if o.Off {
		return nil, nil, nil
	}
	addr := cmp.Or(o.Addr, "127.0.0.1:0")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("live streams: listen on %s: %w (set WORKER_LIVE_ADDR, or off)", addr, err)
	}
	url := strings.TrimSuffix(o.URL, "/")
	if url == "" {
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host, _ = os.Hostname()
		}
		url = "http://" + net.JoinHostPort(host, port)
	}
	reg := livestream.NewRegistry()
	srv := &http.Server{Handler: reg.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &activities.Live{Registry: reg, URL: url}, srv, nil
}

// LiveURL is where the worker serves its attempts' live text; "" when off.
func (w *Worker) LiveURL() string {
	if w.live == nil {
		return ""
	}
	return w.live.URL
}

// Start starts the worker and, unless its guards are local, its sync with
// the fleet's guard. With no faq.file in the policy, it first decides
// whether the example FAQ may answer (Options.Endpoints).
func (w *Worker) Start() error {
	if w.example != nil {
		w.example.decide(w.Activities, w.log)
		w.example = nil
	}
	// The calls upsert the LLM search attributes from their first
	// workflow task: a namespace without them would fail every call.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := EnsureSearchAttributes(ctx, w.client, w.namespace)
	cancel()
	if err != nil {
		return err
	}
	if err := w.Worker.Start(); err != nil {
		return err
	}
	if err := w.Reviews.Start(); err != nil {
		w.Worker.Stop()
		return err
	}
	w.Rules.Start()
	if w.link != nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.stop, w.done = cancel, make(chan struct{})
		go func() {
			defer close(w.done)
			w.link.Run(ctx)
		}()
	}
	return nil
}

// Run starts the worker and blocks until interruptCh delivers, then stops
// it (as worker.Worker.Run).
func (w *Worker) Run(interruptCh <-chan interface{}) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-interruptCh
	w.Stop()
	return nil
}

// StopSlack is how long Stop may take beyond the stop timeout: the SDK's
// own shutdown (its ShutdownWorker call, its pollers) and the last report
// to the fleet's guard (at most 2 s).
const StopSlack = 5 * time.Second

// StopTimeout is the drain timeout: how long Stop lets the attempts in
// flight finish (Options.Worker.WorkerStopTimeout, by default the slowest
// model's timeout + 5 s).
func (w *Worker) StopTimeout() time.Duration { return w.stopTimeout }

// Stop stops the worker, then its sync after one last report of what the
// worker's guards saw. It returns within StopTimeout + StopSlack whatever
// the attempts in flight are doing: the SDK waits up to the stop timeout
// for each of its task workers in turn (workflow tasks, local
// activities, activities, and again for the reviews' worker), so an
// attempt that ignores its cancelled context could hold it several times
// that; Stop stops both workers at once and leaves such an attempt behind
// (the process may exit; the call resends the attempt on another worker).
func (w *Worker) Stop() {
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, sdk := range []worker.Worker{w.Worker, w.Reviews} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sdk.Stop()
			}()
		}
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(w.stopTimeout + StopSlack - 2*time.Second)
	select {
	case <-done:
	case <-t.C:
		w.log.Warn("attempts still run after the drain timeout: left behind", "drain_timeout", w.stopTimeout)
	}
	t.Stop()
	if w.liveSrv != nil {
		// The attempts have ended: their followers have the end line.
		_ = w.liveSrv.Close()
	}
	w.Rules.Stop()
	if w.stop != nil {
		w.stop()
		<-w.done
		w.stop = nil
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = w.link.Leave(ctx)
		cancel()
	}
}

// EnsureSearchAttributes registers the LLM search attributes that the
// namespace lacks. It is idempotent.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %q: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[name]; ok {
			continue
		}
		v, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return fmt.Errorf("search attribute %s: %w", name, err)
		}
		missing[name] = v
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	if err != nil {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("register search attributes %v in namespace %q: %w", names, namespace, err)
	}
	return nil
}

// MakeCurrent makes build the current version of the Worker Deployment
// name in namespace, so that new calls go to its workers; calls pinned to
// another build finish there. The version must have polled first: it
// retries until the server knows it, then waits until the server has
// propagated the new routing to the task queues (a call started before
// that could still go to the old build), up to ctx's deadline.
func MakeCurrent(ctx context.Context, c client.Client, namespace, name, build string) error {
	h := c.WorkerDeploymentClient().GetHandle(name)
	wait := func(err error) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("make build %s current in deployment %s: %w", build, name, errors.Join(ctx.Err(), err))
		case <-time.After(250 * time.Millisecond):
			return nil
		}
	}
	for {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
		if err == nil {
			break
		}
		if err := wait(err); err != nil {
			return err
		}
	}
	for {
		d, err := c.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
			Namespace: namespace, DeploymentName: name,
		})
		if err == nil {
			// UNSPECIFIED: a server that does not report propagation.
			if st := d.GetWorkerDeploymentInfo().GetRoutingConfigUpdateState(); st != enumspb.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS {
				return nil
			}
			err = errors.New("the new routing is still being propagated")
		}
		if err := wait(err); err != nil {
			return err
		}
	}
}
