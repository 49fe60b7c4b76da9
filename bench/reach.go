package bench

import (
	"math"
	"slices"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
)

// The reachable limit judges "answered by a model" against what the
// upstream allowed rather than against another client: from a case's
// fault schedule and arrival times alone, without a run, it finds the
// calls one request could have served within their deadline.

// ReachFault is how a request that meets the fault ends, as the reachable
// limit sees it.
type ReachFault int

const (
	// ReachLost: no answer (a refusal, a hang whose request is lost, a
	// stream cut before the end).
	ReachLost ReachFault = iota
	// ReachServedAtEnd: the request is held and answered when its fault
	// window ends (llmsim pause).
	ReachServedAtEnd
	// ReachLate: the request is answered late, but within the deadline (a
	// slow first byte below it).
	ReachLate
)

// Window is the stretch [Start, End) of a run.
type Window struct{ Start, End time.Duration }

// ReachSchedule is what the reachable limit is computed from.
type ReachSchedule struct {
	// Calls start every Interval from the run's start (OpenLoop): call i
	// at i × Interval; each has Deadline to be answered.
	Calls    int
	Interval time.Duration
	Deadline time.Duration
	// Ladder lists the models in order; a call's first request goes to
	// Ladder[0] when the call starts.
	Ladder []string
	// Sick lists the models the fault hits (those its endpoint serves).
	Sick []string
	// Down are the windows in which the fault is on, in order and apart
	// (one; one per down window of a flapping endpoint).
	Down []Window
	// Fault is how a request to a sick model in a window ends.
	Fault ReachFault
	// Spared, when set, reports that call i's first request, sent when it
	// starts, escapes a fault that hits only a share of the requests
	// (llmsim's draw for request 1 of call i); nil: every request to a
	// sick model in a window meets the fault.
	Spared func(call int) bool
	// AnswerTime is how long a healthy model takes to answer call i.
	AnswerTime func(call int, model string) time.Duration
}

// CallReach is the reachable limit of one call.
type CallReach struct {
	// Reachable: one request could have been answered by a model within
	// the deadline — the call's first request (not faulted, or answered
	// despite the fault), or a request to a ladder model at a moment of
	// [start, start + deadline − that model's answer time] when it is
	// outside the fault.
	Reachable bool
	// WithoutResend: reachable without a second request to a sick model
	// while the fault is on — the first request answered, a healthy model
	// on the ladder, or the fault over for good (its last window ended)
	// by start + deadline − the answer time. What it leaves out are the
	// calls only a resend into a flapping endpoint's up window serves.
	WithoutResend bool
}

// Reach computes the reachable limit of every call.
func (s ReachSchedule) Reach() []CallReach {
	out := make([]CallReach, s.Calls)
	for i := range out {
		out[i] = s.reach(i)
	}
	return out
}

func (s ReachSchedule) reach(i int) CallReach {
	start := time.Duration(i) * s.Interval
	last := start + s.Deadline
	both := CallReach{Reachable: true, WithoutResend: true}
	if len(s.Ladder) == 0 {
		return CallReach{}
	}
	first := s.Ladder[0]
	if w, in := s.window(start); !in || !slices.Contains(s.Sick, first) || s.Fault == ReachLate || s.Spared != nil && s.Spared(i) {
		if start+s.AnswerTime(i, first) <= last {
			return both
		}
	} else if s.Fault == ReachServedAtEnd && w.End+s.AnswerTime(i, first) <= last {
		return both
	}
	var r CallReach
	for _, m := range s.Ladder {
		latest := last - s.AnswerTime(i, m)
		switch {
		case latest < start:
		case !slices.Contains(s.Sick, m) || len(s.Down) == 0 || s.Down[len(s.Down)-1].End <= latest:
			return both
		default:
			// A flapping endpoint's up window: its downs end before the
			// last one does.
			for _, w := range s.Down {
				if w.End > start && w.End <= latest {
					r.Reachable = true
				}
			}
		}
	}
	return r
}

// window returns the window holding instant t.
func (s ReachSchedule) window(t time.Duration) (Window, bool) {
	for _, w := range s.Down {
		if t >= w.Start && t < w.End {
			return w, true
		}
	}
	return Window{}, false
}

// CountReach counts the calls reachable, and reachable without a resend.
func CountReach(r []CallReach) (reachable, withoutResend int) {
	for _, c := range r {
		if c.Reachable {
			reachable++
		}
		if c.WithoutResend {
			withoutResend++
		}
	}
	return reachable, withoutResend
}

// reachFaults maps llmsim's faults to how the reachable limit sees them;
// a fault not listed keeps the limit from being computed.
var reachFaults = map[llmsim.Fault]ReachFault{
	llmsim.FaultHang: ReachLost, llmsim.FaultPause: ReachServedAtEnd, llmsim.FaultLatency: ReachLate,
	llmsim.FaultRateLimited: ReachLost, llmsim.FaultQueueFull: ReachLost, llmsim.FaultUnavailable: ReachLost,
	llmsim.FaultBadGateway: ReachLost, llmsim.FaultCutStream: ReachLost,
}

// ReachSchedule is the case's schedule for the reachable limit, on
// durable-llm's ladder (the default policy's models; the LiteLLM-style
// router's as well). A phase that changes a model's latency makes that
// model sick. A healthy answer takes the request's own drawn time to first
// token in a case drawn per request (llmsim's draw for request 1 of the
// call), else the model's latency cap; the sweep's and storms' models are
// latency-only (the answer comes with its first token).
//
// ok is false where the schedule cannot say which calls one request
// serves: faults that hit a share of the requests of every ladder model
// in a case not drawn per request (llmsim then draws in arrival order), a
// latency change on every ladder model, a slow first byte not bounded
// below the deadline, sick phases that hit different models or fail
// differently, or a fault the limit does not know.
func (c StormCase) ReachSchedule() (ReachSchedule, bool) {
	sc, err := c.scenario()
	if err != nil || c.Rate <= 0 || len(c.Phases) != len(sc.Phases) {
		return ReachSchedule{}, false
	}
	specs := map[string]llmsim.ModelSpec{}
	var all []string
	for _, m := range sc.Models {
		specs[m.Name] = m
		all = append(all, m.Name)
	}
	s := ReachSchedule{Calls: int(c.Rate * c.Duration.Seconds()), Interval: time.Duration(float64(time.Second) / c.Rate),
		Deadline: c.Deadline}
	for _, m := range config.DefaultConfig().Models {
		if _, ok := specs[m.Name]; ok {
			s.Ladder = append(s.Ladder, m.Name)
		}
	}
	ttft := func(m string) llmsim.Latency {
		if t := specs[m].TTFT; t != nil {
			return *t
		}
		return specs[m].Latency
	}
	// partial: a fault hits only a share of the requests.
	partial := false
	kind, kinds := ReachLost, 0
	var sick, slowed []string
	for k, p := range sc.Phases {
		if !c.Phases[k].Sick {
			continue
		}
		var hit []string
		if p.Latency != nil {
			hit = slices.Clone(all)
		}
		for m := range p.ModelLatency {
			hit = append(hit, m)
		}
		slowed = append(slowed, hit...)
		for m := range p.RateLimit {
			// A limit refuses a share of the model's requests.
			hit, partial = append(hit, m), true
		}
		for _, f := range p.Faults {
			rf, known := reachFaults[f.Kind]
			if !known || f.First > 0 || kinds > 0 && rf != kind {
				return ReachSchedule{}, false
			}
			kind, kinds = rf, kinds+1
			if f.Model == "" || f.Model == "*" {
				hit = append(hit, all...)
			} else {
				hit = append(hit, f.Model)
			}
			partial = partial || f.Probability > 0 && f.Probability < 1
			if rf == ReachLate && (lateBound(f.Latency) <= 0 || slowest(specs, ttft)+lateBound(f.Latency) >= c.Deadline) {
				return ReachSchedule{}, false
			}
		}
		slices.Sort(hit)
		hit = slices.Compact(hit)
		if sick != nil && !slices.Equal(hit, sick) {
			return ReachSchedule{}, false
		}
		sick = hit
		end := c.Phases[k].End
		if end < 0 {
			end = time.Duration(math.MaxInt64)
		}
		if n := len(s.Down); n > 0 && s.Down[n-1].End == c.Phases[k].Start {
			s.Down[n-1].End = end
		} else {
			s.Down = append(s.Down, Window{Start: c.Phases[k].Start, End: end})
		}
	}
	s.Sick, s.Fault = sick, kind
	healthyRung := slices.ContainsFunc(s.Ladder, func(m string) bool { return !slices.Contains(sick, m) })
	if !slices.ContainsFunc(s.Ladder, func(m string) bool { return !slices.Contains(slowed, m) }) {
		return ReachSchedule{}, false // a latency change on every rung: how late is not known
	}
	if !c.PerRequest {
		if partial && !healthyRung {
			return ReachSchedule{}, false
		}
		s.AnswerTime = func(_ int, m string) time.Duration { return latencyCap(ttft(m)) }
		return s, true
	}
	s.AnswerTime = func(i int, m string) time.Duration {
		return ttft(m).Sample(llmsim.RequestDraw(sc.Seed, i, 1, llmsim.DrawFirstToken, 0, 0))
	}
	if partial {
		s.Spared = func(i int) bool { return spared(sc, c.Phases, s.Ladder[0], i, time.Duration(i)*s.Interval) }
	}
	return s, true
}

// Reach is the reachable limit of the case's calls; ok false where it
// cannot be computed (ReachSchedule).
func (c StormCase) Reach() ([]CallReach, bool) {
	s, ok := c.ReachSchedule()
	if !ok {
		return nil, false
	}
	return s.Reach(), true
}

// spared reports that call i's first request, sent at offset at to
// model, escapes every fault rule of the phase it lands in, as llmsim
// decides it for a scenario drawn per request: each rule that hits model
// is skipped only when it hits a share of the requests and the request's
// draw for it falls outside that share.
func spared(sc *llmsim.Scenario, phases []StormPhase, model string, i int, at time.Duration) bool {
	for k, ph := range phases {
		if !ph.contains(at) {
			continue
		}
		for j, f := range sc.Phases[k].Faults {
			if f.Model != "" && f.Model != "*" && f.Model != model {
				continue
			}
			if f.Probability <= 0 || f.Probability >= 1 || llmsim.RequestDraw(sc.Seed, i, 1, llmsim.DrawFault, k, j).Float64() < f.Probability {
				return false
			}
		}
		return true
	}
	return true
}

// slowest is the longest healthy answer of any model.
func slowest(specs map[string]llmsim.ModelSpec, ttft func(string) llmsim.Latency) time.Duration {
	var d time.Duration
	for m := range specs {
		d = max(d, latencyCap(ttft(m)))
	}
	return d
}

// lateBound is the longest delay a slow-first-byte fault adds: its cap,
// or its fixed value; 0 when it has none.
func lateBound(l llmsim.Latency) time.Duration {
	if l.Max > 0 {
		return l.Max.D()
	}
	if l.Dist == "" || l.Dist == llmsim.DistFixed {
		return l.Value.D()
	}
	return 0
}

// latencyCap is the longest time l draws: its cap, else its fixed value
// or uniform maximum, else three sigmas above its centre.
func latencyCap(l llmsim.Latency) time.Duration {
	switch {
	case l.Max > 0:
		return l.Max.D()
	case l.Dist == llmsim.DistNormal:
		return l.Mean.D() + 3*l.Stddev.D()
	case l.Dist == llmsim.DistLognormal:
		return time.Duration(float64(l.Median) * math.Exp(3*l.Sigma))
	}
	return l.Value.D()
}
