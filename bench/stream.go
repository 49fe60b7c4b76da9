package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	goopenai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// Streaming contender names, in the order tables list them.
const (
	NameStreamDirect    = "direct go-openai stream"
	NameStreamClient    = "durable-llm, llmclient.Stream"
	NameStreamFrontDoor = "durable-llm, front door"
	// NameStreamFrontDoorEager is the front door with a worker on its
	// Temporal client, starting its calls eagerly (starter serve --worker).
	NameStreamFrontDoorEager = "durable-llm, front door + worker (eager start)"
)

// Keys of the streaming contenders (StreamOptions.Contenders).
const (
	KeyStreamDirect    = "direct"
	KeyStreamClient    = "llmclient"
	KeyStreamFrontDoor = "frontdoor"
	KeyStreamEager     = "frontdoor-eager"
)

// StreamContenders are the keys of every streaming contender, in order.
var StreamContenders = []string{KeyStreamDirect, KeyStreamClient, KeyStreamFrontDoor, KeyStreamEager}

// StreamOptions configure RunStream.
type StreamOptions struct {
	// Temporal is a client of the dev server; required unless Contenders
	// is only the direct call.
	Temporal client.Client
	// Contenders are the keys of the contenders to run, in the order of
	// StreamContenders whatever the order here; default all. The direct
	// call always runs: it is the reference.
	Contenders []string
	// Calls is the number of sequential calls per contender; default 30.
	Calls int
	// Tokens is the length of every answer; default 500.
	Tokens int
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per phase (cmd/bench); nil: none.
	Meter *progress.Display
}

// StreamCall is what a caller saw of one streamed call.
type StreamCall struct {
	// TTFT is the time from the request to the first piece of answer
	// text, Last to the last one, Total to the end of the stream ([DONE];
	// the call's result for llmclient).
	TTFT, Last, Total time.Duration
	// Pieces is the number of pieces of text received (SSE chunks with
	// content, or deltas); Arrivals the number of times text arrived
	// (pieces less than 10 ms after the previous one arrived with it);
	// Bytes their length.
	Pieces, Arrivals, Bytes int
	// Upstream is llmsim's own time to first token of the call's request
	// (its schedule), the part of TTFT no client can save.
	Upstream time.Duration
	Err      error
}

// StreamRow is one contender's streamed calls.
type StreamRow struct {
	Name, About string
	Calls       []StreamCall
}

// ok returns the calls that answered.
func (r StreamRow) ok() []StreamCall {
	var out []StreamCall
	for _, c := range r.Calls {
		if c.Err == nil {
			out = append(out, c)
		}
	}
	return out
}

// StreamReport is the streaming latency benchmark's result.
type StreamReport struct {
	Options StreamOptions
	// Scenario is the llmsim scenario every contender ran against.
	Scenario *llmsim.Scenario
	Rows     []StreamRow
}

// streamContender makes one streamed call i and reports what its caller
// saw; key names the call at the upstream (llmsim's conversation key).
type streamContender struct {
	name, about string
	sim         *llmsim.Server
	call        func(ctx context.Context, i int) (StreamCall, string)
	close       func()
}

// StreamScenario is the upstream of the streaming benchmarks: llmsim's
// default models at their default, realistic speed (time to first token
// lognormal with a median of 300 ms, then 40 tokens/s), seeded.
func StreamScenario() *llmsim.Scenario {
	return &llmsim.Scenario{Name: "realistic", Seed: 7, Models: llmsim.DefaultModels()}
}

// StreamQuestion is the user message of streamed call i: Question(i) with
// llmsim's directive for an answer of exactly tokens tokens.
func StreamQuestion(i, tokens int) string {
	return fmt.Sprintf("[[sim tokens=%d]] %s", tokens, Question(i))
}

// StreamRequest is DurableRequest with StreamQuestion and stream: true.
func StreamRequest(run string, i, tokens int, deadline time.Duration) workflows.CallRequest {
	req := DurableRequest(run, i, deadline)
	req.Messages[len(req.Messages)-1].Content = StreamQuestion(i, tokens)
	req.Stream = true
	return req
}

// RunStream measures the time to the first token and the total time of
// streamed answers of Tokens tokens, one call at a time with the
// contenders' calls interleaved: go-openai streaming straight from llmsim,
// an LLMCall with stream: true followed through llmclient.Stream, the
// same through the front door with go-openai (stream: true), and through a
// front door that starts its calls eagerly on a worker of its own. Each
// contender has its own llmsim with the same seeded scenario, so call i of
// every contender meets the same upstream time to first token.
func RunStream(ctx context.Context, o StreamOptions) (*StreamReport, error) {
	if o.Calls <= 0 {
		o.Calls = 30
	}
	if o.Tokens <= 0 {
		o.Tokens = 500
	}
	progress := progressTo(o.Progress)
	rep := &StreamReport{Options: o, Scenario: StreamScenario()}
	var cons []*streamContender
	defer func() {
		for _, c := range cons {
			c.close()
		}
	}()
	want := map[string]bool{KeyStreamDirect: true}
	for _, k := range o.Contenders {
		if !slices.Contains(StreamContenders, k) {
			return nil, fmt.Errorf("stream: unknown contender %q (have %s)", k, strings.Join(StreamContenders, ", "))
		}
		want[k] = true
	}
	for _, k := range StreamContenders {
		if len(o.Contenders) > 0 && !want[k] {
			continue
		}
		if k != KeyStreamDirect && o.Temporal == nil {
			return nil, fmt.Errorf("stream: contender %s needs a Temporal client", k)
		}
		sim, err := llmsim.NewServer(llmsim.Options{Scenario: StreamScenario()})
		if err != nil {
			return nil, err
		}
		var c *streamContender
		switch k {
		case KeyStreamDirect:
			c = newStreamDirect(sim, o.Tokens)
		case KeyStreamClient:
			c, err = newStreamClient(o.Temporal, sim, o.Tokens)
		case KeyStreamFrontDoor:
			c, err = newStreamFrontDoor(o.Temporal, sim, o.Tokens, false)
		case KeyStreamEager:
			c, err = newStreamFrontDoor(o.Temporal, sim, o.Tokens, true)
		}
		if err != nil {
			sim.Close()
			return nil, err
		}
		cons = append(cons, c)
	}

	const warm = 2
	progress("stream: warm-up, %d calls per contender", warm)
	for i := 0; i < warm; i++ {
		for _, c := range cons {
			if sc, _ := c.call(ctx, i); sc.Err != nil {
				return nil, fmt.Errorf("stream: %s: warm-up call: %w", c.name, sc.Err)
			}
		}
	}
	rep.Rows = make([]StreamRow, len(cons))
	for k, c := range cons {
		rep.Rows[k].Name, rep.Rows[k].About = c.name, c.about
	}
	progress("stream: %d sequential calls of %d tokens per contender, interleaved (about %s)", o.Calls, o.Tokens,
		fmtDur(time.Duration(o.Calls*len(cons))*(300*time.Millisecond+time.Duration(o.Tokens)*time.Second/llmsim.DefaultTokensPerSecond)))
	step := o.Meter.Phase("stream: sequential calls", o.Calls*len(cons))
	defer step.Done()
	for i := warm; i < warm+o.Calls; i++ {
		for k, c := range cons {
			sc, key := c.call(ctx, i)
			step.Add(1)
			// llmsim files the generation when its handler returns, which
			// can be just after the client read the end of the stream.
			for wait := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if gs := c.sim.Generations(key); len(gs) > 0 {
					sc.Upstream = gs[0].TTFT.D()
					break
				}
				if time.Now().After(wait) {
					break
				}
			}
			rep.Rows[k].Calls = append(rep.Rows[k].Calls, sc)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if o.Meter == nil && (i-warm+1)%10 == 0 {
			progress("stream: %d of %d", i-warm+1, o.Calls)
		}
	}
	return rep, nil
}

// piece counts a piece of text of n bytes that arrived at t.
func (sc *StreamCall) piece(t time.Duration, n int) {
	if sc.Pieces == 0 {
		sc.TTFT = t
	}
	if sc.Pieces == 0 || t-sc.Last >= 10*time.Millisecond {
		sc.Arrivals++
	}
	sc.Pieces++
	sc.Bytes += n
	sc.Last = t
}

// readStream reads a go-openai chat stream to its end and times it from
// began.
func readStream(s *goopenai.ChatCompletionStream, began time.Time) StreamCall {
	var sc StreamCall
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			sc.Err = err
			break
		}
		if len(resp.Choices) == 0 || resp.Choices[0].Delta.Content == "" {
			continue
		}
		sc.piece(time.Since(began), len(resp.Choices[0].Delta.Content))
	}
	sc.Total = time.Since(began)
	if sc.Err == nil && sc.Pieces == 0 {
		sc.Err = errNoAnswer
	}
	return sc
}

func streamChatRequest(i, tokens int) goopenai.ChatCompletionRequest {
	req := chatRequest(i)
	req.Messages[1].Content = StreamQuestion(i, tokens)
	req.Stream = true
	return req
}

// newStreamDirect streams from llmsim with go-openai.
func newStreamDirect(sim *llmsim.Server, tokens int) *streamContender {
	hc, closeIdle := newHTTPClient()
	c := goOpenAIClient(sim.BaseURL, hc)
	call := func(ctx context.Context, i int) (StreamCall, string) {
		key := fmt.Sprintf("direct-%d", i)
		ctx, cancel := context.WithTimeout(withCall(ctx, key, 1), 2*time.Minute)
		defer cancel()
		began := time.Now()
		s, err := c.CreateChatCompletionStream(ctx, streamChatRequest(i, tokens))
		if err != nil {
			return StreamCall{Err: err, Total: time.Since(began)}, key
		}
		defer s.Close()
		return readStream(s, began), key
	}
	return &streamContender{name: NameStreamDirect, about: "go-openai CreateChatCompletionStream against llmsim",
		sim: sim, call: call, close: func() { closeIdle(); sim.Close() }}
}

// newStreamClient is an LLMCall with stream: true on an in-process worker
// (default policy), followed with llmclient.Stream.
func newStreamClient(c client.Client, sim *llmsim.Server, tokens int) (*streamContender, error) {
	lc, _, stop, err := startDurableWorker(c, sim.BaseURL, DurableOptions{})
	if err != nil {
		return nil, err
	}
	call := func(ctx context.Context, i int) (StreamCall, string) {
		req := StreamRequest(lc.TaskQueue, i, tokens, 2*time.Minute)
		key, _ := llmclient.Key(req)
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var sc StreamCall
		began := time.Now()
		_, err := lc.Stream(ctx, req, func(it llmclient.StreamItem) error {
			if it.Delta != nil && it.Delta.Text != "" {
				sc.piece(time.Since(began), len(it.Delta.Text))
			}
			return nil
		})
		sc.Total, sc.Err = time.Since(began), err
		if sc.Err == nil && sc.Pieces == 0 {
			sc.Err = errNoAnswer
		}
		return sc, key
	}
	return &streamContender{name: NameStreamClient, about: "LLMCall with stream: true, deltas via llmclient.Stream (workflow stream), default policy",
		sim: sim, call: call, close: func() { stop(); sim.Close() }}, nil
}

// frontDoorToken is the bearer token of the benchmark's front door, the
// one goOpenAIClient sends.
const frontDoorToken = "bench-frontdoor-token-3c5e7a9b1d2f4068"

// newStreamFrontDoor is the front door (frontdoor.Handler on an HTTP
// server of its own) in front of an in-process worker, called by go-openai
// with stream: true; eager: the door starts its calls eagerly on that
// worker, which shares its Temporal client (starter serve --worker).
func newStreamFrontDoor(c client.Client, sim *llmsim.Server, tokens int, eager bool) (*streamContender, error) {
	tenants, err := frontdoor.ParseTokens(frontDoorToken + "=bench")
	if err != nil {
		return nil, err
	}
	srv, _, stop, err := startDurableDoor(c, sim.BaseURL, DurableOptions{EagerStart: eager}, tenants)
	if err != nil {
		return nil, err
	}
	name, about := NameStreamFrontDoor, "the same through the front door (POST /v1/chat/completions, stream: true) with go-openai"
	if eager {
		name, about = NameStreamFrontDoorEager, "the front door starting its calls eagerly on the worker in its process (starter serve --worker)"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	oc := goOpenAIClient(srv.URL+"/v1", &http.Client{Transport: tr})
	run := randomID()
	call := func(ctx context.Context, i int) (StreamCall, string) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		req := streamChatRequest(i, tokens)
		req.User = fmt.Sprintf("%s-u%d", run, i) // a call of its own
		began := time.Now()
		s, err := oc.CreateChatCompletionStream(ctx, req)
		if err != nil {
			return StreamCall{Err: err, Total: time.Since(began)}, ""
		}
		defer s.Close()
		sc := readStream(s, began)
		return sc, s.Header().Get(frontdoor.HeaderWorkflowID)
	}
	return &streamContender{name: name, about: about,
		sim: sim, call: call, close: func() { stop(); tr.CloseIdleConnections(); sim.Close() }}, nil
}

// stats of one row.
type streamStats struct {
	n, failed                                    int
	ttft50, ttft95, last50, last95, tot50, tot95 time.Duration
	// over50 and over95 are percentiles of the paired TTFT overhead
	// over the direct call with the same index.
	over50, over95   time.Duration
	pieces, arrivals float64
}

func (r *StreamReport) stats() []streamStats {
	out := make([]streamStats, len(r.Rows))
	for k, row := range r.Rows {
		st := &out[k]
		var ttft, last, tot, over []time.Duration
		for i, c := range row.Calls {
			if c.Err != nil {
				st.failed++
				continue
			}
			st.n++
			ttft, last, tot = append(ttft, c.TTFT), append(last, c.Last), append(tot, c.Total)
			st.pieces += float64(c.Pieces)
			st.arrivals += float64(c.Arrivals)
			if k > 0 && i < len(r.Rows[0].Calls) && r.Rows[0].Calls[i].Err == nil {
				over = append(over, c.TTFT-r.Rows[0].Calls[i].TTFT)
			}
		}
		if st.n > 0 {
			st.pieces /= float64(st.n)
			st.arrivals /= float64(st.n)
		}
		st.last50, st.last95 = Percentile(last, 0.5), Percentile(last, 0.95)
		st.ttft50, st.ttft95 = Percentile(ttft, 0.5), Percentile(ttft, 0.95)
		st.tot50, st.tot95 = Percentile(tot, 0.5), Percentile(tot, 0.95)
		if len(over) > 0 {
			st.over50, st.over95 = Percentile(over, 0.5), Percentile(over, 0.95)
		}
	}
	return out
}

// TTFTOverhead returns the paired TTFT overhead of the named contender
// over the direct call: the median and 95th percentile of TTFT(call i) −
// TTFT(direct call i).
func (r *StreamReport) TTFTOverhead(name string) (p50, p95 time.Duration, ok bool) {
	st := r.stats()
	for k, row := range r.Rows {
		if row.Name == name && k > 0 && st[k].n > 0 {
			return st[k].over50, st[k].over95, true
		}
	}
	return 0, 0, false
}

// Header returns the report's header.
func (r *StreamReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	gen := time.Duration(o.Tokens) * time.Second / llmsim.DefaultTokensPerSecond
	return Header{Title: fmt.Sprintf("Streaming latency — a %d-token answer, direct vs durable-llm", o.Tokens), Command: command, Machine: m, Date: date, Params: []string{
		fmt.Sprintf("upstream: llmsim's default models at their default speed: time to first token lognormal (median 300 ms, σ 0.2), then %d tokens/s, so the answer takes about %s; one llmsim per contender with the same seed, so call i meets the same upstream time to first token everywhere", llmsim.DefaultTokensPerSecond, fmtDur(gen+300*time.Millisecond)),
		fmt.Sprintf("%d sequential calls per contender (c=1) after 2 warm-up calls, the contenders' calls interleaved; every call asks a different question", o.Calls),
		"TTFT: from the request to the first piece of answer text the caller gets; last token: to the last piece of text; end of stream: to [DONE] (for llmclient.Stream, the call's result); text arrivals: how many times text arrived (pieces within 10 ms of the previous count once)",
		fmt.Sprintf("durable-llm: in-process llmworker with the default policy (stream.batch_interval %[1]s: the first delta at once, then one batch per %[1]s), on the bench's Temporal dev server; the front door is frontdoor.Handler on a local HTTP server", fmtDur(config.DefaultConfig().Stream.BatchInterval.D())),
	}}
}

// Table returns the latency table.
func (r *StreamReport) Table() Table {
	t := Table{Columns: []string{"contender", "TTFT p50", "TTFT p95", "TTFT overhead p50 (paired)", "TTFT overhead p95 (paired)",
		"last token p50", "last token p95", "end of stream p50", "end of stream p95", "text arrivals per answer", "failed"}}
	for k, st := range r.stats() {
		o50, o95 := "–", "–"
		if k > 0 && st.n > 0 {
			o50, o95 = "+"+fmtDur(st.over50), "+"+fmtDur(st.over95)
		}
		t.Rows = append(t.Rows, []string{r.Rows[k].Name, fmtDur(st.ttft50), fmtDur(st.ttft95), o50, o95,
			fmtDur(st.last50), fmtDur(st.last95), fmtDur(st.tot50), fmtDur(st.tot95), fmt.Sprintf("%.0f", st.arrivals), fmt.Sprint(st.failed)})
	}
	return t
}

// StreamTTFTTarget is the durable floor's target for the time to first
// token: at most this much over a direct stream's, at p50, paired.
const StreamTTFTTarget = 30 * time.Millisecond

// Targets checks the TTFT target of the streamed paths.
func (r *StreamReport) Targets() []string {
	var out []string
	st := r.stats()
	for k, row := range r.Rows {
		if k == 0 {
			continue
		}
		v := "met"
		if st[k].n == 0 || st[k].over50 > StreamTTFTTarget || st[k].failed > 0 {
			v = "MISSED"
		}
		diff := st[k].ttft50 - st[0].ttft50
		out = append(out, fmt.Sprintf("%s: TTFT overhead p50 ≤ %s over direct: +%s paired (+%s between the medians) — %s",
			row.Name, fmtDur(StreamTTFTTarget), fmtDur(st[k].over50), fmtDur(diff), v))
	}
	return out
}

// Markdown renders the report.
func (r *StreamReport) Markdown(h Header, chart string) string {
	b := reportHead(h, r.Table(), r.Targets())
	var up []time.Duration
	for _, c := range r.Rows[0].Calls {
		if c.Upstream > 0 {
			up = append(up, c.Upstream)
		}
	}
	if len(up) > 0 {
		fmt.Fprintf(b, "\nllmsim's own time to first token (its schedule, the same for every contender): p50 %s, p95 %s.\n", fmtDur(Percentile(up, 0.5)), fmtDur(Percentile(up, 0.95)))
	}
	for _, row := range r.Rows {
		var errs []string
		for _, c := range row.Calls {
			if c.Err != nil && len(errs) < 3 {
				errs = append(errs, c.Err.Error())
			}
		}
		if len(errs) > 0 {
			fmt.Fprintf(b, "\n%s: %d calls failed, e.g. %s\n", row.Name, len(row.Calls)-len(row.ok()), strings.Join(errs, "; "))
		}
	}
	if chart != "" {
		fmt.Fprintf(b, "\n![time to first token per call, by contender](%s)\n", chart)
	}
	return b.String()
}
