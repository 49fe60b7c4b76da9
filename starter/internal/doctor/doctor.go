// Package doctor checks what a first user gets wrong before the first
// call (`starter doctor`): Temporal reachable and its namespace there,
// the search attributes registered, workers polling the task queue, each
// rung's endpoint reachable and offering its model, each model's context
// window and where it comes from, the keys present in
// the environment (never shown), the shared store, and, on request, one
// 1-token request per rung.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	openai "github.com/sashabaranov/go-openai"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/store"
	"github.com/durable-llm/durable-llm/workflows"
)

// Verdicts of a Row.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "FAIL"
)

// Row is one check and its verdict.
type Row struct {
	Check   string
	Verdict string
	Detail  string
}

// Options say what to check.
type Options struct {
	Config *config.Config
	Getenv func(string) string
	// Dial connects to Temporal (the address and namespace from the
	// environment); HostPort and Namespace name them in the report.
	Dial      func() (client.Client, error)
	HostPort  string
	Namespace string
	TaskQueue string
	// Probe sends one 1-token request per rung (it costs money).
	Probe bool
	// Timeout bounds each network check.
	Timeout time.Duration
}

// Run runs every check, in order; later checks that need Temporal are
// skipped when it cannot be reached.
func Run(ctx context.Context, o Options) []Row {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	var rows []Row
	add := func(check, verdict, format string, args ...any) {
		rows = append(rows, Row{Check: check, Verdict: verdict, Detail: fmt.Sprintf(format, args...)})
	}
	rows = append(rows, temporalRows(ctx, o)...)
	ends := llmworker.AskModels(ctx, o.Config, o.Getenv, o.Timeout)
	for _, e := range ends {
		check := "endpoint " + e.BaseURL
		switch {
		case len(e.Missing) > 0:
			add(check, Fail, "does not offer %s (it offers: %s); set LLM_MODELS to models it offers", strings.Join(e.Missing, ", "), strings.Join(e.Offered, ", "))
		case e.Listed():
			add(check, OK, "offers %s", strings.Join(e.Want, ", "))
		case e.Err != nil:
			add(check, Fail, "cannot list its models (%v); %s", e.Err, unreachableHint(e))
		default:
			add(check, Warn, "lists no models: %s not checked", strings.Join(e.Want, ", "))
		}
	}
	for _, w := range llmworker.LearnWindows(ctx, o.Config, o.Getenv, min(o.Timeout, llmworker.WindowProbeTimeout)) {
		// As the worker learns them at its start: what prompts are pruned to.
		verdict := OK
		if w.Source == llmworker.WindowAssumed || w.Source == llmworker.WindowBound {
			verdict = Warn
		}
		add("window "+w.Model, verdict, "%d tokens, %s", w.Tokens, w.From)
	}
	rows = append(rows, keyRows(o)...)
	rows = append(rows, storeRows(ctx, o)...)
	if o.Probe {
		rows = append(rows, probeRows(ctx, o)...)
	}
	return rows
}

func unreachableHint(e llmworker.EndpointModels) string {
	if strings.Contains(e.Err.Error(), "HTTP 401") || strings.Contains(e.Err.Error(), "HTTP 403") {
		return "check the key in " + orNone(e.KeyEnv)
	}
	return "check LLM_BASE_URL (or the policy's base_url) and that the server runs"
}

func orNone(s string) string {
	if s == "" {
		return "(no key variable)"
	}
	return s
}

// temporalRows: the server, the namespace, the search attributes, the
// workers.
func temporalRows(ctx context.Context, o Options) []Row {
	c, err := o.Dial()
	if err != nil {
		return []Row{{"temporal " + o.HostPort, Fail, fmt.Sprintf("cannot connect (%v); start it (make run) or set TEMPORAL_ADDRESS", err)}}
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if _, err := c.CheckHealth(cctx, &client.CheckHealthRequest{}); err != nil {
		return []Row{{"temporal " + o.HostPort, Fail, fmt.Sprintf("not healthy (%v); start it (make run) or set TEMPORAL_ADDRESS", err)}}
	}
	rows := []Row{{"temporal " + o.HostPort, OK, "reachable"}}
	if _, err := c.WorkflowService().DescribeNamespace(cctx, &workflowservice.DescribeNamespaceRequest{Namespace: o.Namespace}); err != nil {
		return append(rows, Row{"namespace " + o.Namespace, Fail, fmt.Sprintf("%v; create it (temporal operator namespace create -n %s) or set TEMPORAL_NAMESPACE", err, o.Namespace)})
	}
	rows = append(rows, Row{"namespace " + o.Namespace, OK, "exists"})

	sa, err := c.OperatorService().ListSearchAttributes(cctx, &operatorservice.ListSearchAttributesRequest{Namespace: o.Namespace})
	if err != nil {
		rows = append(rows, Row{"search attributes", Fail, err.Error()})
	} else {
		var missing []string
		for name, typ := range workflows.SearchAttributes {
			want, _ := enumspb.IndexedValueTypeFromString(typ)
			if got, ok := sa.GetCustomAttributes()[name]; !ok || got != want {
				missing = append(missing, name+" ("+typ+")")
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			rows = append(rows, Row{"search attributes", Fail, "missing " + strings.Join(missing, ", ") + "; a worker registers them at start"})
		} else {
			rows = append(rows, Row{"search attributes", OK, fmt.Sprintf("all %d registered", len(workflows.SearchAttributes))})
		}
	}

	for _, kind := range []struct {
		queue, name string
		typ         enumspb.TaskQueueType
	}{
		{o.TaskQueue, "workflow", enumspb.TASK_QUEUE_TYPE_WORKFLOW},
		{o.TaskQueue, "activity", enumspb.TASK_QUEUE_TYPE_ACTIVITY},
		// The risk reviews' own queue (docs/rules.md).
		{workflows.ReviewTaskQueue, "workflow", enumspb.TASK_QUEUE_TYPE_WORKFLOW},
	} {
		check := fmt.Sprintf("workers on %s (%s)", kind.queue, kind.name)
		d, err := describePolled(cctx, c, kind.queue, kind.typ)
		switch {
		case err != nil:
			rows = append(rows, Row{check, Fail, err.Error()})
		case len(d.GetPollers()) == 0:
			fix := "no worker polls it; start one (make run, or ./worker with WORKER_TASK_QUEUE=" + o.TaskQueue + ")"
			if kind.queue == workflows.ReviewTaskQueue {
				fix = "no worker polls it, so no risk review starts; every worker of this build polls it: start one (make run, or ./worker)"
			}
			rows = append(rows, Row{check, Fail, fix})
		default:
			rows = append(rows, Row{check, OK, pollers(d.GetPollers())})
		}
	}
	check := "settings shared with the workers"
	switch diffs, err := llmworker.CompareFleetSettings(cctx, c, o.TaskQueue, llmworker.PrintSettings(o.Config, o.Getenv)); {
	case err != nil:
		rows = append(rows, Row{check, Warn, "not compared: " + err.Error()})
	case len(diffs) > 0:
		// A warning: during a rotation (a new ladder or key set rolling
		// out) old workers still poll, and the server lists a stopped
		// worker's polls for a few minutes.
		rows = append(rows, Row{check, Warn, strings.Join(diffs, "; ") + ": give every process the same (docs/calling.md, settings every process shares)"})
	default:
		rows = append(rows, Row{check, OK, "the ladder, " + request.EnvIDSecret + " and " + codec.EnvKeys + " as every worker that says has them"})
	}
	return rows
}

// describePolled describes a task queue; while no poller is listed it asks
// again for up to pollerGrace, because a worker that has just started shows
// up only once its first poll reaches the server.
func describePolled(ctx context.Context, c client.Client, queue string, typ enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	until := time.Now().Add(pollerGrace)
	for {
		d, err := c.DescribeTaskQueue(ctx, queue, typ)
		if err != nil || len(d.GetPollers()) > 0 || time.Now().After(until) {
			return d, err
		}
		select {
		case <-ctx.Done():
			return d, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// pollerGrace: how long the doctor waits for a worker's first poll.
const pollerGrace = 3 * time.Second

func pollers(ps []*taskqueuepb.PollerInfo) string {
	var ids []string
	for _, p := range ps {
		id := p.GetIdentity()
		if b := p.GetWorkerVersionCapabilities().GetBuildId(); b != "" {
			id += " (build " + b + ")"
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return fmt.Sprintf("%d polling: %s", len(ps), strings.Join(ids, ", "))
}

// keyRows: every key variable the ladder names, set or not (never its value).
func keyRows(o Options) []Row {
	var rows []Row
	seen := map[string]bool{}
	for _, m := range o.Config.Models {
		for _, k := range m.Keys() {
			env := m.WithKey(k).APIKeyEnv
			if env == "" || seen[env] {
				continue
			}
			seen[env] = true
			users := modelsUsing(o.Config, env)
			if v := o.Getenv(env); v != "" {
				rows = append(rows, Row{"key " + env, OK, fmt.Sprintf("set (%d characters; not shown) for %s", len(v), users)})
			} else {
				rows = append(rows, Row{"key " + env, Warn, "not set: requests to " + users + " go without a key (fine for llmsim, refused by a provider)"})
			}
		}
	}
	return rows
}

func modelsUsing(cfg *config.Config, env string) string {
	var names []string
	for _, m := range cfg.Models {
		for _, k := range m.Keys() {
			if m.WithKey(k).APIKeyEnv == env && !slices.Contains(names, m.Name) {
				names = append(names, m.Name)
			}
		}
	}
	return strings.Join(names, ", ")
}

// storeRows: the shared store, when the policy has one.
func storeRows(ctx context.Context, o Options) []Row {
	s := o.Config.Store
	if !s.Shared() {
		return nil
	}
	dsn := o.Getenv(s.DSNEnv)
	if dsn == "" {
		return []Row{{"store (postgres)", Fail, s.DSNEnv + " is not set (the PostgreSQL URL)"}}
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	st, err := store.Open(cctx, dsn)
	if err != nil {
		return []Row{{"store (postgres)", Fail, err.Error()}}
	}
	st.Close()
	return []Row{{"store (postgres)", OK, "reachable, tables ready (" + s.DSNEnv + ")"}}
}

// probeRows sends each rung one request for one token.
func probeRows(ctx context.Context, o Options) []Row {
	var rows []Row
	for _, m := range o.Config.Models {
		mk := m.WithKey(m.Keys()[0])
		key := ""
		if mk.APIKeyEnv != "" {
			key = o.Getenv(mk.APIKeyEnv)
		}
		cctx, cancel := context.WithTimeout(ctx, max(o.Timeout, 30*time.Second))
		start := time.Now()
		resp, err := activities.Ping(cctx, mk, key)
		cancel()
		took := time.Since(start).Round(time.Millisecond)
		var api *openai.APIError
		switch {
		case errors.As(err, &api):
			rows = append(rows, Row{"probe " + m.Name, Fail, fmt.Sprintf("HTTP %d after %s: %s", api.HTTPStatusCode, took, api.Message)})
		case err != nil:
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // without the URL, which may hold a key
			}
			rows = append(rows, Row{"probe " + m.Name, Fail, fmt.Sprintf("%v (after %s)", err, took)})
		default:
			rows = append(rows, Row{"probe " + m.Name, OK, fmt.Sprintf("answered in %s (%d prompt + %d completion tokens)", took, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)})
		}
	}
	return rows
}

// Print writes rows as a table and a verdict line; it reports whether
// every check passed (warnings pass).
func Print(w io.Writer, rows []Row) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tVERDICT\tDETAIL")
	fails, warns := 0, 0
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Check, r.Verdict, r.Detail)
		switch r.Verdict {
		case Fail:
			fails++
		case Warn:
			warns++
		}
	}
	_ = tw.Flush()
	switch {
	case fails > 0:
		fmt.Fprintf(w, "\n%d check(s) failed, %d warning(s): fix the FAIL rows first.\n", fails, warns)
	case warns > 0:
		fmt.Fprintf(w, "\nready, with %d warning(s).\n", warns)
	default:
		fmt.Fprintln(w, "\nready: every check passed.")
	}
	return fails == 0
}
