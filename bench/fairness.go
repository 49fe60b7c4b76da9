package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/internal/progress"
	"github.com/durable-llm/durable-llm/llmsim"
)

// FairnessOptions configure RunFairness.
type FairnessOptions struct {
	// Temporal is a client of the dev server (required).
	Temporal client.Client
	// Quota is tenant A's requests_per_minute; default 120 (2 calls/s).
	Quota int
	// InFlight is tenant A's max_in_flight; default 4.
	InFlight int
	// Flood is how many times its quota A sends; default 10.
	Flood float64
	// Refused is how many properties the tool schema of each of A's
	// refused requests has (see refusedBody); default 4,999: at the
	// schema limits (policies/structured: 5,000 properties, 10,000
	// subschemas), about 0.5 s of one core to compile here.
	Refused int
	// Rate is tenant B's calls per second, well within its own limits
	// (the defaults); default 4.
	Rate float64
	// Window is how long B's calls are measured in each row; default 15s.
	Window time.Duration
	// Warmup is how long A floods before B's window starts; default 3s.
	Warmup time.Duration
	// Tokens of every answer; default 20.
	Tokens int
	// Slots of the upstream's first model (qwen-72b): the capacity the
	// tenants share; default 12.
	Slots int
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per row (cmd/bench); nil: none.
	Meter *progress.Display
}

// FairnessRow is one row: B's calls, and A's when A floods.
type FairnessRow struct {
	Name string
	// Flooding: A sends Flood times its quota; Refused: each of A's
	// requests is one the front door refuses once read, after compiling
	// its tool schema (refusedBody); Limited: A's limits are on (else A
	// has none).
	Flooding, Refused, Limited bool
	// B and A count each tenant's answers by HTTP status.
	B, A TenantCount
	// BLatencies are the latencies of B's answered calls.
	BLatencies []time.Duration
}

// TenantCount counts one tenant's calls by how they ended.
type TenantCount struct {
	// Invalid are the 4xx answers other than 429 (the request refused
	// once read).
	Sent, OK, Invalid, Limited, Other int
	// InFlight of Limited were refused on max_in_flight, Validation on
	// validation_ms_per_minute; the rest on requests_per_minute or
	// tokens_per_minute.
	InFlight, Validation int
	// Errors are a few examples of Other.
	Errors []string
}

// FairnessReport is the fairness benchmark's result.
type FairnessReport struct {
	Options FairnessOptions
	Rows    []FairnessRow
}

// Tokens of the benchmark's tenants at its front door.
const (
	fairTokenA = "bench-tenant-a-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	fairTokenB = "bench-tenant-b-8a7b6c5d4e3f20110213f4e5d6c7b8a9"
)

// RunFairness measures how well the front door keeps one tenant's load
// from another's latency: tenant B sends its normal load at a constant
// rate through a real front door (frontdoor.Handler on a local HTTP
// server) to an in-process worker and llmsim at their realistic speed,
// first alone, then while tenant A floods at Flood times its
// requests_per_minute, with A's limits on, then with A unlimited (the
// front door before per-tenant limits); then the same two with every
// request of A one the front door refuses after the expensive part of
// validating it (a tool schema of Refused properties compiled). Each row
// has a front door of its own (fresh buckets); the worker and llmsim are
// shared.
func RunFairness(ctx context.Context, o FairnessOptions) (*FairnessReport, error) {
	if o.Temporal == nil {
		return nil, fmt.Errorf("fairness: a Temporal client is required")
	}
	o.Quota, o.InFlight = orDefault(o.Quota, 120), orDefault(o.InFlight, 4)
	o.Tokens, o.Slots = orDefault(o.Tokens, 20), orDefault(o.Slots, 12)
	o.Refused = orDefault(o.Refused, 4999)
	if o.Flood <= 0 {
		o.Flood = 10
	}
	if o.Rate <= 0 {
		o.Rate = 4
	}
	if o.Window <= 0 {
		o.Window = 15 * time.Second
	}
	if o.Warmup <= 0 {
		o.Warmup = 3 * time.Second
	}
	progress := progressTo(o.Progress)
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: FairnessScenario(o.Slots)})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	lc, cfg, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{})
	if err != nil {
		return nil, err
	}
	defer stop()

	rep := &FairnessReport{Options: o}
	for _, row := range []FairnessRow{
		{Name: "B alone"},
		{Name: "B while A floods, limits on", Flooding: true, Limited: true},
		{Name: "B while A floods, A unlimited", Flooding: true},
		{Name: "B while A sends refused requests, limits on", Flooding: true, Refused: true, Limited: true},
		{Name: "B while A sends refused requests, A unlimited", Flooding: true, Refused: true},
	} {
		aLimits := fmt.Sprintf("{requests_per_minute: %d, max_in_flight: %d}", o.Quota, o.InFlight)
		if !row.Limited {
			aLimits = "{requests_per_minute: 0, tokens_per_minute: 0, max_in_flight: 0, validation_ms_per_minute: 0}"
		}
		tenants, err := frontdoor.ParseTenantsFile([]byte("tenants:\n"+
			"  - name: a\n    tokens: ["+fairTokenA+"]\n    limits: "+aLimits+"\n"+
			"  - name: b\n    tokens: ["+fairTokenB+"]\n"), "fairness")
		if err != nil {
			return nil, err
		}
		srv, err := serveFrontDoor(lc, cfg, tenants)
		if err != nil {
			return nil, err
		}
		progress("fairness: %s — B at %.0f calls/s for %s", row.Name, o.Rate, o.Window)
		step := o.Meter.Phase("fairness: "+row.Name, int(o.Rate*o.Window.Seconds()))
		row = runFairnessRow(ctx, o, row, srv.URL, step)
		step.Done()
		srv.Close()
		rep.Rows = append(rep.Rows, row)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// FairnessScenario is llmsim's default models at their realistic speed,
// the first (qwen-72b) serving at most slots requests at once, the others
// waiting in its queue: an upstream of fixed capacity, as a GPU server is.
func FairnessScenario(slots int) *llmsim.Scenario {
	ms := llmsim.DefaultModels()
	ms[0].Slots = slots
	return &llmsim.Scenario{Name: "shared-capacity", Seed: 5, Models: ms}
}

func runFairnessRow(ctx context.Context, o FairnessOptions, row FairnessRow, url string, step *progress.Step) FairnessRow {
	run := randomID()
	caller := func(token, tenant string, refuse bool, sent, ok, invalid, limited, inFlight, validation, other *atomic.Int64, errs chan<- string) CallFunc {
		hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		return func(ctx context.Context, i int) Result {
			sent.Add(1)
			body := fmt.Sprintf(`{"model":"auto","user":"%s-%s-%d","messages":[{"role":"user","content":%q}]}`,
				run, tenant, i, StreamQuestion(i, o.Tokens))
			if refuse {
				body = refusedBody(o.Refused, run, i)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				return Result{Err: err}
			}
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				other.Add(1)
				select {
				case errs <- err.Error():
				default:
				}
				return Result{Err: err}
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
				return Result{Answered: true}
			case http.StatusTooManyRequests:
				limited.Add(1)
				// The refusal names its limit ("… on max_in_flight: …").
				switch {
				case strings.Contains(string(answer), " on "+frontdoor.LimitInFlight+":"):
					inFlight.Add(1)
				case strings.Contains(string(answer), " on "+frontdoor.LimitValidation+":"):
					validation.Add(1)
				}
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
				invalid.Add(1)
			default:
				other.Add(1)
				select {
				case errs <- resp.Status:
				default:
				}
			}
			return Result{Err: fmt.Errorf("%s", resp.Status)}
		}
	}
	var bSent, bOK, bInvalid, bLim, bInFlight, bValidation, bOther, aSent, aOK, aInvalid, aLim, aInFlight, aValidation, aOther atomic.Int64
	bErrs, aErrs := make(chan string, 3), make(chan string, 3)

	// A floods from Warmup before B's window to its end; its calls still
	// running then are abandoned.
	aDone := make(chan struct{})
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	if row.Flooding {
		aRate := o.Flood * float64(o.Quota) / 60
		callA := caller(fairTokenA, "a", row.Refused, &aSent, &aOK, &aInvalid, &aLim, &aInFlight, &aValidation, &aOther, aErrs)
		go func() {
			defer close(aDone)
			_, _ = OpenLoop(actx, aRate, o.Warmup+o.Window, callA)
		}()
		select {
		case <-time.After(o.Warmup):
		case <-ctx.Done():
		}
	} else {
		close(aDone)
	}
	callB := caller(fairTokenB, "b", false, &bSent, &bOK, &bInvalid, &bLim, &bInFlight, &bValidation, &bOther, bErrs)
	outs, _ := OpenLoop(ctx, o.Rate, o.Window, func(ctx context.Context, i int) Result {
		r := callB(ctx, i)
		step.Add(1)
		return r
	})
	// A's calls answered after B's last are not counted; those still
	// waiting are let go.
	time.AfterFunc(5*time.Second, cancelA)
	<-aDone
	for _, out := range outs {
		if out.Answered {
			row.BLatencies = append(row.BLatencies, out.Latency)
		}
	}
	row.B = TenantCount{Sent: int(bSent.Load()), OK: int(bOK.Load()), Invalid: int(bInvalid.Load()), Limited: int(bLim.Load()), InFlight: int(bInFlight.Load()), Validation: int(bValidation.Load()), Other: int(bOther.Load()), Errors: drain(bErrs)}
	row.A = TenantCount{Sent: int(aSent.Load()), OK: int(aOK.Load()), Invalid: int(aInvalid.Load()), Limited: int(aLim.Load()), InFlight: int(aInFlight.Load()), Validation: int(aValidation.Load()), Other: int(aOther.Load()), Errors: drain(aErrs)}
	return row
}

// refusedBody is the i-th chat completion of a run that the front door
// refuses once it has read it, after the expensive part of validating
// it: it offers a tool whose parameters have n properties, each an array
// of strings (2n+1 subschemas, compiled), and asks for a temperature out
// of range. The properties' names are the request's own, so that no
// schema is compiled once for several requests (the compiled-schema
// cache).
func refusedBody(n int, run string, i int) string {
	var b strings.Builder
	b.WriteString(`{"model":"auto","temperature":7,"messages":[{"role":"user","content":"Look up my order."}],` +
		`"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{`)
	for j := range n {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s_%d_%d":{"type":"array","items":{"type":"string"}}`, run[:8], i, j)
	}
	b.WriteString(`}}}}]}`)
	return b.String()
}

func drain(c chan string) []string {
	var out []string
	for {
		select {
		case s := <-c:
			out = append(out, s)
		default:
			return out
		}
	}
}

// Header returns the report's header.
func (r *FairnessReport) Header(command string, m Machine, date time.Time) Header {
	o := r.Options
	return Header{Title: "Fairness — one tenant floods, another keeps its latency", Command: command, Machine: m, Date: date, Params: []string{
		fmt.Sprintf("tenant B: %.0f calls/s for %s (open loop), within its limits (the defaults: %d requests/min, %d tokens/min, %d in flight, %d ms of validation/min)",
			o.Rate, o.Window, frontdoor.DefaultLimits.RequestsPerMinute, frontdoor.DefaultLimits.TokensPerMinute, frontdoor.DefaultLimits.MaxInFlight, frontdoor.DefaultLimits.ValidationMSPerMinute),
		fmt.Sprintf("tenant A: requests_per_minute %d (%.0f calls/s, in bursts of up to a minute's worth), max_in_flight %d, validation_ms_per_minute %d (the default); it floods at %.0f× its rate (%.0f calls/s), from %s before B's window to its end. \"A unlimited\": all four 0 (its requests are still validated one at a time)",
			o.Quota, float64(o.Quota)/60, o.InFlight, frontdoor.DefaultLimits.ValidationMSPerMinute, o.Flood, o.Flood*float64(o.Quota)/60, o.Warmup),
		fmt.Sprintf("upstream: llmsim's default models at their realistic speed (time to first token lognormal, median 300 ms; 40 tokens/s), answers of %d tokens; qwen-72b, the ladder's first, serves %d requests at once and queues the rest; one in-process worker (default policy) on the bench's dev server, shared by the rows", o.Tokens, o.Slots),
		fmt.Sprintf("refused requests: A's requests in the last two rows offer a tool whose parameters have %d properties, each an array of strings (%d subschemas, within the schema limits of policies/structured; %d KB), named apart in every request (none is compiled once for two), and a temperature of 7: the front door compiles the schema, then answers 400", o.Refused, 2*o.Refused+1, len(refusedBody(o.Refused, randomID(), 0))/1000),
		"front door: frontdoor.Handler on a local HTTP server, a new one per row (fresh buckets), called with net/http, non-streamed calls; every call a new idempotency key",
		"latency: B's calls answered 200, from request to the end of the answer",
	}}
}

// Table returns the fairness table.
func (r *FairnessReport) Table() Table {
	t := Table{Columns: []string{"row", "B p50", "B p95", "B p99", "B p99 ÷ alone", "B 200", "B 429", "B other", "A sent", "A 200", "A 400", "A 429", "A 429 on max_in_flight", "A 429 on validation_ms_per_minute", "A other"}}
	base := Percentile(r.Rows[0].BLatencies, 0.99)
	for _, row := range r.Rows {
		p99 := Percentile(row.BLatencies, 0.99)
		ratio := ""
		if base > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(p99)/float64(base))
		}
		a := []string{"–", "–", "–", "–", "–", "–", "–"}
		if row.Flooding {
			a = []string{fmt.Sprint(row.A.Sent), fmt.Sprint(row.A.OK), fmt.Sprint(row.A.Invalid), fmt.Sprint(row.A.Limited),
				fmt.Sprint(row.A.InFlight), fmt.Sprint(row.A.Validation), fmt.Sprint(row.A.Other)}
		}
		t.Rows = append(t.Rows, append([]string{row.Name,
			fmtDur(Percentile(row.BLatencies, 0.5)), fmtDur(Percentile(row.BLatencies, 0.95)), fmtDur(p99), ratio,
			fmt.Sprint(row.B.OK), fmt.Sprint(row.B.Limited), fmt.Sprint(row.B.Invalid + row.B.Other)}, a...))
	}
	return t
}

// Targets checks the target on the row with A's limits on.
func (r *FairnessReport) Targets() []string {
	base := Percentile(r.Rows[0].BLatencies, 0.99)
	var out []string
	for _, row := range r.Rows[1:] {
		if !row.Limited {
			continue
		}
		ratio := float64(Percentile(row.BLatencies, 0.99)) / float64(base)
		verdict := "MISSED"
		if ratio <= 1.5 && row.A.Limited > 0 && row.B.Limited == 0 {
			verdict = "met"
		}
		out = append(out, fmt.Sprintf("%s: B's p99 (%s) within 1.5× of alone (%s), A gets 429s and B none: %.2f×, A %d × 429, B %d × 429 — %s",
			row.Name, fmtDur(Percentile(row.BLatencies, 0.99)), fmtDur(base), ratio, row.A.Limited, row.B.Limited, verdict))
	}
	return out
}

// Markdown renders the report.
func (r *FairnessReport) Markdown(h Header) string {
	b := reportHead(h, r.Table(), r.Targets())
	for _, row := range r.Rows {
		for _, c := range []struct {
			who string
			n   TenantCount
		}{{"B", row.B}, {"A", row.A}} {
			if c.n.Other > 0 {
				fmt.Fprintf(b, "\n- %s: %s's other answers, e.g. %s", row.Name, c.who, strings.Join(c.n.Errors, "; "))
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}
