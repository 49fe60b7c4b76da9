package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
)

// The sweep judges durable-llm on incident shapes drawn from a seed
// rather than on the storm cases its guards were tuned on. Each shape is
// a storm case (one healthy lead, the incident, a recovered tail) whose
// fault, duration, arrival rate, latency spread, worker count, endpoint
// count and disconnect behaviour are drawn; four contenders meet it one
// after another, every one at the same arrival times and with the same
// fault for the n-th request of call i (StormCase.PerRequest), and are
// read against the reachable limit computed from the shape alone
// (StormCase.Reach).

// SweepFault is the kind of incident of a sweep shape.
type SweepFault string

// The sweep's incident kinds, drawn evenly.
const (
	// SweepHangLost: requests get no response at all (llmsim hang); the
	// server has lost them.
	SweepHangLost SweepFault = "hang-lost"
	// SweepHangServed: requests get nothing until the incident ends, then
	// are served (llmsim pause); the server stalled and resumed.
	SweepHangServed SweepFault = "hang-served"
	// SweepSlowFirstByte: the first byte comes late, but always before the
	// deadline minus the fallback reserve.
	SweepSlowFirstByte SweepFault = "slow-first-byte"
	// SweepRateLimited: 429 with a Retry-After.
	SweepRateLimited SweepFault = "429"
	// SweepBusy: 503 with the queue_full wording (a busy server's
	// refusal, which costs it nothing).
	SweepBusy SweepFault = "503-busy"
	// SweepBadGateway: a proxy's HTML 502.
	SweepBadGateway SweepFault = "502"
	// SweepResetMidStream: half the answer, then the connection is cut.
	SweepResetMidStream SweepFault = "reset-mid-stream"
	// SweepFlapping: the endpoint goes down and up again with a drawn
	// period.
	SweepFlapping SweepFault = "flapping"
)

// SweepFaults lists the incident kinds; every block of len(SweepFaults)
// consecutive shapes holds each once.
var SweepFaults = []SweepFault{SweepHangLost, SweepHangServed, SweepSlowFirstByte, SweepRateLimited, SweepBusy, SweepBadGateway, SweepResetMidStream, SweepFlapping}

// Sweep constants: the healthy stretch before and after each incident,
// and the least number of calls that start in an incident.
const (
	SweepLead             = 5 * time.Second
	SweepTail             = 10 * time.Second
	SweepMinIncidentCalls = 40
	// sweepMaxRate bounds the drawn arrival rate so that the benchmark
	// machine, not the upstream, is never the bottleneck.
	sweepMaxRate = 10.0
)

// SweepParams are the policy's numbers the shapes and the targets depend
// on.
type SweepParams struct {
	// Deadline is every call's deadline.
	Deadline time.Duration `json:"deadline"`
	// FallbackReserve is the policy's call.fallback_reserve: a slow first
	// byte is drawn below Deadline − FallbackReserve.
	FallbackReserve time.Duration `json:"fallback_reserve"`
	// FirstTokenTimeout is the policy's first_token_timeout of the first
	// model, the impatient one-shot's timeout.
	FirstTokenTimeout time.Duration `json:"first_token_timeout"`
	// Budget is the policy's retry budget, for the amplification bound.
	BudgetRatio  float64       `json:"budget_ratio"`
	BudgetFloor  int           `json:"budget_floor"`
	BudgetWindow time.Duration `json:"budget_window"`
}

// DefaultSweepParams are the default policy's numbers with deadline as
// the calls' deadline.
func DefaultSweepParams(deadline time.Duration) SweepParams {
	cfg := config.DefaultConfig()
	p := SweepParams{
		Deadline: deadline, FallbackReserve: cfg.Call.FallbackReserve.D(),
		BudgetRatio: cfg.Budget.Ratio, BudgetFloor: cfg.Budget.Floor, BudgetWindow: cfg.Budget.Window.D(),
	}
	if len(cfg.Models) > 0 {
		p.FirstTokenTimeout = cfg.Models[0].FirstTokenTimeout.D()
	}
	return p
}

// SweepShape is one drawn incident.
type SweepShape struct {
	// Seed and Index identify the shape: the same pair always draws the
	// same shape, however many shapes are drawn.
	Seed  uint64     `json:"seed"`
	Index int        `json:"index"`
	Fault SweepFault `json:"fault"`
	// Incident is the time from the incident's start to its end (for
	// flapping, from the first down window's start to the last one's end).
	Incident time.Duration `json:"incident"`
	// Rate is the arrival rate, calls per second.
	Rate float64 `json:"rate"`
	// Spread is the sigma of the lognormal time to first token of every
	// model (and of a slow first byte).
	Spread float64 `json:"spread"`
	// Workers is durable-llm's worker count (1 or 3); Endpoints the
	// upstream's (1: every model on one endpoint, which the fault hits;
	// 2: the first model alone on the sick endpoint).
	Workers   int `json:"workers"`
	Endpoints int `json:"endpoints"`
	// StopsOnDisconnect: the server stops working on a request its client
	// left (vLLM); else it finishes it (llmsim's default, most providers).
	StopsOnDisconnect bool `json:"stops_on_disconnect"`
	// Share is the probability that a request sent to the sick endpoint
	// during the incident meets the fault (1 for flapping).
	Share float64 `json:"share"`
	// RetryAfter and RetryHeader are a 429's advertised wait and how it
	// is written.
	RetryAfter  time.Duration `json:"retry_after,omitempty"`
	RetryHeader string        `json:"retry_header,omitempty"`
	// SlowMedian and SlowMax are a slow first byte's added delay (median,
	// and cap so that the first byte comes before SlowBound).
	SlowMedian time.Duration `json:"slow_median,omitempty"`
	SlowMax    time.Duration `json:"slow_max,omitempty"`
	// SlowBound is Deadline − FallbackReserve: every first byte of the
	// slow shape comes before it.
	SlowBound time.Duration `json:"slow_bound,omitempty"`
	// FlapUp, FlapDown and FlapCycles describe flapping: FlapCycles down
	// windows of FlapDown separated by up windows of FlapUp; FlapFault is
	// what a down window answers.
	FlapUp     time.Duration `json:"flap_up,omitempty"`
	FlapDown   time.Duration `json:"flap_down,omitempty"`
	FlapCycles int           `json:"flap_cycles,omitempty"`
	FlapFault  llmsim.Fault  `json:"flap_fault,omitempty"`
	// Deadline is every call's deadline; FirstTokenTimeout the impatient
	// one-shot's timeout.
	Deadline          time.Duration `json:"deadline"`
	FirstTokenTimeout time.Duration `json:"first_token_timeout"`
}

// sweepRNG is the random stream of one draw of the sweep: shape index's
// parameters, or the order of faults of block index.
func sweepRNG(seed uint64, what string, index int) *rand.Rand {
	h := uint64(14695981039346656037)
	for _, b := range []byte(what) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, h^uint64(index)*0x9e3779b97f4a7c15))
}

// sweepFault is the fault of shape index: each block of len(SweepFaults)
// shapes holds every fault once, in an order drawn from the seed.
func sweepFault(seed uint64, index int) SweepFault {
	n := len(SweepFaults)
	perm := sweepRNG(seed, "block", index/n).Perm(n)
	return SweepFaults[perm[index%n]]
}

// GenerateSweep draws shapes from..to (inclusive) of the sweep of seed.
// Shape i depends on seed, i and p only, so a sweep can run in parts.
func GenerateSweep(seed uint64, from, to int, p SweepParams) []SweepShape {
	var out []SweepShape
	for i := from; i <= to; i++ {
		out = append(out, DrawShape(seed, i, p))
	}
	return out
}

// DrawShape draws shape index of the sweep of seed.
func DrawShape(seed uint64, index int, p SweepParams) SweepShape {
	r := sweepRNG(seed, "shape", index)
	uniform := func(lo, hi float64) float64 { return lo + r.Float64()*(hi-lo) }
	round := func(d float64, unit time.Duration) time.Duration {
		return time.Duration(math.Round(d*float64(time.Second)/float64(unit))) * unit
	}
	s := SweepShape{Seed: seed, Index: index, Fault: sweepFault(seed, index), Deadline: p.Deadline, FirstTokenTimeout: p.FirstTokenTimeout}
	// Every parameter is drawn, in the same order, whatever the fault, so
	// that the fault alone does not shift the others.
	s.Incident = round(uniform(6, 30), 100*time.Millisecond)
	s.Spread = math.Round(uniform(0.1, 0.8)*100) / 100
	s.Workers = []int{1, 3}[r.IntN(2)]
	s.Endpoints = 1 + r.IntN(2)
	s.StopsOnDisconnect = r.IntN(2) == 1
	s.Share = 1
	if r.IntN(3) > 0 {
		s.Share = math.Round(uniform(0.2, 0.95)*100) / 100
	}
	retryAfter := round(uniform(0.5, 5), 100*time.Millisecond)
	retryHeader := []string{llmsim.RetryHeaderSeconds, llmsim.RetryHeaderMS, llmsim.RetryHeaderBoth}[r.IntN(3)]
	slowFrac := uniform(0.1, 0.9)
	flapPeriod := uniform(2, 20)
	flapDownShare := uniform(0.3, 0.7)
	flapSpan := uniform(12, 40)
	flapFault := []llmsim.Fault{llmsim.FaultUnavailable, llmsim.FaultBadGateway, llmsim.FaultHang}[r.IntN(3)]
	rateFrac := r.Float64()

	switch s.Fault {
	case SweepRateLimited:
		s.RetryAfter, s.RetryHeader = retryAfter, retryHeader
	case SweepSlowFirstByte:
		s.SlowBound = p.Deadline - p.FallbackReserve
		// The delay adds to the model's own time to first token, which
		// is at most its cap (healthyMax); the sum stays below the bound.
		top := max(0, s.SlowBound-healthyMax(s.Spread)-100*time.Millisecond)
		lo := min(time.Second, top/2)
		s.SlowMedian = round((lo + time.Duration(slowFrac*float64(top-lo))).Seconds(), 100*time.Millisecond)
		s.SlowMax = min(top, time.Duration(float64(s.SlowMedian)*math.Exp(2.5*s.Spread)))
		s.SlowMedian = min(s.SlowMedian, s.SlowMax)
	case SweepFlapping:
		period := round(flapPeriod, 100*time.Millisecond)
		s.FlapDown = round(period.Seconds()*flapDownShare, 100*time.Millisecond)
		s.FlapUp = period - s.FlapDown
		s.FlapCycles = max(2, int(math.Round(flapSpan/period.Seconds())))
		s.FlapFault = flapFault
		s.Share = 1
		s.Incident = time.Duration(s.FlapCycles)*s.FlapDown + time.Duration(s.FlapCycles-1)*s.FlapUp
	}
	// The rate: at least enough for SweepMinIncidentCalls calls to start
	// in the incident, at most sweepMaxRate.
	lo := min(sweepMaxRate, max(2, float64(SweepMinIncidentCalls)/s.Incident.Seconds()))
	s.Rate = math.Ceil((lo+rateFrac*(sweepMaxRate-lo))*10) / 10
	for s.IncidentCalls() < SweepMinIncidentCalls {
		s.Rate += 0.1
	}
	return s
}

// healthyMedian is the median time to first token of each model, as in
// the storm cases.
var healthyMedian = map[string]time.Duration{
	llmsim.ModelQwen72B: 400 * time.Millisecond,
	llmsim.ModelQwen14B: 250 * time.Millisecond,
	llmsim.ModelLlama8B: 150 * time.Millisecond,
}

// healthyMax is the cap of the slowest model's time to first token at
// spread sigma: three sigmas above its median.
func healthyMax(sigma float64) time.Duration {
	return time.Duration(float64(healthyMedian[llmsim.ModelQwen72B]) * math.Exp(3*sigma)).Round(time.Millisecond)
}

// Duration is how long calls arrive: the lead, the incident, the tail.
func (s SweepShape) Duration() time.Duration { return SweepLead + s.Incident + SweepTail }

// Calls is the number of calls of the run (OpenLoop's count).
func (s SweepShape) Calls() int { return int(s.Rate * s.Duration().Seconds()) }

// IncidentCalls is the number of calls that start in the incident: call
// i starts at i ÷ rate (OpenLoop).
func (s SweepShape) IncidentCalls() int {
	n := 0
	for i := range s.Calls() {
		at := time.Duration(float64(i) / s.Rate * float64(time.Second))
		if at >= SweepLead && at < SweepLead+s.Incident {
			n++
		}
	}
	return n
}

// Name is the shape's short name ("s1-07").
func (s SweepShape) Name() string { return fmt.Sprintf("s%d-%02d", s.Seed, s.Index) }

// Describe says what the shape is, in one line.
func (s SweepShape) Describe() string {
	var parts []string
	switch s.Fault {
	case SweepFlapping:
		parts = append(parts, fmt.Sprintf("flapping: %d × down %s (%s) / up %s", s.FlapCycles, fmtDur(s.FlapDown), s.FlapFault, fmtDur(s.FlapUp)))
	default:
		parts = append(parts, fmt.Sprintf("%s to %.0f %% of requests", s.Fault, 100*s.Share))
	}
	switch s.Fault {
	case SweepRateLimited:
		parts = append(parts, fmt.Sprintf("Retry-After %s (%s)", fmtDur(s.RetryAfter), s.RetryHeader))
	case SweepSlowFirstByte:
		parts = append(parts, fmt.Sprintf("first byte + lognormal(median %s, cap %s) < %s", fmtDur(s.SlowMedian), fmtDur(s.SlowMax), fmtDur(s.SlowBound)))
	}
	disc := "keeps generating on disconnect"
	if s.StopsOnDisconnect {
		disc = "stops on disconnect"
	}
	parts = append(parts, fmt.Sprintf("incident %s", fmtDur(s.Incident)), fmt.Sprintf("%.1f calls/s", s.Rate),
		fmt.Sprintf("σ %.2f", s.Spread), plural(s.Workers, "worker"), plural(s.Endpoints, "endpoint"), disc)
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Scenario is the shape's llmsim scenario.
func (s SweepShape) Scenario() *llmsim.Scenario {
	keep := !s.StopsOnDisconnect
	sc := &llmsim.Scenario{
		Name:                 "sweep-" + s.Name(),
		Description:          s.Describe(),
		Seed:                 s.Seed*1000 + uint64(s.Index),
		ContinueOnDisconnect: &keep,
		// The LiteLLM-style router's per-attempt timeout: the policy's
		// first_token_timeout, what the impatient one-shot waits too.
		Load: &llmsim.LoadHint{Rate: s.Rate, Duration: llmsim.Duration(s.Duration()), ClientTimeout: llmsim.Duration(cmp.Or(s.FirstTokenTimeout, time.Second)),
			Note: s.Describe()},
	}
	// Capacity is ample: it becomes the bottleneck only when a contender
	// multiplies its requests (there, a server that keeps generating for
	// clients that left fills its slots).
	slots := 200
	if s.Fault == SweepSlowFirstByte {
		slots = max(slots, int(math.Ceil(2*s.Rate*(s.SlowMax+healthyMax(s.Spread)).Seconds())))
	}
	for _, name := range []string{llmsim.ModelQwen72B, llmsim.ModelQwen14B, llmsim.ModelLlama8B} {
		med := healthyMedian[name]
		sc.Models = append(sc.Models, llmsim.ModelSpec{Name: name, Slots: slots,
			Latency: llmsim.Latency{Dist: llmsim.DistLognormal, Median: llmsim.Duration(med), Sigma: s.Spread,
				Max: llmsim.Duration(time.Duration(float64(med) * math.Exp(3*s.Spread)).Round(time.Millisecond))}})
	}
	model := "" // one endpoint: the fault hits every model
	if s.Endpoints == 2 {
		model = llmsim.ModelQwen72B // the sick endpoint A serves the first model alone
	}
	sc.Phases = append(sc.Phases, llmsim.Phase{Name: "healthy", Duration: llmsim.Duration(SweepLead)})
	if s.Fault == SweepFlapping {
		for k := range s.FlapCycles {
			if k > 0 {
				sc.Phases = append(sc.Phases, llmsim.Phase{Name: fmt.Sprintf("up-%d", k+1), Duration: llmsim.Duration(s.FlapUp)})
			}
			sc.Phases = append(sc.Phases, llmsim.Phase{Name: fmt.Sprintf("down-%d", k+1), Duration: llmsim.Duration(s.FlapDown),
				Faults: []llmsim.FaultSpec{{Kind: s.FlapFault, Model: model}}})
		}
	} else {
		f := llmsim.FaultSpec{Model: model, Probability: s.Share}
		switch s.Fault {
		case SweepHangLost:
			f.Kind = llmsim.FaultHang
		case SweepHangServed:
			f.Kind = llmsim.FaultPause
		case SweepSlowFirstByte:
			f.Kind = llmsim.FaultLatency
			f.Latency = llmsim.Latency{Dist: llmsim.DistLognormal, Median: llmsim.Duration(s.SlowMedian), Sigma: s.Spread, Max: llmsim.Duration(s.SlowMax)}
		case SweepRateLimited:
			f.Kind, f.RetryAfter, f.RetryHeader = llmsim.FaultRateLimited, llmsim.Duration(s.RetryAfter), s.RetryHeader
		case SweepBusy:
			f.Kind, f.Status = llmsim.FaultQueueFull, 503
		case SweepBadGateway:
			f.Kind = llmsim.FaultBadGateway
		case SweepResetMidStream:
			f.Kind = llmsim.FaultCutStream
		}
		sc.Phases = append(sc.Phases, llmsim.Phase{Name: string(s.Fault), Duration: llmsim.Duration(s.Incident), Faults: []llmsim.FaultSpec{f}})
	}
	sc.Phases = append(sc.Phases, llmsim.Phase{Name: "recovered"})
	return sc
}

// Case is the shape as a storm case the storm runner runs.
func (s SweepShape) Case() (StormCase, error) {
	data, err := marshalScenario(s.Scenario())
	if err != nil {
		return StormCase{}, err
	}
	c, err := stormCaseFrom(s.Name(), data, s.Deadline, false)
	if err != nil {
		return StormCase{}, err
	}
	c.Title = "Sweep " + s.Name() + " — " + s.Describe()
	c.PerRequest, c.FirstTokenTimeout = true, s.FirstTokenTimeout
	c.SecondEndpoint = nil
	if s.Endpoints == 2 {
		c.SecondEndpoint = []string{llmsim.ModelQwen14B, llmsim.ModelLlama8B}
	}
	return c, nil
}

// Contenders are the keys of the shape's contenders: the one-shot, the
// impatient one-shot, the LiteLLM-style router and durable-llm with the
// shape's workers.
func (s SweepShape) Contenders() []string {
	durable := KeyDurable
	if s.Workers > 1 {
		durable = KeyDurable3
	}
	return []string{KeyOneShot, KeyImpatient, KeyLiteLLM, durable}
}

// SweepScore is one contender's result on one shape.
type SweepScore struct {
	Name string `json:"name"`
	// Calls are the calls of the run; ByModel those whose first complete
	// model answer came within the deadline; Preferred those of them
	// answered by the preferred model (the ladder's first rung).
	Calls     int `json:"calls"`
	ByModel   int `json:"by_model"`
	Preferred int `json:"preferred"`
	// IncidentCalls started in the incident; IncidentByModel of them were
	// answered by a model within the deadline.
	IncidentCalls   int `json:"incident_calls"`
	IncidentByModel int `json:"incident_by_model"`
	// TokensBilled are the tokens the upstream billed for the run.
	TokensBilled int `json:"tokens_billed"`
	// Amplification is every request on every endpoint over the retry
	// budget's stretch (StormSummary.AmpStretch) per first request in
	// it; SickAmplification only the requests on the sick endpoint (the
	// one endpoint, or the first model's of two) per first request, which
	// the budget's bound judges; StretchFirsts and Stretch are those
	// first requests and the stretch's length, which the bound is
	// computed over.
	Amplification     float64       `json:"amplification"`
	SickAmplification float64       `json:"sick_amplification"`
	StretchFirsts     int           `json:"stretch_firsts"`
	Stretch           time.Duration `json:"stretch"`
	// SickPerCall and HealthyPerCall are the requests the calls started
	// in the incident sent to the sick endpoint and to the healthy one (0
	// with one endpoint), per such call.
	SickPerCall    float64 `json:"sick_per_call"`
	HealthyPerCall float64 `json:"healthy_per_call"`
	// WithoutResendByModel are the calls reachable without a resend on
	// the sick endpoint (CallReach.WithoutResend) that were answered by a
	// model within the deadline.
	WithoutResendByModel int `json:"without_resend_by_model"`
	// IncidentAmplification is the older measure: the requests the
	// incident's calls sent, per incident call (their retries after the
	// incident included, though the budget that paid those was earned
	// by the traffic after it).
	IncidentAmplification float64 `json:"incident_amplification"`
}

// ByModelPct is the share of calls answered by a model within the
// deadline.
func (s SweepScore) ByModelPct() float64 { return ratioPct(s.ByModel, s.Calls) }

// PreferredPct is the share of calls the preferred model answered within
// the deadline.
func (s SweepScore) PreferredPct() float64 { return ratioPct(s.Preferred, s.Calls) }

// TokensPerAnswer are the tokens billed per call answered by a model (0
// when none was).
func (s SweepScore) TokensPerAnswer() float64 {
	if s.ByModel == 0 {
		return 0
	}
	return float64(s.TokensBilled) / float64(s.ByModel)
}

func ratioPct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// ScoreRun scores one contender's storm run of case c, whose calls'
// reachable limit is reach.
func ScoreRun(run StormRun, c StormCase, reach []CallReach) SweepScore {
	sum := run.Summary
	sc := SweepScore{Name: run.Name, Calls: len(run.Outcomes), TokensBilled: run.TokensBilled,
		Amplification: sum.AmpStretch, SickAmplification: sum.SickAmpStretch, StretchFirsts: sum.StretchFirsts, Stretch: sum.Stretch,
		SickPerCall: sum.SickPerIncidentCall(), IncidentAmplification: sum.AmpIncident}
	sc.HealthyPerCall, _ = sum.HealthyPerIncidentCall()
	for _, o := range run.Outcomes {
		good := answeredByModel(o, c.Deadline)
		incident := o.Start >= c.IncidentStart && o.Start < c.IncidentEnd
		if good {
			sc.ByModel++
			if o.Model == Model {
				sc.Preferred++
			}
			if o.I < len(reach) && reach[o.I].WithoutResend {
				sc.WithoutResendByModel++
			}
		}
		if incident {
			sc.IncidentCalls++
			if good {
				sc.IncidentByModel++
			}
		}
	}
	return sc
}

// answeredByModel reports a call whose first complete model answer came
// within the deadline: not the fallback, not a degraded partial text.
func answeredByModel(o Outcome, deadline time.Duration) bool {
	return o.ByModel && !o.Degraded && o.Latency <= deadline
}

// tokensBilled are the tokens an upstream bills for the generations gens:
// the prompt and completion tokens of every request it took into a
// model's queue. A server that keeps generating for a client that left
// (keepWorking) bills the whole answer; one that stops bills the prompt
// of a request that got a slot and the completion tokens it generated
// before it stopped (those it sent), and nothing for one whose client
// left while it waited for a slot. Refusals and hangs generate nothing.
func tokensBilled(gens []llmsim.Generation, keepWorking bool) int {
	n := 0
	for _, g := range gens {
		switch {
		case keepWorking:
			n += g.PromptTokens + g.CompletionTokens
		case g.Service == 0 && g.TTFT == 0:
			// never got a slot
		case g.End == llmsim.EndDone || g.End == llmsim.EndError || g.End == llmsim.EndStreamError:
			n += g.PromptTokens + g.CompletionTokens
		default:
			n += g.PromptTokens + g.SentTokens
		}
	}
	return n
}

// SweepOutcome is one shape's result and its judgement.
type SweepOutcome struct {
	Shape SweepShape `json:"shape"`
	// Calls are the shape's calls; Reachable those one request could
	// have served (CallReach.Reachable); WithoutResend those reachable
	// without a resend on the sick endpoint, on which durable-llm's share
	// is judged.
	Calls         int `json:"calls"`
	Reachable     int `json:"reachable"`
	WithoutResend int `json:"without_resend"`
	// OneShot, Impatient, LiteLLM and Durable are the contenders' scores.
	OneShot   SweepScore `json:"one_shot"`
	Impatient SweepScore `json:"impatient"`
	LiteLLM   SweepScore `json:"litellm"`
	Durable   SweepScore `json:"durable"`
	// Bound is the amplification on the sick endpoint the retry budget
	// guarantees; HealthyBound the requests on the healthy endpoint per
	// call started in the incident durable-llm may send: 1 + the budget's
	// ratio.
	Bound        float64 `json:"bound"`
	HealthyBound float64 `json:"healthy_bound"`
	// Partial reports a fault that hits a share of the requests (llmsim's
	// draw per request), on one endpoint: a call cannot tell in advance
	// whether its first request will meet it. BoundLimit is then the most
	// calls a client within the amplification bound could have answered
	// by a model, sending each call's first request when the call starts
	// (BoundLimit); else WithoutResend.
	Partial    bool `json:"partial,omitempty"`
	BoundLimit int  `json:"bound_limit,omitempty"`
	// Judgement of durable-llm.
	Judgement SweepJudgement `json:"judgement"`
	// Elapsed is how long the shape took to run; Date when it ran.
	Elapsed time.Duration `json:"elapsed"`
	Date    time.Time     `json:"date"`
}

// Rivals are the scores durable-llm is compared with: both one-shots and
// the LiteLLM-style router.
func (o SweepOutcome) Rivals() []SweepScore { return []SweepScore{o.OneShot, o.Impatient, o.LiteLLM} }

// ReachablePct is the share of the shape's calls one request could have
// served.
func (o SweepOutcome) ReachablePct() float64 { return ratioPct(o.Reachable, o.Calls) }

// WithoutResendPct is the share of the shape's calls reachable without a
// resend on the sick endpoint.
func (o SweepOutcome) WithoutResendPct() float64 { return ratioPct(o.WithoutResend, o.Calls) }

// SweepJudgement is the judgement of one shape.
type SweepJudgement struct {
	// ReachShare is the share of the calls reachable without a resend on
	// the sick endpoint that durable-llm answered by a model (1 when
	// there is none); ReachOK reports it ≥ SweepReachShare.
	ReachShare float64 `json:"reach_share"`
	ReachOK    bool    `json:"reach_ok"`
	// Best is the best rival's count of calls answered by a model, and
	// BestName that rival.
	Best     int    `json:"best"`
	BestName string `json:"best_name"`
	// Differ reports that the four contenders did not answer the same
	// number of calls.
	Differ bool `json:"differ"`
	// AtLeast reports durable-llm answered at least as many as Best.
	AtLeast bool `json:"at_least"`
	// Margin is the one-sided 95 % binomial margin in calls; Allowed is
	// max(1, Margin): how far below Best durable-llm may fall.
	Margin  float64 `json:"margin"`
	Allowed float64 `json:"allowed"`
	// WithinMargin reports Best − durable-llm ≤ Allowed.
	WithinMargin bool `json:"within_margin"`
	// AmplificationOK reports durable-llm's amplification on the sick
	// endpoint ≤ the bound; HealthyOK its requests on the healthy
	// endpoint per call started in the incident ≤ the healthy bound.
	AmplificationOK bool `json:"amplification_ok"`
	HealthyOK       bool `json:"healthy_ok"`
	// BoundShare is, where the fault hits a share of one endpoint's
	// requests (SweepOutcome.Partial), the share of the bound's limit
	// durable-llm answered by a model; BoundOK reports it ≥
	// SweepReachShare: a shape below ReachShare but BoundOK misses only
	// what no client within the amplification bound could have answered.
	BoundShare float64 `json:"bound_share,omitempty"`
	BoundOK    bool    `json:"bound_ok,omitempty"`
}

// Met reports whether durable-llm met every target on the shape.
func (j SweepJudgement) Met() bool {
	return j.ReachOK && j.AtLeast && j.WithinMargin && j.AmplificationOK && j.HealthyOK
}

// z95 is the one-sided 95 % quantile of the standard normal.
const z95 = 1.6448536269514722

// BinomialMargin is the one-sided 95 % margin, in calls, of the
// difference between two counts a and b of successes out of n calls
// each: z₀.₉₅ · √(2·n·p·(1−p)) with the pooled share p = (a+b) ÷ 2n, the
// normal approximation of the two-proportion test. A shortfall within it
// is what chance alone produces on a shape where both contenders answer
// alike.
func BinomialMargin(n, a, b int) float64 {
	if n <= 0 {
		return 0
	}
	p := float64(a+b) / float64(2*n)
	return z95 * math.Sqrt(2*float64(n)*p*(1-p))
}

// AmplificationBound is what the retry budgets guarantee for calls calls
// started in an incident of length incident on a ladder over endpoints
// endpoints: 1 + ratio + endpoints × floor × ⌈incident ÷ window⌉ ÷ calls
// requests per call. Each endpoint has a budget of its own, so each
// brings its floor; Judge compares the bound with the amplification on
// the sick endpoint (a call that moves to a healthy endpoint is no storm
// on the sick one).
func AmplificationBound(ratio float64, floor, endpoints int, window, incident time.Duration, calls int) float64 {
	if calls <= 0 || window <= 0 {
		return math.Inf(1)
	}
	windows := math.Ceil(incident.Seconds() / window.Seconds())
	return 1 + ratio + float64(max(endpoints, 1)*floor)*windows/float64(calls)
}

// Judge judges durable-llm on one shape: against the calls reachable
// without a resend on the sick endpoint, against the best of its rivals
// (by calls answered by a model within the deadline), and against the
// bounds on the sick and the healthy endpoints.
func Judge(o SweepOutcome) SweepJudgement {
	d := o.Durable
	j := SweepJudgement{ReachShare: 1}
	if o.WithoutResend > 0 {
		j.ReachShare = float64(d.WithoutResendByModel) / float64(o.WithoutResend)
	}
	j.ReachOK = j.ReachShare >= SweepReachShare
	n := d.Calls
	for k, r := range o.Rivals() {
		if k == 0 || r.ByModel > j.Best {
			j.Best, j.BestName = r.ByModel, r.Name
		}
		j.Differ = j.Differ || r.ByModel != d.ByModel
		n = max(n, r.Calls)
	}
	j.AtLeast = d.ByModel >= j.Best
	j.Margin = BinomialMargin(n, j.Best, d.ByModel)
	j.Allowed = math.Max(1, j.Margin)
	j.WithinMargin = float64(j.Best-d.ByModel) <= j.Allowed
	j.AmplificationOK = d.SickAmplification <= o.Bound
	j.HealthyOK = d.HealthyPerCall <= o.HealthyBound
	if o.Partial && o.BoundLimit > 0 {
		j.BoundShare = float64(d.WithoutResendByModel) / float64(o.BoundLimit)
		j.BoundOK = j.BoundShare >= SweepReachShare
	}
	return j
}

// BoundLimit is the most calls a client could have answered by a model
// on a shape whose fault hits a share of one endpoint's requests, if it
// sends each call's first request when the call starts (it cannot know
// which will meet the fault) and keeps its amplification on that endpoint
// within bound: the calls whose first request was answered (answered,
// the one-shot's count, on the same draws), and one more per request the
// bound leaves over the stretch's first requests, each resend answering a
// call at best; never more than withoutResend.
func BoundLimit(firstAnswered, withoutResend int, bound float64, stretchFirsts int) int {
	extra := int(math.Floor((bound - 1) * float64(stretchFirsts)))
	return min(withoutResend, firstAnswered+max(extra, 0))
}

// SweepReachShare is the least share of the calls reachable without a
// resend on the sick endpoint durable-llm must answer by a model in every
// shape; SweepWinShare the least share of the shapes where the contenders
// differ in which it must answer at least as many calls as its best
// rival.
const (
	SweepReachShare = 0.95
	SweepWinShare   = 0.95
)

// SweepVerdict is the judgement of a whole sweep (or of the part run).
type SweepVerdict struct {
	Shapes int `json:"shapes"`
	// BelowReach lists the shapes where durable-llm answered fewer than
	// SweepReachShare of the calls reachable without a resend; BoundLimited
	// those of them where it answered at least SweepReachShare of the
	// bound's limit (SweepJudgement.BoundOK).
	BelowReach   []int `json:"below_reach"`
	BoundLimited []int `json:"bound_limited"`
	// Differ are the shapes where the contenders differ; AtLeast those of
	// them where durable-llm answered at least as many as its best rival.
	Differ  int `json:"differ"`
	AtLeast int `json:"at_least"`
	// BelowMargin lists the shapes where durable-llm fell below its best
	// rival by more than the allowed margin; OverBound those where its
	// amplification on the sick endpoint exceeded the bound; OverHealthy
	// those where its requests on the healthy endpoint exceeded theirs.
	BelowMargin []int `json:"below_margin"`
	OverBound   []int `json:"over_bound"`
	OverHealthy []int `json:"over_healthy"`
	// The targets.
	ReachMet   bool `json:"reach_met"`
	WinsMet    bool `json:"wins_met"`
	MarginMet  bool `json:"margin_met"`
	BoundMet   bool `json:"bound_met"`
	HealthyMet bool `json:"healthy_met"`
}

// Met reports every target met.
func (v SweepVerdict) Met() bool {
	return v.ReachMet && v.WinsMet && v.MarginMet && v.BoundMet && v.HealthyMet
}

// Verdict judges the sweep's outcomes.
func Verdict(outs []SweepOutcome) SweepVerdict {
	v := SweepVerdict{Shapes: len(outs), BelowReach: []int{}, BoundLimited: []int{}, BelowMargin: []int{}, OverBound: []int{}, OverHealthy: []int{}}
	miss := func(list *[]int, ok bool, i int) {
		if !ok {
			*list = append(*list, i)
		}
	}
	for _, o := range outs {
		j, i := o.Judgement, o.Shape.Index
		if j.Differ {
			v.Differ++
			if j.AtLeast {
				v.AtLeast++
			}
		}
		miss(&v.BelowReach, j.ReachOK, i)
		if !j.ReachOK && j.BoundOK {
			v.BoundLimited = append(v.BoundLimited, i)
		}
		miss(&v.BelowMargin, j.WithinMargin, i)
		miss(&v.OverBound, j.AmplificationOK, i)
		miss(&v.OverHealthy, j.HealthyOK, i)
	}
	v.ReachMet = len(v.BelowReach) == 0
	v.WinsMet = v.Differ == 0 || float64(v.AtLeast) >= SweepWinShare*float64(v.Differ)
	v.MarginMet = len(v.BelowMargin) == 0
	v.BoundMet = len(v.OverBound) == 0
	v.HealthyMet = len(v.OverHealthy) == 0
	return v
}

// String is the verdict line.
func (v SweepVerdict) String() string {
	share := 100.0
	if v.Differ > 0 {
		share = 100 * float64(v.AtLeast) / float64(v.Differ)
	}
	all := "every target met"
	if !v.Met() {
		all = "a target NOT met"
	}
	limited := ""
	if len(v.BoundLimited) > 0 {
		limited = fmt.Sprintf(" (of them, at least %.0f %% of the bound's limit, what a client within the amplification bound that sends each call's first request when it starts could answer: %s)",
			100*SweepReachShare, strings.TrimPrefix(strings.TrimSuffix(shapeList(v.BoundLimited), ")"), "(NOT met: "))
	}
	return fmt.Sprintf("verdict over %d shapes: durable-llm answered by a model fewer than %.0f %% of the calls reachable without a resend on the sick endpoint in %d %s%s; "+
		"≥ the best of one-shot, impatient one-shot and LiteLLM-style in %d of the %d shapes where they differ (%.1f %%, target ≥ %.0f %%: %s); "+
		"below it by more than max(1 call, the binomial margin) in %d %s; amplification on the sick endpoint over the budget's bound in %d %s; "+
		"requests on the healthy endpoint over 1 + ratio per call started in the incident in %d %s → %s",
		v.Shapes, 100*SweepReachShare, len(v.BelowReach), shapeList(v.BelowReach), limited,
		v.AtLeast, v.Differ, share, 100*SweepWinShare, met(v.WinsMet),
		len(v.BelowMargin), shapeList(v.BelowMargin), len(v.OverBound), shapeList(v.OverBound),
		len(v.OverHealthy), shapeList(v.OverHealthy), all)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// shapeList says a target met when no shape misses it, else which miss.
func shapeList(idx []int) string {
	if len(idx) == 0 {
		return "(met)"
	}
	var s []string
	for _, i := range idx {
		s = append(s, fmt.Sprint(i))
	}
	return "(NOT met: shapes " + strings.Join(s, ", ") + ")"
}

// SweepOptions configure RunSweepShape.
type SweepOptions struct {
	StormOptions
	Params SweepParams
	// CallsDir, when set, receives each shape's calls, every contender's,
	// as seed<seed>-shape<index>.csv (StormReport.WriteCSV): how each call
	// went, to explain a shape call by call.
	CallsDir string
}

// RunSweepShape runs the four contenders on shape s, one after another,
// and judges durable-llm.
func RunSweepShape(ctx context.Context, s SweepShape, o SweepOptions) (*SweepOutcome, error) {
	c, err := s.Case()
	if err != nil {
		return nil, err
	}
	reach, ok := c.Reach()
	if !ok {
		return nil, fmt.Errorf("sweep %s: the shape's reachable limit cannot be computed", s.Name())
	}
	began := time.Now()
	so := o.StormOptions
	so.Contenders = s.Contenders()
	rep, err := RunStorm(ctx, c, so)
	if err != nil {
		return nil, err
	}
	if len(rep.Runs) != len(so.Contenders) {
		return nil, fmt.Errorf("sweep %s: %d runs, want %d", s.Name(), len(rep.Runs), len(so.Contenders))
	}
	if o.CallsDir != "" {
		if err := writeSweepCalls(o.CallsDir, s, rep); err != nil {
			return nil, err
		}
	}
	score := func(k int) SweepScore { return ScoreRun(rep.Runs[k], c, reach) }
	out := &SweepOutcome{Shape: s, Date: began, Calls: len(reach),
		OneShot: score(0), Impatient: score(1), LiteLLM: score(2), Durable: score(3)}
	out.Reachable, out.WithoutResend = CountReach(reach)
	out.Bound = AmplificationBound(o.Params.BudgetRatio, o.Params.BudgetFloor, s.Endpoints, o.Params.BudgetWindow, out.Durable.Stretch, out.Durable.StretchFirsts)
	out.HealthyBound = 1 + o.Params.BudgetRatio
	if rs, ok := c.ReachSchedule(); ok && rs.Spared != nil && s.Endpoints == 1 {
		out.Partial = true
		out.BoundLimit = BoundLimit(out.OneShot.ByModel, out.WithoutResend, out.Bound, out.Durable.StretchFirsts)
	}
	out.Judgement = Judge(*out)
	out.Elapsed = time.Since(began)
	return out, nil
}

// writeSweepCalls writes rep's calls for shape s into dir.
func writeSweepCalls(dir string, s SweepShape, rep *StormReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("seed%d-shape%d.csv", s.Seed, s.Index)))
	if err != nil {
		return err
	}
	if err := rep.WriteCSV(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
