package bench

import (
	"context"
	"embed"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmsim"
)

//go:embed scenarios/*.yaml
var scenarioFS embed.FS

// StormCase is one storm benchmark: an llmsim scenario whose second phase
// is the incident, driven at a constant arrival rate.
type StormCase struct {
	// Name is the case's short name ("spike", "vllm", "metastable").
	Name string
	// Title says which incident it reproduces.
	Title string
	// Scenario is the llmsim scenario (YAML); each contender gets a fresh
	// simulator parsed from it.
	Scenario []byte
	// Rate is the arrival rate in logical calls per second.
	Rate float64
	// Duration is how long calls keep arriving.
	Duration time.Duration
	// ClientTimeout is the naive loop's and the backoff loop's per-attempt
	// timeout.
	ClientTimeout time.Duration
	// StartToClose is the Temporal baseline's activity timeout.
	StartToClose time.Duration
	// Deadline is every contender's per-call deadline.
	Deadline time.Duration
	// IncidentStart and IncidentEnd delimit the incident (the scenario's
	// second phase) from the start of the run.
	IncidentStart, IncidentEnd time.Duration
	// Tail is the window at the end of the arrivals whose goodput tells a
	// recovered contender from a collapsed one.
	Tail time.Duration
	// Metastable marks the near-capacity case: its table reports which
	// contenders stay collapsed after the trigger.
	Metastable bool
}

// StormCaseNames lists the storm cases in the order they run.
var StormCaseNames = []string{"spike", "vllm", "metastable"}

var stormTitles = map[string]string{
	"spike":      "Storm — a 5-second upstream latency spike",
	"vllm":       "Storm — a vLLM cluster slows from 800 ms to 2.5 s",
	"metastable": "Storm — metastability: near-capacity load plus a 2-second trigger",
}

// LoadStormCase returns the storm case called name with its scenario from
// bench/scenarios/storm-<name>.yaml. deadline is the per-call deadline.
// short shrinks it for a smoke run: at most 3 s before the incident, at
// most 4 s of incident and 6 s after it.
func LoadStormCase(name string, deadline time.Duration, short bool) (StormCase, error) {
	data, err := scenarioFS.ReadFile("scenarios/storm-" + name + ".yaml")
	if err != nil {
		return StormCase{}, fmt.Errorf("no storm case %q (have %s)", name, strings.Join(StormCaseNames, ", "))
	}
	sc, err := llmsim.ParseScenario(data, "storm-"+name+".yaml")
	if err != nil {
		return StormCase{}, err
	}
	if len(sc.Phases) < 2 || sc.Load == nil || sc.Load.Rate <= 0 {
		return StormCase{}, fmt.Errorf("storm-%s.yaml: needs a healthy phase, an incident phase and load.rate", name)
	}
	if short {
		sc.Phases[0].Duration = min(sc.Phases[0].Duration, llmsim.Duration(3*time.Second))
		sc.Phases[1].Duration = min(sc.Phases[1].Duration, llmsim.Duration(4*time.Second))
		sc.Load.Duration = sc.Phases[0].Duration + sc.Phases[1].Duration + llmsim.Duration(6*time.Second)
		if data, err = marshalScenario(sc); err != nil {
			return StormCase{}, err
		}
	}
	start := sc.Phases[0].Duration.D()
	c := StormCase{
		Name: name, Title: stormTitles[name], Scenario: data,
		Rate: sc.Load.Rate, Duration: sc.Load.Duration.D(), ClientTimeout: sc.Load.ClientTimeout.D(),
		StartToClose: 2 * time.Second, Deadline: deadline,
		IncidentStart: start, IncidentEnd: start + sc.Phases[1].Duration.D(),
		Tail: min(10*time.Second, sc.Load.Duration.D()/3), Metastable: name == "metastable",
	}
	return c, nil
}

// scenario parses a fresh copy of the case's scenario.
func (c StormCase) scenario() (*llmsim.Scenario, error) {
	return llmsim.ParseScenario(c.Scenario, "storm-"+c.Name+".yaml")
}

// Contender keys accepted by StormOptions.Contenders.
const (
	KeyNaive    = "naive"
	KeyBackoff  = "backoff"
	KeyOpenAIGo = "openai-go"
	KeyTemporal = "temporal"
	KeyDurable  = "durable"
)

// StormContenders lists the storm contenders' keys in the order they run.
var StormContenders = []string{KeyNaive, KeyBackoff, KeyOpenAIGo, KeyTemporal, KeyDurable}

// StormOptions configure RunStorm.
type StormOptions struct {
	// Temporal is a client of the dev server the Temporal baseline and
	// durable-llm run on; required for those two.
	Temporal client.Client
	// Contenders to run, by key; default StormContenders.
	Contenders []string
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
}

// StormRun is one contender's run of a storm case.
type StormRun struct {
	Name, About string
	Outcomes    []Outcome
	Stats       llmsim.Stats
	Summary     StormSummary
}

// StormReport is a storm case with every contender's run.
type StormReport struct {
	Case StormCase
	Runs []StormRun
}

// RunStorm runs each contender, one after another, against its own fresh
// llmsim running the case's scenario, at the case's constant arrival rate.
func RunStorm(ctx context.Context, c StormCase, o StormOptions) (*StormReport, error) {
	keys := o.Contenders
	if len(keys) == 0 {
		keys = StormContenders
	}
	rep := &StormReport{Case: c}
	for _, key := range keys {
		run, err := runStormContender(ctx, c, key, o)
		if err != nil {
			return nil, fmt.Errorf("storm %s, %s: %w", c.Name, key, err)
		}
		rep.Runs = append(rep.Runs, *run)
		if o.Progress != nil {
			s := run.Summary
			fmt.Fprintf(o.Progress, "  %-24s amp %.2f/%.2f answered %.1f%% model %.1f%% p50 %s p99 %s recovery %s\n",
				run.Name, s.AmpIncident, s.AmpOverall, s.AnsweredPct, s.ByModelPct, fmtDur(s.P50), fmtDur(s.P99), s.RecoveryString())
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func stormContender(c StormCase, key, baseURL string, o StormOptions) (*Contender, error) {
	needTemporal := func() error {
		if o.Temporal == nil {
			return fmt.Errorf("contender %q needs a Temporal server", key)
		}
		return nil
	}
	switch key {
	case KeyNaive:
		return NewNaive(baseURL, c.ClientTimeout, c.Deadline), nil
	case KeyBackoff:
		return NewBackoff(baseURL, c.ClientTimeout, c.Deadline), nil
	case KeyOpenAIGo:
		return NewOpenAIGo(baseURL, c.Deadline), nil
	case KeyTemporal:
		if err := needTemporal(); err != nil {
			return nil, err
		}
		return NewTemporalDefault(o.Temporal, baseURL, c.StartToClose, c.Deadline)
	case KeyDurable:
		if err := needTemporal(); err != nil {
			return nil, err
		}
		return NewDurable(o.Temporal, baseURL, DurableOptions{Deadline: c.Deadline})
	}
	return nil, fmt.Errorf("unknown contender %q (have %s)", key, strings.Join(StormContenders, ", "))
}

// warmups is the number of calls each contender makes before a run, so
// connections, pollers and caches are warm.
const warmups = 3

func runStormContender(ctx context.Context, c StormCase, key string, o StormOptions) (*StormRun, error) {
	sc, err := c.scenario()
	if err != nil {
		return nil, err
	}
	sim, err := llmsim.NewServer(llmsim.Options{Scenario: sc})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	con, err := stormContender(c, key, sim.BaseURL, o)
	if err != nil {
		return nil, err
	}
	defer con.Close()
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "storm %s: %s (%s)…\n", c.Name, con.Name, con.About)
	}
	for i := 0; i < warmups; i++ {
		if r := con.Call(ctx, 1_000_000+i); r.Err != nil && o.Progress != nil {
			fmt.Fprintf(o.Progress, "  warm-up call failed: %v\n", r.Err)
		}
	}
	sim.Reset() // the scenario's timeline and the stats start now
	outs, _ := OpenLoop(ctx, c.Rate, c.Duration, con.Call)
	st := sim.Stats()
	return &StormRun{Name: con.Name, About: con.About, Outcomes: outs, Stats: st, Summary: Summarize(outs, st, c)}, nil
}

// StormSummary holds a run's storm metrics.
type StormSummary struct {
	// Calls is the number of logical calls; IncidentCalls of those started
	// during the incident.
	Calls, IncidentCalls int
	// AnsweredPct is the share of calls answered within their deadline by a
	// model or the fallback; ByModelPct by a model.
	AnsweredPct, ByModelPct float64
	// P50, P95 and P99 are latencies until the caller had its final result.
	P50, P95, P99 time.Duration
	// AmpIncident is the upstream attempts of the calls started during the
	// incident per such call; AmpOverall all upstream arrivals per call.
	AmpIncident, AmpOverall float64
	// PeakToMean is the busiest 100 ms bucket's upstream arrivals over the
	// mean per bucket; PeakOverOffered over the offered calls per 100 ms.
	PeakToMean, PeakOverOffered float64
	// Recovered reports whether, after the incident, a time came from which
	// ≥ 99 % of the calls started were answered by a model within their
	// deadline; Recovery is how long after the incident's end.
	Recovered bool
	Recovery  time.Duration
	// TailByModelPct is ByModelPct over the calls started in the case's
	// tail window (the last seconds of arrivals).
	TailByModelPct float64
	// Sources counts durable-llm's answer sources.
	Sources map[string]int
	// Upstream counts what llmsim answered: status codes, "499" (client gone
	// first), "reset".
	Upstream map[string]int
}

// Summarize computes a run's storm metrics from the client-side outcomes
// and llmsim's stats.
func Summarize(outs []Outcome, st llmsim.Stats, c StormCase) StormSummary {
	s := StormSummary{Calls: len(outs), Sources: map[string]int{}, Upstream: st.Totals.Responses}
	if len(outs) == 0 {
		return s
	}
	good := func(o Outcome) bool { return o.ByModel && o.Latency <= c.Deadline }
	answered, byModel := 0, 0
	incAttempts := 0
	for _, o := range outs {
		if o.Answered && o.Latency <= c.Deadline {
			answered++
		}
		if good(o) {
			byModel++
		}
		if o.Source != "" {
			s.Sources[o.Source]++
		}
		if o.Start >= c.IncidentStart && o.Start < c.IncidentEnd {
			s.IncidentCalls++
			incAttempts += st.Conversations[o.Key].Attempts
		}
	}
	n := float64(len(outs))
	s.AnsweredPct, s.ByModelPct = 100*float64(answered)/n, 100*float64(byModel)/n
	lat := Latencies(outs)
	s.P50, s.P95, s.P99 = Percentile(lat, 0.50), Percentile(lat, 0.95), Percentile(lat, 0.99)
	if s.IncidentCalls > 0 {
		s.AmpIncident = float64(incAttempts) / float64(s.IncidentCalls)
	}
	s.AmpOverall = float64(st.Totals.Arrivals) / n
	s.PeakToMean = st.PeakToMean()
	peak := 0
	for _, b := range st.Buckets {
		peak = max(peak, b.Arrivals)
	}
	s.PeakOverOffered = float64(peak) / (c.Rate * llmsim.BucketWidth.Seconds())
	s.Recovery, s.Recovered = RecoveryTime(outs, c.IncidentEnd, good, 100*time.Millisecond, max(10, int(c.Rate*3)))
	tailGood, tail := 0, 0
	for _, o := range outs {
		if o.Start >= c.Duration-c.Tail {
			tail++
			if good(o) {
				tailGood++
			}
		}
	}
	if tail > 0 {
		s.TailByModelPct = 100 * float64(tailGood) / float64(tail)
	}
	return s
}

// RecoveryTime returns the first instant t ≥ from, in steps of step, such
// that at least 99 % of the calls started at or after t are good, as an
// offset from from. It reports false when no such t leaves at least
// minCalls calls to judge.
func RecoveryTime(outs []Outcome, from time.Duration, good func(Outcome) bool, step time.Duration, minCalls int) (time.Duration, bool) {
	sorted := slices.Clone(outs)
	sort.SliceStable(sorted, func(a, b int) bool { return sorted[a].Start < sorted[b].Start })
	// suffix[i] = good calls among sorted[i:]
	suffix := make([]int, len(sorted)+1)
	for i := len(sorted) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1]
		if good(sorted[i]) {
			suffix[i]++
		}
	}
	for t := from; ; t += step {
		i := sort.Search(len(sorted), func(k int) bool { return sorted[k].Start >= t })
		left := len(sorted) - i
		if left < max(1, minCalls) {
			return 0, false
		}
		if float64(suffix[i]) >= 0.99*float64(left) {
			return t - from, true
		}
	}
}

// RecoveryString formats the recovery time ("0 s", "7.4 s", "not in run").
func (s StormSummary) RecoveryString() string {
	if !s.Recovered {
		return "not in run"
	}
	return fmtDur(s.Recovery)
}
