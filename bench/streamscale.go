package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
)

// The contenders of the streaming-at-scale benchmark, in table order.
const (
	NameScaleDirect   = "direct go-openai stream"
	NameScalePlain    = "durable-llm plain"
	NameScaleLive     = "durable-llm streamed"
	NameScaleHistory  = "durable-llm streamed, deltas through the history"
	scaleSampledCalls = 20 // calls whose histories are counted
)

// StreamScaleOptions configure RunStreamScale.
type StreamScaleOptions struct {
	// Temporal is a client of the dev server; required.
	Temporal client.Client
	// ServerPID is the dev server's process, whose CPU time each
	// contender's run is charged (DevServerPID finds it); 0: not measured.
	ServerPID int
	// Concurrency are the numbers of calls in flight to measure; default
	// 100 and 300.
	Concurrency []int
	// Tokens of every answer; default 400 (10 s at llmsim's 40 tokens/s).
	Tokens int
	// Ramp is the time over which a run's calls start, evenly; default 2 s.
	Ramp time.Duration
	// Progress receives a line per step; nil: silent.
	Progress io.Writer
}

// StreamScaleRow is one contender at one concurrency.
type StreamScaleRow struct {
	Name        string
	Concurrency int
	Calls       []StreamCall
	// ServerCPU is the dev server's CPU time from the first call's start
	// to the last call's end.
	ServerCPU time.Duration
	// EventsPerCall is the mean history length of up to 20 of its calls
	// (0 for the direct call).
	EventsPerCall float64
	Sampled       int
}

// StreamScaleReport is RunStreamScale's result.
type StreamScaleReport struct {
	Options StreamScaleOptions
	Rows    []StreamScaleRow
}

// DevServerPID finds the process of the dev server whose frontend listens
// at hostPort (the temporal CLI's start-dev, by its --port).
func DevServerPID(hostPort string) (int, error) {
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return 0, err
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		dev, at := false, false
		for i, a := range args {
			dev = dev || a == "start-dev"
			at = at || (a == "--port" && i+1 < len(args) && args[i+1] == port) || a == "--port="+port
		}
		if dev && at {
			return strconv.Atoi(filepath.Base(filepath.Dir(d)))
		}
	}
	return 0, fmt.Errorf("no dev server process listening at %s", hostPort)
}

func splitPort(hostPort string) (string, string, error) {
	i := strings.LastIndexByte(hostPort, ':')
	if i < 0 {
		return "", "", fmt.Errorf("%q has no port", hostPort)
	}
	return hostPort[:i], hostPort[i+1:], nil
}

// RunStreamScale starts Concurrency calls of Tokens-token answers over Ramp
// for each contender in turn: go-openai streaming straight from llmsim,
// and through the front door (go-openai, chat completions) in front of an
// in-process worker: plain, streamed (live text from the worker), and
// streamed with the deltas through the call's history (the worker's live
// text off). It measures what the callers saw and what the dev server
// spent.
func RunStreamScale(ctx context.Context, o StreamScaleOptions) (*StreamScaleReport, error) {
	if o.Temporal == nil {
		return nil, errors.New("bench: StreamScaleOptions.Temporal is required")
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{100, 300}
	}
	if o.Tokens <= 0 {
		o.Tokens = 400
	}
	if o.Ramp <= 0 {
		o.Ramp = 2 * time.Second
	}
	say := func(f string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "bench: stream scale: "+f+"\n", a...)
		}
	}
	rep := &StreamScaleReport{Options: o}
	for _, n := range o.Concurrency {
		for _, name := range []string{NameScaleDirect, NameScalePlain, NameScaleLive, NameScaleHistory} {
			say("%s, %d calls", name, n)
			row, err := runScaleRow(ctx, o, name, n)
			if err != nil {
				return nil, fmt.Errorf("%s, %d calls: %w", name, n, err)
			}
			say("%s, %d calls: %s", name, n, row.line())
			rep.Rows = append(rep.Rows, *row)
		}
	}
	return rep, nil
}

// scaleCall makes call i and reports what its caller saw, and its
// workflow ID ("" for the direct call).
type scaleCall func(ctx context.Context, i int) (StreamCall, string)

func runScaleRow(ctx context.Context, o StreamScaleOptions, name string, n int) (*StreamScaleRow, error) {
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: StreamScenario()})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n + 16, MaxIdleConns: n + 16}}
	defer hc.CloseIdleConnections()
	run := randomID()
	var call scaleCall
	if name == NameScaleDirect {
		c := goOpenAIClient(sim.BaseURL, hc)
		call = func(ctx context.Context, i int) (StreamCall, string) {
			began := time.Now()
			s, err := c.CreateChatCompletionStream(ctx, streamChatRequest(i, o.Tokens))
			if err != nil {
				return StreamCall{Err: err, Total: time.Since(began)}, ""
			}
			defer s.Close()
			return readStream(s, began), ""
		}
	} else {
		wo := llmworker.Options{Worker: worker.Options{MaxConcurrentActivityExecutionSize: n + 50}}
		wo.Live.Off = name == NameScaleHistory
		lc, cfg, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{Worker: wo})
		if err != nil {
			return nil, err
		}
		defer stop()
		tenants, err := frontdoor.ParseTenantsFile([]byte(
			"defaults: {requests_per_minute: 0, tokens_per_minute: 0, max_in_flight: 0, validation_ms_per_minute: 0}\n"+
				"tenants: [{name: bench, tokens: ["+frontDoorToken+"]}]\n"), "bench tenants")
		if err != nil {
			return nil, err
		}
		srv, err := serveFrontDoor(lc, cfg, tenants)
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		c := goOpenAIClient(srv.URL+"/v1", hc)
		stream := name != NameScalePlain
		call = func(ctx context.Context, i int) (StreamCall, string) {
			req := streamChatRequest(i, o.Tokens)
			req.User = fmt.Sprintf("%s-u%d", run, i) // a call of its own
			began := time.Now()
			if !stream {
				req.Stream = false
				resp, err := c.CreateChatCompletion(ctx, req)
				sc := StreamCall{Total: time.Since(began), Err: err}
				if err == nil {
					sc.TTFT, sc.Last, sc.Pieces, sc.Arrivals = sc.Total, sc.Total, 1, 1
					if len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" {
						sc.Err = errNoAnswer
					}
				}
				return sc, resp.Header().Get(frontdoor.HeaderWorkflowID)
			}
			s, err := c.CreateChatCompletionStream(ctx, req)
			if err != nil {
				return StreamCall{Err: err, Total: time.Since(began)}, ""
			}
			defer s.Close()
			return readStream(s, began), s.Header().Get(frontdoor.HeaderWorkflowID)
		}
	}
	// One warm-up call: connections, the worker's first tasks.
	if sc, _ := call(ctx, -1); sc.Err != nil {
		return nil, fmt.Errorf("warm-up call: %w", sc.Err)
	}
	pid := o.ServerPID
	cpu0, cpuErr := procCPU(pid)
	row := &StreamScaleRow{Name: name, Concurrency: n, Calls: make([]StreamCall, n)}
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := time.Until(start.Add(o.Ramp * time.Duration(i) / time.Duration(n))); d > 0 {
				time.Sleep(d)
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			row.Calls[i], ids[i] = call(cctx, i)
		}()
	}
	wg.Wait()
	if cpu1, err := procCPU(pid); err == nil && cpuErr == nil {
		row.ServerCPU = cpu1 - cpu0
	}
	if name != NameScaleDirect {
		var events int
		for _, id := range ids {
			if id == "" || row.Sampled == scaleSampledCalls {
				continue
			}
			hctx, cancel := context.WithTimeout(ctx, time.Minute)
			it := o.Temporal.GetWorkflowHistory(hctx, id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				if _, err := it.Next(); err != nil {
					break
				}
				events++
			}
			cancel()
			row.Sampled++
		}
		if row.Sampled > 0 {
			row.EventsPerCall = float64(events) / float64(row.Sampled)
		}
	}
	return row, nil
}

// scaleStats are a row's percentiles over its answered calls.
type scaleStats struct {
	n, failed              int
	ttft50, ttft95, done95 time.Duration
}

func (r StreamScaleRow) stats() scaleStats {
	var st scaleStats
	var ttft, done []time.Duration
	for _, c := range r.Calls {
		if c.Err != nil {
			st.failed++
			continue
		}
		st.n++
		ttft, done = append(ttft, c.TTFT), append(done, c.Total)
	}
	st.ttft50, st.ttft95, st.done95 = Percentile(ttft, 0.5), Percentile(ttft, 0.95), Percentile(done, 0.95)
	return st
}

func (r StreamScaleRow) line() string {
	st := r.stats()
	return fmt.Sprintf("%d answered, %d failed; first text p50 %s p95 %s; done p95 %s; server CPU %s; %.0f history events per call",
		st.n, st.failed, fmtDur(st.ttft50), fmtDur(st.ttft95), fmtDur(st.done95), fmtDur(r.ServerCPU), r.EventsPerCall)
}

// ServerCPURatio is the dev server's CPU for the named contender's run
// over the plain run's, at concurrency n.
func (r *StreamScaleReport) ServerCPURatio(name string, n int) (float64, bool) {
	var got, plain time.Duration
	for _, row := range r.Rows {
		if row.Concurrency != n {
			continue
		}
		switch row.Name {
		case name:
			got = row.ServerCPU
		case NameScalePlain:
			plain = row.ServerCPU
		}
	}
	if plain <= 0 {
		return 0, false
	}
	return float64(got) / float64(plain), true
}

// Header returns the report's header.
func (r *StreamScaleReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	gen := time.Duration(o.Tokens) * time.Second / llmsim.DefaultTokensPerSecond
	return Header{Title: fmt.Sprintf("Streamed answers at scale — %d-token answers (about %s each), calls started over %s", o.Tokens, fmtDur(gen), fmtDur(o.Ramp)), Command: command, Machine: m, Date: date, Params: []string{
		fmt.Sprintf("upstream: llmsim's default models at their default speed (time to first token lognormal, median 300 ms; %d tokens/s), capacity unlimited; one llmsim per run", llmsim.DefaultTokensPerSecond),
		"durable-llm: an in-process worker (default policy) on the bench's Temporal dev server, the front door (frontdoor.Handler) on a local HTTP server in the same process, the tenant's limits lifted; callers use go-openai's chat completions (stream: true, or plain)",
		"streamed: the worker serves each attempt's text (held by the attempt's heartbeat first) and the call's stream carries one live event per attempt; deltas through the history: the worker's live text off, so every batch of deltas is a signal to the call and a poll of the front door's subscription",
		"first text: from the request to the first piece of answer text (plain: to the whole answer); done: to the end of the answer; server CPU: the dev server process's CPU time (/proc/<pid>/stat) from the first call's start to the last call's end; history events: mean over 20 of the run's calls",
	}}
}

// Table returns the table.
func (r *StreamScaleReport) Table() string {
	var b strings.Builder
	b.WriteString("| calls at once | contender | answered | first text p50 | first text p95 | done p95 | server CPU | × plain | history events per call |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		st := row.stats()
		ratio := "—"
		if x, ok := r.ServerCPURatio(row.Name, row.Concurrency); ok && row.Name != NameScaleDirect {
			ratio = fmt.Sprintf("%.2f", x)
		}
		events := "—"
		if row.Sampled > 0 {
			events = fmt.Sprintf("%.0f", row.EventsPerCall)
		}
		fmt.Fprintf(&b, "| %d | %s | %d/%d | %s | %s | %s | %s | %s | %s |\n", row.Concurrency, row.Name, st.n, st.n+st.failed,
			fmtDur(st.ttft50), fmtDur(st.ttft95), fmtDur(st.done95), fmtDur(row.ServerCPU), ratio, events)
	}
	return b.String()
}
