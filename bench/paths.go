package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmnexus"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/workflows"
)

// PathsNamespace is the second namespace the paths benchmark's Nexus
// caller runs in; the dev server must create it (--namespace).
const PathsNamespace = "bench-agents"

// PathsOptions configure RunPaths.
type PathsOptions struct {
	// Temporal is a client of the dev server's default namespace; required.
	Temporal client.Client
	// HostPort of the dev server, for the client of PathsNamespace.
	HostPort string
	// Calls is the number of sequential calls per path; default 100.
	Calls int
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
}

// PathRow is one path's numbers.
type PathRow struct {
	Name, About string
	P50, P99    time.Duration
	// CallerEvents and CallEvents are the history events of one call's
	// caller workflow (none for the front door) and of its LLMCall.
	CallerEvents, CallEvents int
	Failed                   int
	Errors                   []string
}

// PathsReport is the paths benchmark's result.
type PathsReport struct {
	Options PathsOptions
	Rows    []PathRow
}

// pathInput is the input of the paths' caller workflows.
type pathInput struct {
	Queue    string                `json:"queue"`
	Endpoint string                `json:"endpoint"`
	Request  workflows.CallRequest `json:"request"`
}

// pathChild starts LLMCall as a bare child workflow.
func pathChild(ctx workflow.Context, in pathInput) (workflows.CallResult, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "/call", TaskQueue: in.Queue,
	})
	var res workflows.CallResult
	err := workflow.ExecuteChildWorkflow(cctx, workflows.WorkflowName, in.Request).Get(ctx, &res)
	return res, err
}

// pathCall calls through llmworkflow.Call.
func pathCall(ctx workflow.Context, in pathInput) (workflows.CallResult, error) {
	return llmworkflow.Call(ctx, in.Request, llmworkflow.WithTaskQueue(in.Queue))
}

// pathNexus calls through the Nexus service.
func pathNexus(ctx workflow.Context, in pathInput) (workflows.CallResult, error) {
	return llmworkflow.CallNexus(ctx, in.Endpoint, in.Request)
}

// pathNexusQuick calls through the Nexus service's call_quick operation.
func pathNexusQuick(ctx workflow.Context, in pathInput) (workflows.CallResult, error) {
	return llmworkflow.CallNexus(ctx, in.Endpoint, in.Request, llmworkflow.WithQuickAnswer())
}

// pathCall is one path: it makes call i and returns the caller's and the
// call's workflows (namespace client, ID).
type pathFunc func(ctx context.Context, i int) (caller, call string, err error)

// RunPaths measures one model call's happy path from an agent: a bare
// child LLMCall, llmworkflow.Call, the Nexus operations (call, call_quick)
// from a second namespace, and the HTTP front door, against a zero-latency llmsim on one
// dev server and one in-process durable-llm worker; the paths' calls are
// interleaved at concurrency 1.
func RunPaths(ctx context.Context, o PathsOptions) (*PathsReport, error) {
	if o.Calls <= 0 {
		o.Calls = 100
	}
	progress := progressTo(o.Progress)
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{Name: "instant", Models: llmsim.InstantModels()}})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	lc, cfg, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{})
	if err != nil {
		return nil, err
	}
	defer stop()
	tq := lc.TaskQueue
	endpoint := "bench-durable-llm-" + randomID()
	if err := llmnexus.EnsureEndpoint(ctx, o.Temporal, endpoint, client.DefaultNamespace, tq); err != nil {
		return nil, err
	}
	agents, err := client.Dial(client.Options{HostPort: o.HostPort, Namespace: PathsNamespace, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return nil, err
	}
	defer agents.Close()
	callers := "bench-callers-" + randomID()
	for _, c := range []client.Client{o.Temporal, agents} {
		w := worker.New(c, callers, worker.Options{})
		w.RegisterWorkflow(pathChild)
		w.RegisterWorkflow(pathCall)
		w.RegisterWorkflow(pathNexus)
		w.RegisterWorkflow(pathNexusQuick)
		llmworkflow.Register(w, c)
		if err := w.Start(); err != nil {
			return nil, err
		}
		defer w.Stop()
	}
	tenants, err := frontdoor.ParseTokens(frontDoorToken + "=bench")
	if err != nil {
		return nil, err
	}
	srv, err := serveFrontDoor(lc, cfg, tenants)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	oc := goOpenAIClient(srv.URL+"/v1", &http.Client{Transport: tr})

	run := randomID()
	viaWorkflow := func(c client.Client, wf any) pathFunc {
		return func(ctx context.Context, i int) (string, string, error) {
			id := fmt.Sprintf("bench-path-%s-%d-%s", run, i, randomID())
			in := pathInput{Queue: tq, Endpoint: endpoint, Request: DurableRequest(run, i, 0)}
			r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: callers}, wf, in)
			if err != nil {
				return "", "", err
			}
			var res workflows.CallResult
			if err := r.Get(ctx, &res); err != nil {
				return id, "", err
			}
			return id, res.RequestID, nil
		}
	}
	paths := []struct {
		name, about string
		ns          client.Client
		call        pathFunc
	}{
		{"bare child workflow", "a workflow that starts LLMCall with ExecuteChildWorkflow", o.Temporal, viaWorkflow(o.Temporal, pathChild)},
		{"llmworkflow.Call", "the same through llmworkflow.Call (ID from the request, REQUEST_CANCEL, memo)", o.Temporal, viaWorkflow(o.Temporal, pathCall)},
		{"Nexus", "a workflow in namespace " + PathsNamespace + " through llmworkflow.CallNexus and the endpoint", agents, viaWorkflow(agents, pathNexus)},
		{"Nexus, call_quick", "the same with llmworkflow.WithQuickAnswer (the answer in the start response)", agents, viaWorkflow(agents, pathNexusQuick)},
		{"HTTP front door", "POST /v1/chat/completions with go-openai, no caller workflow", nil, func(ctx context.Context, i int) (string, string, error) {
			req := chatRequest(i)
			req.User = fmt.Sprintf("%s-fd-u%d", run, i)
			var hdr http.Header
			resp, err := oc.CreateChatCompletion(ctx, req)
			if err != nil {
				return "", "", err
			}
			hdr = resp.Header()
			return "", hdr.Get(frontdoor.HeaderWorkflowID), nil
		}},
	}
	rep := &PathsReport{Options: o, Rows: make([]PathRow, len(paths))}
	lat := make([][]time.Duration, len(paths))
	last := make([][2]string, len(paths))
	progress("paths: warm-up")
	for i := 0; i < 10; i++ {
		for _, p := range paths {
			_, _, _ = p.call(ctx, 1_000_000+i)
		}
	}
	progress("paths: %d sequential calls per path, interleaved", o.Calls)
	for i := 0; i < o.Calls; i++ {
		for k, p := range paths {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			t := time.Now()
			caller, call, err := p.call(cctx, i)
			d := time.Since(t)
			cancel()
			if err != nil || call == "" {
				rep.Rows[k].Failed++
				if len(rep.Rows[k].Errors) < 3 && err != nil {
					rep.Rows[k].Errors = append(rep.Rows[k].Errors, err.Error())
				}
				continue
			}
			lat[k] = append(lat[k], d)
			last[k] = [2]string{caller, call}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	for k, p := range paths {
		row := &rep.Rows[k]
		row.Name, row.About = p.name, p.about
		row.P50, row.P99 = Percentile(lat[k], 0.5), Percentile(lat[k], 0.99)
		if last[k][0] != "" {
			row.CallerEvents = countEvents(ctx, p.ns, last[k][0])
		}
		if last[k][1] != "" {
			row.CallEvents = countEvents(ctx, o.Temporal, last[k][1])
		}
	}
	return rep, nil
}

// countEvents counts the history events of workflow id; -1 when it cannot
// be read.
func countEvents(ctx context.Context, c client.Client, id string) int {
	n := 0
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			return -1
		}
		n++
	}
	return n
}

// Header returns the report's header.
func (r *PathsReport) Header(command string, m Machine, date time.Time) Header {
	h := Header{Title: "Paths — one model call from an agent: child workflow, llmworkflow.Call, Nexus, front door", Command: command, Machine: m, Date: date, Params: []string{
		"upstream: llmsim with zero latency and unlimited capacity",
		fmt.Sprintf("latency: %d sequential calls per path at concurrency 1, the paths' calls interleaved, measured by the agent's starter (start to result)", r.Options.Calls),
		"one dev server, one in-process durable-llm worker (default policy), one caller worker per namespace (SDK defaults)",
		"history events: the last call's caller workflow and its LLMCall",
	}}
	for _, row := range r.Rows {
		h.Params = append(h.Params, "  - "+row.Name+": "+row.About)
	}
	return h
}

// Table returns the paths table, ratios against the bare child workflow.
func (r *PathsReport) Table() Table {
	t := Table{Columns: []string{"path", "p50", "p99", "p50 ÷ child", "p99 ÷ child", "caller events", "LLMCall events", "events per model call", "failed"}}
	base := r.Rows[0]
	for _, row := range r.Rows {
		rp50, rp99 := "", ""
		if base.P50 > 0 && base.P99 > 0 {
			rp50 = fmt.Sprintf("%.2f×", float64(row.P50)/float64(base.P50))
			rp99 = fmt.Sprintf("%.2f×", float64(row.P99)/float64(base.P99))
		}
		t.Rows = append(t.Rows, []string{row.Name, fmtDur(row.P50), fmtDur(row.P99), rp50, rp99,
			fmt.Sprint(row.CallerEvents), fmt.Sprint(row.CallEvents), fmt.Sprint(row.CallerEvents + row.CallEvents), fmt.Sprint(row.Failed)})
	}
	return t
}

// Markdown renders the report.
func (r *PathsReport) Markdown(h Header) string {
	var b strings.Builder
	b.WriteString(h.Markdown())
	b.WriteString("\n" + r.Table().Markdown())
	for _, row := range r.Rows {
		if row.Failed > 0 {
			fmt.Fprintf(&b, "\n%s: %d calls failed, e.g. %s\n", row.Name, row.Failed, strings.Join(row.Errors, "; "))
		}
	}
	return b.String()
}
