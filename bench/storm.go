package bench

import (
	"context"
	"embed"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/internal/progress"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
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
	// IncidentStart and IncidentEnd delimit the incident (every phase
	// between the scenario's first and its last; for a case of one phase,
	// the whole run) from the start of the run.
	IncidentStart, IncidentEnd time.Duration
	// Phases are the scenario's phases on the run's clock; nil: healthy
	// before the incident, sick during it, healthy after it.
	Phases []StormPhase
	// Sporadic marks a case whose one phase is faulty for the whole run
	// (seed 002's sporadic timeouts): no call starts while the endpoint
	// works, and no fault ends to recover from.
	Sporadic bool
	// Tail is the window at the end of the arrivals whose goodput tells a
	// recovered contender from a collapsed one.
	Tail time.Duration
	// Metastable marks the near-capacity case: its table reports which
	// contenders stay collapsed after the trigger.
	Metastable bool
	// SecondEndpoint lists the models served by a second endpoint (the
	// same simulator under another host name, so requests are told apart
	// by model); empty: every model on one endpoint.
	SecondEndpoint []string
	// SickCapacity, for a case whose models each have a capacity of their
	// own on one server (a provider's, as Anthropic's), lists the models
	// the incident strikes: the storm is measured on them, and the other
	// models' requests are their load, as a second endpoint's.
	SickCapacity []string
	// RetryAfter is the Retry-After of a rate-limit burst (0: none).
	RetryAfter time.Duration
	// PerRequest numbers the simulator's draws by call (the sweep's
	// shapes): the n-th request of call i meets the same fault and latency
	// whichever contender sends it (llmsim.Options.CallNumber), and each
	// run counts the tokens it was billed (StormRun.TokensBilled).
	PerRequest bool
	// FirstTokenTimeout is the impatient one-shot's timeout.
	FirstTokenTimeout time.Duration
}

// StormPhase is one phase of a storm case on the run's clock.
type StormPhase struct {
	Name string
	// Start and End are offsets from the start of the run; End < 0: until
	// the run ends.
	Start, End time.Duration
	// Sick reports a phase with faults or a changed latency: the endpoint
	// does not work as usual.
	Sick bool
}

// contains reports whether offset t falls in the phase.
func (p StormPhase) contains(t time.Duration) bool {
	return t >= p.Start && (p.End < 0 || t < p.End)
}

// phases returns the case's phases, or for a case built without them the
// three its incident window implies.
func (c StormCase) phases() []StormPhase {
	if len(c.Phases) > 0 {
		return c.Phases
	}
	return []StormPhase{
		{Name: "healthy", End: c.IncidentStart},
		{Name: "incident", Start: c.IncidentStart, End: c.IncidentEnd, Sick: true},
		{Name: "recovered", Start: c.IncidentEnd, End: -1},
	}
}

// Working reports whether offset t falls in a phase where the endpoint
// works; inIncident whether that phase lies inside the incident (a
// flapping endpoint's up windows).
func (c StormCase) Working(t time.Duration) (working, inIncident bool) {
	for _, p := range c.phases() {
		if p.contains(t) {
			return !p.Sick, !p.Sick && t >= c.IncidentStart && t < c.IncidentEnd
		}
	}
	return false, false
}

// FaultEnd is an instant a sick phase gives way to a working one.
type FaultEnd struct {
	// At is the offset from the start of the run; Until is when the next
	// sick phase starts (< 0: none before the run ends).
	At, Until time.Duration
}

// FaultEnds lists the instants a sick phase gives way to a working one,
// in order (one for most cases, one per down window for a flapping
// endpoint, none for a sporadic one).
func (c StormCase) FaultEnds() []FaultEnd {
	ps := c.phases()
	var out []FaultEnd
	for i := 1; i < len(ps); i++ {
		if !ps[i-1].Sick || ps[i].Sick {
			continue
		}
		e := FaultEnd{At: ps[i].Start, Until: -1}
		for _, q := range ps[i+1:] {
			if q.Sick {
				e.Until = q.Start
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// sick reports a phase with faults or a changed latency.
func sick(p llmsim.Phase) bool {
	return len(p.Faults) > 0 || p.Latency != nil || len(p.ModelLatency) > 0 || len(p.RateLimit) > 0
}

// StormCaseNames lists the storm cases in the order they run.
var StormCaseNames = []string{"spike", "vllm", "metastable", "hang", "429", "429-bare", "5xx", "slow", "flap", "flap5", "two", "queuefull", "overloaded", "limit", "late", "sporadic"}

var stormTitles = map[string]string{
	"spike":      "Storm — a 5-second upstream latency spike",
	"vllm":       "Storm — a vLLM cluster slows from 800 ms to 2.5 s",
	"metastable": "Storm — metastability: near-capacity load plus a 2-second trigger",
	"hang":       "Storm — the one shared endpoint hangs for 10 s",
	"429":        "Storm — a 429 burst: 60 % refused with Retry-After 1 s for 10 s",
	"429-bare":   "Storm — a 429 burst without quota headers: 60 % refused with Retry-After 1 s for 10 s",
	"5xx":        "Storm — a 5xx burst: 50 % HTML 502 for 10 s",
	"slow":       "Storm — a slowdown beyond the first-token timeout for 10 s",
	"flap":       "Storm — a flapping endpoint: 10 s up, 10 s down, for a minute",
	"flap5":      "Storm — a flapping endpoint: 5 s up, 5 s down, for 45 s",
	"two":        "Storm — two endpoints, one sick",
	"queuefull":  "Storm — queue_full on the primary model, the smaller one healthy",
	"sporadic":   "Storm — sporadic faults for the whole run: 5 % of requests hang or get a 502",
	"overloaded": "Storm — Anthropic's overload: 529 overloaded_error and overloaded streams on the primary model",
	"limit":      "Storm — a quota runs short: the primary model's rate limit falls to 3 requests/s for 10 s",
	"late":       "Storm — answers in the deadline's last 2 s: every model takes 18.3–19.3 s for 10 s",
}

// secondEndpoint are the models each case serves from a second endpoint.
var secondEndpoint = map[string][]string{"two": {"qwen-14b", "llama-8b"}}

// sickCapacity are the struck models of each case whose models have a
// capacity each (StormCase.SickCapacity).
var sickCapacity = map[string][]string{"overloaded": {"qwen-72b"}, "limit": {"qwen-72b"}}

// perModelLimits are the cases whose upstream limits each model apart, as
// providers do: durable-llm's policy says so (rate_limit_scope model), as
// an operator's would.
var perModelLimits = map[string]bool{"limit": true}

// Endpoint names of the storm reports.
const (
	EndpointShared = "the endpoint"
	EndpointA      = "endpoint A"
	EndpointB      = "endpoint B"
)

// Endpoints returns the case's endpoints, the sick one first, each with
// the models it serves.
func (c StormCase) Endpoints(models []string) []StormEndpoint {
	if len(c.SickCapacity) > 0 {
		sick := StormEndpoint{Name: "the struck model (" + strings.Join(c.SickCapacity, ", ") + ")", Models: c.SickCapacity}
		rest := StormEndpoint{Name: "the other models"}
		for _, m := range models {
			if !slices.Contains(c.SickCapacity, m) {
				rest.Models = append(rest.Models, m)
			}
		}
		return []StormEndpoint{sick, rest}
	}
	if len(c.SecondEndpoint) == 0 {
		return []StormEndpoint{{Name: EndpointShared, Models: models}}
	}
	a := StormEndpoint{Name: EndpointA}
	for _, m := range models {
		if !slices.Contains(c.SecondEndpoint, m) {
			a.Models = append(a.Models, m)
		}
	}
	return []StormEndpoint{a, {Name: EndpointB, Models: c.SecondEndpoint}}
}

// StormEndpoint is one upstream endpoint of a storm case.
type StormEndpoint struct {
	Name   string
	Models []string
}

// ModelURL is the base URL a client uses for model: the simulator's, or
// for a model of the second endpoint the same server under the name
// localhost.
func (c StormCase) ModelURL(baseURL, model string) string {
	if slices.Contains(c.SecondEndpoint, model) {
		return strings.Replace(baseURL, "127.0.0.1", "localhost", 1)
	}
	return baseURL
}

// LoadStormCase returns the storm case called name with its scenario from
// bench/scenarios/storm-<name>.yaml. deadline is the per-call deadline.
// short shrinks it for a smoke run: at most 3 s before the incident, at
// most 4 s of each incident phase and 6 s after it (a sporadic case: at
// most 8 s in all).
//
// A scenario of one phase with faults is a sporadic case: its incident is
// the whole run.
func LoadStormCase(name string, deadline time.Duration, short bool) (StormCase, error) {
	data, err := scenarioFS.ReadFile("scenarios/storm-" + name + ".yaml")
	if err != nil {
		return StormCase{}, fmt.Errorf("no storm case %q (have %s)", name, strings.Join(StormCaseNames, ", "))
	}
	return stormCaseFrom(name, data, deadline, short)
}

// stormCaseFrom is LoadStormCase for the scenario data of case name.
func stormCaseFrom(name string, data []byte, deadline time.Duration, short bool) (StormCase, error) {
	sc, err := llmsim.ParseScenario(data, "storm-"+name+".yaml")
	if err != nil {
		return StormCase{}, err
	}
	if sc.Load == nil || sc.Load.Rate <= 0 || len(sc.Phases) < 2 && (len(sc.Phases) == 0 || !sick(sc.Phases[0])) {
		return StormCase{}, fmt.Errorf("storm-%s.yaml: needs load.rate and a healthy phase, an incident phase and a recovered one, or one faulty phase for the whole run", name)
	}
	if len(sc.Phases) == 1 {
		return loadSporadic(name, sc, data, deadline, short)
	}
	// The incident is every phase between the first (healthy) and the
	// last (recovered).
	incident := sc.Phases[1 : len(sc.Phases)-1]
	if short {
		sc.Phases[0].Duration = min(sc.Phases[0].Duration, llmsim.Duration(3*time.Second))
		total := sc.Phases[0].Duration
		for i := range incident {
			incident[i].Duration = min(incident[i].Duration, llmsim.Duration(4*time.Second))
			total += incident[i].Duration
		}
		sc.Load.Duration = total + llmsim.Duration(6*time.Second)
		if data, err = marshalScenario(sc); err != nil {
			return StormCase{}, err
		}
	}
	start := sc.Phases[0].Duration.D()
	end := start
	for _, p := range incident {
		end += p.Duration.D()
	}
	c := StormCase{
		Name: name, Title: stormTitles[name], Scenario: data,
		Rate: sc.Load.Rate, Duration: sc.Load.Duration.D(), ClientTimeout: sc.Load.ClientTimeout.D(),
		StartToClose: 2 * time.Second, Deadline: deadline,
		IncidentStart: start, IncidentEnd: end,
		Tail: min(10*time.Second, sc.Load.Duration.D()/3), Metastable: name == "metastable",
		SecondEndpoint: secondEndpoint[name], SickCapacity: sickCapacity[name],
	}
	var at time.Duration
	for i, p := range sc.Phases {
		ph := StormPhase{Name: p.Name, Start: at, End: at + p.Duration.D(), Sick: sick(p)}
		if i == len(sc.Phases)-1 {
			ph.End = -1
		}
		c.Phases = append(c.Phases, ph)
		at = ph.End
	}
	for _, p := range incident {
		for _, f := range p.Faults {
			if f.Kind == llmsim.FaultRateLimited {
				c.RetryAfter = max(c.RetryAfter, f.RetryAfter.D(), time.Second)
			}
		}
	}
	return c, nil
}

// loadSporadic returns the case of a scenario whose one phase is faulty
// for the whole run.
func loadSporadic(name string, sc *llmsim.Scenario, data []byte, deadline time.Duration, short bool) (StormCase, error) {
	if short {
		sc.Load.Duration = min(sc.Load.Duration, llmsim.Duration(8*time.Second))
		var err error
		if data, err = marshalScenario(sc); err != nil {
			return StormCase{}, err
		}
	}
	d := sc.Load.Duration.D()
	return StormCase{
		Name: name, Title: stormTitles[name], Scenario: data,
		Rate: sc.Load.Rate, Duration: d, ClientTimeout: sc.Load.ClientTimeout.D(),
		StartToClose: 2 * time.Second, Deadline: deadline,
		IncidentStart: 0, IncidentEnd: d, Tail: min(10*time.Second, d/3),
		Phases:   []StormPhase{{Name: sc.Phases[0].Name, End: -1, Sick: true}},
		Sporadic: true, SecondEndpoint: secondEndpoint[name],
	}, nil
}

// scenario parses a fresh copy of the case's scenario.
func (c StormCase) scenario() (*llmsim.Scenario, error) {
	return llmsim.ParseScenario(c.Scenario, "storm-"+c.Name+".yaml")
}

// Contender keys accepted by StormOptions.Contenders.
const (
	KeyOneShot  = "oneshot"
	KeyNaive    = "naive"
	KeyBackoff  = "backoff"
	KeyOpenAIGo = "openai-go"
	KeyTemporal = "temporal"
	KeyLiteLLM  = "litellm"
	KeyDurable  = "durable"
	// KeyDurable3 is durable-llm with three workers on its task queue.
	KeyDurable3 = "durable3"
	// KeyDurableAnthropic is durable-llm with its ladder on the Anthropic
	// wire (api: anthropic, the simulator's Messages API).
	KeyDurableAnthropic = "durable-anthropic"
	// KeyImpatient is the one-shot client with first_token_timeout as its
	// timeout (the sweep's; not in StormContenders).
	KeyImpatient = "impatient"
)

// StormContenders lists the storm contenders' keys in the order they run.
var StormContenders = []string{KeyOneShot, KeyNaive, KeyBackoff, KeyOpenAIGo, KeyLiteLLM, KeyTemporal, KeyDurable, KeyDurable3}

// caseContenders are the contenders a case runs by default when they are
// not StormContenders: Anthropic's overload runs durable-llm on both
// wires, side by side.
var caseContenders = map[string][]string{
	"overloaded": append(slices.Clone(StormContenders), KeyDurableAnthropic),
}

// StormOptions configure RunStorm.
type StormOptions struct {
	// Temporal is a client of the dev server the Temporal baseline and
	// durable-llm run on; required for those two.
	Temporal client.Client
	// Contenders to run, by key; default StormContenders.
	Contenders []string
	// Progress receives one line per step; nil: silent.
	Progress io.Writer
	// Meter draws a bar per phase (cmd/bench); nil: none.
	Meter *progress.Display
	// Without are guard rules durable-llm's workers do not apply: a
	// rule's removal, measured (docs/benchmarks.md "What each rule earns").
	Without []guard.RuleName
	// Scope, when set, is durable-llm's rate_limit_scope for every model
	// (what its guard counts as one capacity: config.ModelConfig.Capacity).
	Scope config.RateLimitScope
}

// StormRun is one contender's run of a storm case.
type StormRun struct {
	Name, About string
	Outcomes    []Outcome
	Stats       llmsim.Stats
	Summary     StormSummary
	// TokensBilled are the tokens the upstream would bill for the run
	// (tokensBilled); counted for a case drawn per request only.
	TokensBilled int
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
		if own, ok := caseContenders[c.Name]; ok {
			keys = own
		}
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
			fmt.Fprintf(o.Progress, "  %-24s amp %.2f/%.2f sick %.2f answered %.1f%% model %.1f%% incident-model %.1f%% p50 %s p99 %s recovery %s\n",
				run.Name, s.AmpIncident, s.AmpOverall, s.SickAmpStretch, s.AnsweredPct, s.ByModelPct, s.IncidentByModelPct, fmtDur(s.P50), fmtDur(s.P99), s.RecoveryString())
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
	case KeyOneShot:
		return NewOneShot(baseURL, c.Deadline), nil
	case KeyImpatient:
		if c.FirstTokenTimeout <= 0 {
			return nil, fmt.Errorf("contender %q needs the case's first-token timeout", key)
		}
		return NewImpatientOneShot(baseURL, c.FirstTokenTimeout), nil
	case KeyNaive:
		return NewNaive(baseURL, c.ClientTimeout, c.Deadline), nil
	case KeyLiteLLM:
		return NewLiteLLM(func(m string) string { return c.ModelURL(baseURL, m) }, c.ClientTimeout, c.Deadline), nil
	case KeyBackoff:
		return NewBackoff(baseURL, c.ClientTimeout, c.Deadline), nil
	case KeyOpenAIGo:
		return NewOpenAIGo(baseURL, c.Deadline), nil
	case KeyTemporal:
		if err := needTemporal(); err != nil {
			return nil, err
		}
		return NewTemporalDefault(o.Temporal, baseURL, c.StartToClose, c.Deadline)
	case KeyDurable, KeyDurable3, KeyDurableAnthropic:
		if err := needTemporal(); err != nil {
			return nil, err
		}
		stops := c.stopsOnDisconnect()
		do := DurableOptions{Deadline: c.Deadline, Without: o.Without, Mutate: func(cfg *config.Config) {
			for i := range cfg.Models {
				cfg.Models[i].BaseURL = c.ModelURL(cfg.Models[i].BaseURL, cfg.Models[i].Name)
				if perModelLimits[c.Name] {
					cfg.Models[i].RateLimitScope = config.ScopeModel
				}
				if o.Scope != "" {
					cfg.Models[i].RateLimitScope = o.Scope
				}
				if stops {
					// The operator of a server that stops on disconnect
					// says so in the policy, as for vLLM.
					cfg.Models[i].StopsOnDisconnect = true
				}
				if key == KeyDurableAnthropic {
					// The Messages API lives at the server's root.
					cfg.Models[i].API, cfg.Models[i].Continuation = config.APIAnthropic, config.ContinueAuto
					cfg.Models[i].BaseURL = strings.TrimSuffix(cfg.Models[i].BaseURL, "/v1")
					// What rate_limit_scope auto is on api.anthropic.com:
					// Anthropic's capacity and limits are per model.
					cfg.Models[i].RateLimitScope = config.ScopeModel
				}
			}
		}}
		switch key {
		case KeyDurable3:
			do.Workers = 3
		case KeyDurableAnthropic:
			do.Name, do.About = NameDurableAnthropic, "as durable-llm, its ladder called through Anthropic's Go SDK (api: anthropic) on the simulator's Messages API, with rate_limit_scope model (what auto is on api.anthropic.com: the guard counts each model's capacity apart)"
		}
		return NewDurable(o.Temporal, baseURL, do)
	}
	return nil, fmt.Errorf("unknown contender %q (have %s)", key, strings.Join(StormContenders, ", "))
}

// warmups is the number of calls each contender makes before a run, so
// connections, pollers and caches are warm.
const warmups = 3

func runStormContender(ctx context.Context, c StormCase, key string, o StormOptions) (*StormRun, error) {
	return runContender(ctx, c, o, func(baseURL string) (*Contender, error) { return stormContender(c, key, baseURL, o) })
}

// runContender runs the contender newContender makes for the simulator's
// base URL on case c.
func runContender(ctx context.Context, c StormCase, o StormOptions, newContender func(baseURL string) (*Contender, error)) (*StormRun, error) {
	sc, err := c.scenario()
	if err != nil {
		return nil, err
	}
	so := llmsim.Options{Scenario: sc}
	// numbers maps the conversation keys of a case drawn per request to
	// their call, filled before each call starts.
	var numbers sync.Map
	if c.PerRequest {
		so.CallNumber = func(conv string) (int, bool) {
			i, ok := numbers.Load(conv)
			if !ok {
				return 0, false
			}
			return i.(int), true
		}
		so.KeepGenerations = 1 << 20 // every request, to count the tokens billed
	}
	sim, err := llmsim.NewServer(so)
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	con, err := newContender(sim.BaseURL)
	if err != nil {
		return nil, err
	}
	defer con.Close()
	if c.PerRequest && con.KeyOf == nil {
		return nil, fmt.Errorf("contender %q cannot name its calls' keys, which a case drawn per request needs", con.Name)
	}
	call := func(ctx context.Context, i int) Result {
		if c.PerRequest {
			numbers.Store(con.KeyOf(i), i)
		}
		return con.Call(ctx, i)
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "storm %s: %s (%s)…\n", c.Name, con.Name, con.About)
	}
	for i := 0; i < warmups; i++ {
		if r := call(ctx, 1_000_000+i); r.Err != nil && o.Progress != nil {
			fmt.Fprintf(o.Progress, "  warm-up call failed: %v\n", r.Err)
		}
	}
	sim.Reset() // the scenario's timeline and the stats start now
	step := o.Meter.Phase(fmt.Sprintf("storm %s: %s", c.Name, con.Name), int(c.Rate*c.Duration.Seconds()))
	outs, _ := OpenLoop(ctx, c.Rate, c.Duration, func(ctx context.Context, i int) Result {
		r := call(ctx, i)
		step.Add(1)
		return r
	})
	step.Done()
	st := sim.Stats()
	run := &StormRun{Name: con.Name, About: con.About, Outcomes: outs, Stats: st, Summary: Summarize(outs, st, c)}
	if c.PerRequest {
		// A request's generation is recorded as its handler returns,
		// moments after its client saw the end.
		sleepCtx(ctx, 300*time.Millisecond)
		run.TokensBilled = tokensBilled(sim.Generations(""), !c.stopsOnDisconnect())
	}
	return run, nil
}

// stopsOnDisconnect reports whether the case's server stops working on a
// request its client leaves (continue_on_disconnect: false, as vLLM).
func (c StormCase) stopsOnDisconnect() bool {
	sc, err := c.scenario()
	return err == nil && sc.ContinueOnDisconnect != nil && !*sc.ContinueOnDisconnect
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
	// The budget's stretch: from the incident's start to the last request
	// of a call started in it (their retries after the incident
	// included). StretchFirsts are the calls' first requests that reached
	// the upstream in it, AmpStretch every request in it (any call's)
	// per such first request: what a retry budget bounds, since the
	// budget is earned by first requests and spent by every other.
	// SickAmpStretch counts only the requests on the sick endpoint (the
	// first of Endpoints) per such first request: where a storm lands; a
	// request to a healthy endpoint is that endpoint's load.
	Stretch        time.Duration
	StretchFirsts  int
	AmpStretch     float64
	SickAmpStretch float64
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
	// IncidentByModelPct is the share of the calls started during the
	// incident that a model answered within their deadline.
	IncidentByModelPct float64
	// WorkingCalls are the calls started while the endpoint works (in a
	// phase without faults or changed latency) whose first request, if
	// any, reached it while it still worked; WorkingByModelPct the share
	// of them a model answered within their deadline; UpCalls and
	// UpByModelPct the same for the working phases inside the incident (a
	// flapping endpoint's up windows).
	WorkingCalls, UpCalls           int
	WorkingByModelPct, UpByModelPct float64
	// FirstFailed counts the calls whose first upstream request failed (an
	// injected fault, or no 200: the client gave up first, the connection
	// was reset), as llmsim recorded it; Healed those of them a model still
	// answered within their deadline (seed 002's self-heal).
	FirstFailed, Healed int
	// Recoveries holds, for each end of a fault (Case.FaultEnds), how long
	// until ≥ 99 % of the calls started from then until the next fault
	// were answered by a model within their deadline.
	Recoveries []Recovery
	// Endpoints is the load on each endpoint, the sick one first.
	Endpoints []EndpointLoad
	// Sources counts durable-llm's answer sources.
	Sources map[string]int
	// Upstream counts what llmsim answered: status codes, "499" (client gone
	// first), "reset".
	Upstream map[string]int
}

// Recovery is the recovery after one end of a fault.
type Recovery struct {
	// At is the end of the fault, from the start of the run.
	At time.Duration
	// Recovered reports whether ≥ 99 % model answers came back before the
	// next fault (or the run's end) left too few calls to judge; After is
	// how long after At.
	Recovered bool
	After     time.Duration
}

// String formats the recovery ("0 s", "1.40 s", "not in the window").
func (r Recovery) String() string {
	if !r.Recovered {
		return "not in the window"
	}
	return fmtDur(r.After)
}

// SelfHealPct is the share of the calls whose first request failed that a
// model still answered within their deadline; ok false when no first
// request failed.
func (s StormSummary) SelfHealPct() (pct float64, ok bool) {
	if s.FirstFailed == 0 {
		return 0, false
	}
	return 100 * float64(s.Healed) / float64(s.FirstFailed), true
}

// WorstRecovery is the longest recovery after a fault's end (a recovery
// that did not happen is the worst); ok false when no fault ended.
func (s StormSummary) WorstRecovery() (r Recovery, ok bool) {
	for i, x := range s.Recoveries {
		if i == 0 || r.Recovered && (!x.Recovered || x.After > r.After) {
			r = x
		}
	}
	return r, len(s.Recoveries) > 0
}

// budgetStretch measures the run over the retry budget's stretch (see
// StormSummary.Stretch): its length, the first requests in it, every
// request in it per first request, and the requests on the sick endpoint
// (to a model of sick; nil: every request, one endpoint) per first
// request (0 without one).
func budgetStretch(outs []Outcome, st llmsim.Stats, c StormCase, sick []string) (stretch time.Duration, firsts int, amp, sickAmp float64) {
	end := c.IncidentEnd
	for _, o := range outs {
		if o.Start < c.IncidentStart || o.Start >= c.IncidentEnd {
			continue
		}
		for _, r := range st.Conversations[o.Key].Requests {
			end = max(end, time.Duration(r.AtMS+1)*time.Millisecond)
		}
	}
	requests, onSick := 0, 0
	for _, cv := range st.Conversations {
		for _, r := range cv.Requests {
			if at := time.Duration(r.AtMS) * time.Millisecond; at < c.IncidentStart || at >= end {
				continue
			}
			requests++
			if sick == nil || slices.Contains(sick, r.Model) {
				onSick++
			}
			if r.N == 1 {
				firsts++
			}
		}
	}
	if firsts == 0 {
		return end - c.IncidentStart, 0, 0, 0
	}
	return end - c.IncidentStart, firsts, float64(requests) / float64(firsts), float64(onSick) / float64(firsts)
}

// SickPerIncidentCall is the requests the calls started in the incident
// sent to the sick endpoint (the first of Endpoints), per such call.
func (s StormSummary) SickPerIncidentCall() float64 {
	if len(s.Endpoints) == 0 {
		return 0
	}
	return s.Endpoints[0].AmpIncident
}

// HealthyPerIncidentCall is the requests the calls started in the
// incident sent to the healthy endpoints (every one but the first), per
// such call; ok false for a case of one endpoint.
func (s StormSummary) HealthyPerIncidentCall() (load float64, ok bool) {
	for _, ep := range s.Endpoints[min(1, len(s.Endpoints)):] {
		load += ep.AmpIncident
	}
	return load, len(s.Endpoints) > 1
}

// firstFailed reports whether the first upstream request of a
// conversation failed: llmsim injected a fault into it, or it ended in
// anything but a 200 (the client gave up first, the connection was reset,
// a status of the capacity model). ok false when the call sent none.
func firstFailed(cv llmsim.Conversation) (failed, ok bool) {
	if len(cv.Requests) == 0 {
		return false, false
	}
	first := cv.Requests[0]
	for _, r := range cv.Requests[1:] {
		if r.N < first.N {
			first = r
		}
	}
	return first.Fault != llmsim.FaultNone || first.Outcome != "200", true
}

// EndpointLoad is what one endpoint received in a run.
type EndpointLoad struct {
	StormEndpoint
	// Arrivals are the requests it received; AmpOverall per logical call,
	// AmpIncident the requests of the calls started during the incident
	// per such call, whenever they were sent.
	Arrivals                int
	AmpOverall, AmpIncident float64
	// InIncident are the requests that reached it during the incident
	// window, from any call; AmpInIncident those per call started in the
	// window: the load on the sick endpoint while it is sick, which the
	// retry budget bounds (its retries are paid by the requests of the
	// same stretch of time). It is below AmpIncident where calls wait out
	// the incident and send their retry after it, and above it where
	// calls started before the incident retry into it.
	InIncident    int
	AmpInIncident float64
}

// Summarize computes a run's storm metrics from the client-side outcomes
// and llmsim's stats.
func Summarize(outs []Outcome, st llmsim.Stats, c StormCase) StormSummary {
	s := StormSummary{Calls: len(outs), Sources: map[string]int{}, Upstream: st.Totals.Responses}
	if len(outs) == 0 {
		return s
	}
	var models []string
	if sc, err := c.scenario(); err == nil {
		for _, m := range sc.Models {
			models = append(models, m.Name)
		}
	}
	for _, ep := range c.Endpoints(models) {
		l := EndpointLoad{StormEndpoint: ep}
		for _, m := range ep.Models {
			l.Arrivals += st.Models[m].Arrivals
		}
		incident, incCalls := 0, 0
		for _, o := range outs {
			if o.Start >= c.IncidentStart && o.Start < c.IncidentEnd {
				incCalls++
				for _, r := range st.Conversations[o.Key].Requests {
					if slices.Contains(ep.Models, r.Model) {
						incident++
					}
				}
			}
		}
		for _, b := range st.Buckets {
			at := time.Duration(b.StartMS) * time.Millisecond
			if at < c.IncidentStart || at >= c.IncidentEnd {
				continue
			}
			for _, m := range ep.Models {
				l.InIncident += b.Models[m].Arrivals
			}
		}
		l.AmpOverall = float64(l.Arrivals) / float64(len(outs))
		if incCalls > 0 {
			l.AmpIncident = float64(incident) / float64(incCalls)
			l.AmpInIncident = float64(l.InIncident) / float64(incCalls)
		}
		s.Endpoints = append(s.Endpoints, l)
	}
	good := func(o Outcome) bool { return o.ByModel && o.Latency <= c.Deadline }
	// A call is judged by the phase it met: one started in a working phase
	// whose first request reached the endpoint in a sick one (a call starts
	// ~150 ms before its request leaves, longer on a busy machine) met the
	// fault, not the working endpoint.
	metFault := func(o Outcome) bool {
		reqs := st.Conversations[o.Key].Requests
		if len(reqs) == 0 {
			return false
		}
		working, _ := c.Working(time.Duration(reqs[0].AtMS) * time.Millisecond)
		return !working
	}
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
			if good(o) {
				s.IncidentByModelPct++
			}
		}
		if working, up := c.Working(o.Start); working && !metFault(o) {
			s.WorkingCalls++
			if good(o) {
				s.WorkingByModelPct++
			}
			if up {
				s.UpCalls++
				if good(o) {
					s.UpByModelPct++
				}
			}
		}
		if failed, ok := firstFailed(st.Conversations[o.Key]); ok && failed {
			s.FirstFailed++
			if good(o) {
				s.Healed++
			}
		}
	}
	ratio := func(n, of int) float64 {
		if of == 0 {
			return 0
		}
		return 100 * float64(n) / float64(of)
	}
	s.IncidentByModelPct = ratio(int(s.IncidentByModelPct), s.IncidentCalls)
	s.WorkingByModelPct = ratio(int(s.WorkingByModelPct), s.WorkingCalls)
	s.UpByModelPct = ratio(int(s.UpByModelPct), s.UpCalls)
	n := float64(len(outs))
	s.AnsweredPct, s.ByModelPct = 100*float64(answered)/n, 100*float64(byModel)/n
	lat := Latencies(outs)
	s.P50, s.P95, s.P99 = Percentile(lat, 0.50), Percentile(lat, 0.95), Percentile(lat, 0.99)
	if s.IncidentCalls > 0 {
		s.AmpIncident = float64(incAttempts) / float64(s.IncidentCalls)
	}
	s.AmpOverall = float64(st.Totals.Arrivals) / n
	var sick []string
	if len(s.Endpoints) > 1 {
		sick = s.Endpoints[0].Models
	}
	s.Stretch, s.StretchFirsts, s.AmpStretch, s.SickAmpStretch = budgetStretch(outs, st, c, sick)
	s.PeakToMean = st.PeakToMean()
	peak := 0
	for _, b := range st.Buckets {
		peak = max(peak, b.Arrivals)
	}
	s.PeakOverOffered = float64(peak) / (c.Rate * llmsim.BucketWidth.Seconds())
	minCalls := max(10, int(c.Rate*3))
	if !c.Sporadic {
		s.Recovery, s.Recovered = RecoveryTime(outs, c.IncidentEnd, good, 100*time.Millisecond, minCalls)
	}
	for _, e := range c.FaultEnds() {
		r := Recovery{At: e.At}
		judged := outs
		if e.Until >= 0 {
			judged = slices.DeleteFunc(slices.Clone(outs), func(o Outcome) bool { return o.Start < e.Until && metFault(o) })
		}
		r.After, r.Recovered = RecoveryWithin(judged, e.At, e.Until, good, 100*time.Millisecond, minCalls)
		s.Recoveries = append(s.Recoveries, r)
	}
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
	return RecoveryWithin(outs, from, -1, good, step, minCalls)
}

// RecoveryWithin is RecoveryTime over the calls started before until
// (< 0: no bound): the recovery after one fault, judged before the next.
func RecoveryWithin(outs []Outcome, from, until time.Duration, good func(Outcome) bool, step time.Duration, minCalls int) (time.Duration, bool) {
	var sorted []Outcome
	for _, o := range outs {
		if until < 0 || o.Start < until {
			sorted = append(sorted, o)
		}
	}
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

// RecoveryString formats the longest recovery after a fault's end ("0 s",
// "7.4 s", "not in run"; "n/a" when no fault ended).
func (s StormSummary) RecoveryString() string {
	r, ok := s.WorstRecovery()
	switch {
	case !ok:
		return "n/a"
	case !r.Recovered:
		return "not in run"
	}
	return fmtDur(r.After)
}
