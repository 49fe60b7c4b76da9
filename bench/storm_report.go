package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
)

// Header returns the report's header: the case and the scenario's
// parameters.
func (r *StormReport) Header(command string, m Machine, date time.Time) Header {
	c := r.Case
	params := []string{
		fmt.Sprintf("load: %g calls/s, constant arrival rate (open loop: a ticker starts calls whether or not earlier ones finished), for %s; each contender against its own fresh llmsim with the same scenario and seed, one after another",
			c.Rate, fmtDur(c.Duration)),
		fmt.Sprintf("incident window: %s → %s after the start; deadline per call: %s (every contender)", fmtDur(c.IncidentStart), fmtDur(c.IncidentEnd), fmtDur(c.Deadline)),
		fmt.Sprintf("naive, backoff and LiteLLM-style per-attempt timeout: %s; one-shot: one request, the deadline as its timeout; Temporal baseline StartToClose: %s", fmtDur(c.ClientTimeout), fmtDur(c.StartToClose)),
	}
	if c.Sporadic {
		params[1] = fmt.Sprintf("incident window: the whole run (the fault is sporadic); deadline per call: %s (every contender)", fmtDur(c.Deadline))
	}
	if sc, err := c.scenario(); err == nil {
		params = append(params, "scenario `"+sc.Name+"` (bench/scenarios/storm-"+c.Name+".yaml): "+strings.Join(strings.Fields(sc.Description), " "))
		for _, l := range describeScenario(sc) {
			params = append(params, "  - "+l)
		}
	}
	return Header{Title: c.Title, Command: command, Machine: m, Date: date, Params: params}
}

// Table returns the storm table: one row per contender, after a row for
// the reachable limit where the case's schedule gives it (StormCase.Reach).
func (r *StormReport) Table() Table {
	two := len(r.Case.SecondEndpoint) > 0 || len(r.Case.SickCapacity) > 0
	cols := []string{"contender", "amplification (incident)", "amplification (overall)", "amplification on the sick endpoint (budget's stretch)"}
	if two {
		cols = append(cols, "healthy endpoint: requests per incident call")
	}
	cols = append(cols, "answered ≤ deadline", "by a model",
		"by a model (incident)", "by a model (endpoint up)", "self-heal",
		"p50", "p95", "p99", "peak/mean (100 ms)", "peak ÷ offered", "recovery after the fault")
	if r.Case.Metastable {
		cols = append(cols, fmt.Sprintf("by a model, last %s", fmtDur(r.Case.Tail)), "after the trigger")
	}
	t := Table{Columns: cols}
	if reach, ok := r.Case.Reach(); ok {
		all, incident := r.Case.reachPct(reach)
		row := []string{"reachable (limit, no run)", "–", "–", "–"}
		if two {
			row = append(row, "–")
		}
		row = append(row, "–", pct(all), pct(incident))
		for len(row) < len(cols) {
			row = append(row, "–")
		}
		t.Rows = append(t.Rows, row)
	}
	for _, run := range r.Runs {
		s := run.Summary
		row := []string{run.Name,
			fmt.Sprintf("%.2f", s.AmpIncident), fmt.Sprintf("%.2f", s.AmpOverall), fmt.Sprintf("%.2f", s.SickAmpStretch)}
		if two {
			healthy, _ := s.HealthyPerIncidentCall()
			row = append(row, fmt.Sprintf("%.2f", healthy))
		}
		row = append(row,
			pct(s.AnsweredPct), pct(s.ByModelPct),
			pct(s.IncidentByModelPct), orDash(s.WorkingCalls > 0, pct(s.WorkingByModelPct)), s.selfHealString(),
			fmtDur(s.P50), fmtDur(s.P95), fmtDur(s.P99),
			fmt.Sprintf("%.1f", s.PeakToMean), fmt.Sprintf("%.1f×", s.PeakOverOffered),
			s.RecoveryString(),
		)
		if r.Case.Metastable {
			row = append(row, pct(s.TailByModelPct), s.State())
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// reachPct is the share of the case's calls reachable, over the run and
// over the calls started in the incident.
func (c StormCase) reachPct(reach []CallReach) (all, incident float64) {
	interval := time.Duration(float64(time.Second) / c.Rate) // OpenLoop's
	n, in, inReach := 0, 0, 0
	for i, r := range reach {
		at := time.Duration(i) * interval
		inIncident := at >= c.IncidentStart && at < c.IncidentEnd
		if inIncident {
			in++
		}
		if r.Reachable {
			n++
			if inIncident {
				inReach++
			}
		}
	}
	return ratioPct(n, len(reach)), ratioPct(inReach, in)
}

// EndpointTable lists each contender's load on each endpoint.
func (r *StormReport) EndpointTable() Table {
	t := Table{Columns: []string{"contender", "endpoint", "models", "requests", "per call (overall)", "per incident call (its requests)", "per incident call (requests in the incident)"}}
	for _, run := range r.Runs {
		for _, ep := range run.Summary.Endpoints {
			t.Rows = append(t.Rows, []string{run.Name, ep.Name, strings.Join(ep.Models, ", "), fmt.Sprint(ep.Arrivals),
				fmt.Sprintf("%.2f", ep.AmpOverall), fmt.Sprintf("%.2f", ep.AmpIncident), fmt.Sprintf("%.2f", ep.AmpInIncident)})
		}
	}
	return t
}

// selfHealString formats the self-heal share with its counts ("96.8 %
// (30/31)"; "–" when no first request failed).
func (s StormSummary) selfHealString() string {
	p, ok := s.SelfHealPct()
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%s (%d/%d)", pct(p), s.Healed, s.FirstFailed)
}

func orDash(ok bool, v string) string {
	if !ok {
		return "–"
	}
	return v
}

// State classifies a run after the incident: recovered (≥ 99 % answered
// by a model from some point on), degraded (not that, but at least half of
// the calls in the tail window answered by a model) or collapsed.
func (s StormSummary) State() string {
	switch {
	case s.Recovered:
		return "recovered"
	case s.TailByModelPct >= 50:
		return "degraded"
	}
	return "collapsed"
}

// Notes lists, per contender, what the upstream answered and where
// durable-llm's answers came from.
func (r *StormReport) Notes() []string {
	var notes []string
	for _, run := range r.Runs {
		s := run.Summary
		line := fmt.Sprintf("%s — %d calls, %d upstream requests: %s", run.Name, s.Calls, run.Stats.Totals.Arrivals, countsString(s.Upstream, statusName))
		if len(s.Sources) > 0 {
			line += "; answer sources: " + countsString(s.Sources, nil)
		}
		var missed []string
		for _, o := range run.Outcomes {
			if !o.Answered || o.Latency > r.Case.Deadline {
				missed = append(missed, fmt.Sprintf("call %d started at %s: %s", o.I, fmtDur(o.Start), missedWhy(o, r.Case.Deadline)))
			}
		}
		if n := len(missed); n > 0 && n <= 5 {
			line += "; not answered in time: " + strings.Join(missed, "; ")
		}
		notes = append(notes, line)
	}
	return notes
}

func statusName(k string) string {
	switch k {
	case "499":
		return "499 (client gave up first)"
	case "429":
		return "429 (rate limit or queue full)"
	}
	return k
}

func countsString(m map[string]int, name func(string) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return m[keys[a]] > m[keys[b]] || m[keys[a]] == m[keys[b]] && keys[a] < keys[b] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		n := k
		if name != nil {
			n = name(k)
		}
		parts[i] = fmt.Sprintf("%s ×%d", n, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Targets checks issue 26's storm targets against durable-llm's runs,
// with one worker and with three, each printed met or MISSED:
//
//   - amplification on the sick endpoint during the incident (the
//     requests of the calls started in it, per such call) ≤ 1 + the
//     budget's ratio + its floor ÷ the calls started in it;
//   - every call answered within its deadline;
//   - answered by a model at least as often as the one-shot client, over
//     the run and over the calls started in the incident;
//   - answered by a model for ≥ 98 % of the calls started while the
//     endpoint works (a flapping endpoint's up windows included);
//   - back to ≥ 99 % model answers within 2 s after each end of the fault;
//   - in a sporadic case, self-heal ≥ 97 %: of the calls whose first
//     request failed, the share a model still answered (seed 002: 94.8 %).
func (r *StormReport) Targets() []string {
	var out []string
	run := func(name string) *StormRun {
		for i := range r.Runs {
			if r.Runs[i].Name == name {
				return &r.Runs[i]
			}
		}
		return nil
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	def := config.DefaultConfig()
	one := run(NameOneShot)
	for _, d := range []*StormRun{run(NameDurable), run(NameDurable3), run(NameDurableAnthropic)} {
		if d == nil {
			continue
		}
		s := d.Summary
		if len(s.Endpoints) > 0 && s.IncidentCalls > 0 {
			ep := s.Endpoints[0]
			bound := 1 + def.Budget.Ratio + float64(def.Budget.Floor)/float64(s.IncidentCalls)
			out = append(out, fmt.Sprintf("%s amplification on %s during the incident ≤ %.2f + floor %d ÷ %d calls started in it = %.2f: %.2f requests reached it during the incident per call started in it (the calls started in it made %.2f each, whenever sent; %.2f over the run) — %s",
				d.Name, ep.Name, 1+def.Budget.Ratio, def.Budget.Floor, s.IncidentCalls, bound, ep.AmpInIncident, ep.AmpIncident, ep.AmpOverall, verdict(ep.AmpInIncident <= bound)))
		}
		if healthy, ok := s.HealthyPerIncidentCall(); ok && s.IncidentCalls > 0 {
			out = append(out, fmt.Sprintf("%s requests on the healthy endpoint per call started in the incident ≤ 1 + ratio = %.2f (its load, not a storm): %.2f — %s",
				d.Name, 1+def.Budget.Ratio, healthy, verdict(healthy <= 1+def.Budget.Ratio)))
		}
		if reach, ok := r.Case.Reach(); ok {
			_, without := CountReach(reach)
			answered := 0
			for _, o := range d.Outcomes {
				if o.I < len(reach) && reach[o.I].WithoutResend && answeredByModel(o, r.Case.Deadline) {
					answered++
				}
			}
			share := 1.0
			if without > 0 {
				share = float64(answered) / float64(without)
			}
			out = append(out, fmt.Sprintf("%s answered by a model ≥ %.0f %% of the %d calls reachable without a resend on the sick endpoint: %s (%d) — %s",
				d.Name, 100*SweepReachShare, without, pct(100*share), answered, verdict(share >= SweepReachShare)))
		}
		out = append(out, fmt.Sprintf("%s calls answered within their deadline = 100 %%: %s — %s", d.Name, pct(s.AnsweredPct), verdict(s.AnsweredPct == 100)))
		if one != nil {
			o := one.Summary
			out = append(out, fmt.Sprintf("%s answered by a model ≥ the one-shot client: %s vs %s over the run, %s vs %s of the calls started in the incident — %s",
				d.Name, pct(s.ByModelPct), pct(o.ByModelPct), pct(s.IncidentByModelPct), pct(o.IncidentByModelPct),
				verdict(s.ByModelPct >= o.ByModelPct && s.IncidentByModelPct >= o.IncidentByModelPct)))
		}
		if s.WorkingCalls > 0 {
			line := fmt.Sprintf("%s answered by a model ≥ 98 %% of the %d calls started while the endpoint works: %s", d.Name, s.WorkingCalls, pct(s.WorkingByModelPct))
			if s.UpCalls > 0 {
				line += fmt.Sprintf(" (%s of the %d started in the up windows inside the incident)", pct(s.UpByModelPct), s.UpCalls)
			}
			out = append(out, line+" — "+verdict(s.WorkingByModelPct >= 98))
		}
		if len(s.Recoveries) > 0 {
			ok := true
			var each []string
			for _, rc := range s.Recoveries {
				ok = ok && rc.Recovered && rc.After <= recoveryTarget
				each = append(each, fmt.Sprintf("%s after the end at %s", rc, fmtDur(rc.At)))
			}
			out = append(out, fmt.Sprintf("%s back to ≥ 99 %% model answers within %s after the fault ends: %s — %s",
				d.Name, fmtDur(recoveryTarget), strings.Join(each, ", "), verdict(ok)))
		}
		if r.Case.Sporadic {
			p, ok := s.SelfHealPct()
			out = append(out, fmt.Sprintf("%s self-heal ≥ 97 %% (seed 002: 94.8 %%), the calls whose first request failed that a model answered within the deadline: %s — %s",
				d.Name, s.selfHealString(), verdict(ok && p >= 97)))
		}
	}
	if n := run(NameNaive); n != nil && !r.Case.Metastable && !r.Case.Sporadic {
		if r.Case.timesOut() {
			out = append(out, fmt.Sprintf("naive loop amplification over the incident ≥ 3 (the harness makes a storm): %.2f — %s", n.Summary.AmpIncident, verdict(n.Summary.AmpIncident >= 3)))
		} else {
			out = append(out, fmt.Sprintf("naive loop amplification over the incident: %.2f (no target: its attempts fail fast here, so it cannot reach the 3 it shows where they time out)", n.Summary.AmpIncident))
		}
	}
	var heal []string
	for _, run := range r.Runs {
		if _, ok := run.Summary.SelfHealPct(); ok {
			heal = append(heal, run.Name+" "+run.Summary.selfHealString())
		}
	}
	if len(heal) > 0 {
		out = append(out, "self-heal, every contender (calls whose first upstream request failed, as llmsim recorded it, that a model answered within the deadline): "+strings.Join(heal, ", "))
	}
	if r.Case.Name == "queuefull" {
		var fails []string
		for _, run := range r.Runs {
			fails = append(fails, fmt.Sprintf("%s %s", run.Name, pct(100-run.Summary.IncidentByModelPct)))
		}
		out = append(out, "seed 003's queue_full result (exponential backoff 37 % failures, switching to the smaller model 6.2 % there), here the calls started during the incident not answered by a model within the deadline: "+strings.Join(fails, ", "))
	}
	if r.Case.Metastable {
		var collapsed, recovered []string
		for _, run := range r.Runs {
			if st := run.Summary.State(); st == "recovered" {
				recovered = append(recovered, run.Name)
			} else {
				collapsed = append(collapsed, fmt.Sprintf("%s (%s, %s answered by a model in the last %s)", run.Name, st, pct(run.Summary.TailByModelPct), fmtDur(r.Case.Tail)))
			}
		}
		out = append(out, "recovered after the trigger: "+orNone(recovered), "stayed down after the trigger: "+orNone(collapsed))
	}
	return out
}

// timesOut reports whether the incident makes a client's attempts time
// out: a hang or a changed latency (the naive loop then resends every
// call three times).
func (c StormCase) timesOut() bool {
	sc, err := c.scenario()
	if err != nil {
		return false
	}
	for _, p := range sc.Phases {
		if p.Latency != nil || len(p.ModelLatency) > 0 {
			return true
		}
		for _, f := range p.Faults {
			if f.Kind == llmsim.FaultHang || f.Kind == llmsim.FaultLatency || f.Kind == llmsim.FaultStall {
				return true
			}
		}
	}
	return false
}

// recoveryTarget is how soon after a fault ends model answers are due
// back (issue 26).
const recoveryTarget = 2 * time.Second

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// Markdown renders the whole report: header, table, chart, targets, notes.
func (r *StormReport) Markdown(h Header, chart string) string {
	var b strings.Builder
	b.WriteString(h.Markdown())
	b.WriteString("\n")
	b.WriteString(r.Table().Markdown())
	if r.Case.SecondEndpoint != nil || r.Case.SickCapacity != nil {
		b.WriteString("\nLoad per endpoint (requests received; per logical call over the run; per call started during the incident, the requests those calls made and the requests that reached the endpoint during it):\n\n")
		b.WriteString(r.EndpointTable().Markdown())
	}
	b.WriteString("\nReachable (limit, no run): the calls one request could have had answered by a model within the deadline, computed from the fault schedule and the arrival times (StormCase.Reach); shown where the schedule says (not for a share of requests faulted in arrival order on every model, nor a slowdown of every model). " +
		"Amplification on the sick endpoint: over the budget's stretch (from the incident's start to the last request of a call started in it), the requests on the sick endpoint per first request in it; a request to a healthy endpoint is that endpoint's load, reported apart (healthy endpoint: its requests from the calls started in the incident, per such call). " +
		"Amplification (incident): upstream requests made by the calls that started during the incident, per such call, whenever sent. " +
		"The amplification target is judged on the load on the sick endpoint while it is sick: the requests that reached it during the incident, from any call, per call started in it, which the retry budget bounds " +
		"(a call that waits out the incident and retries after it is paid for by the traffic after it, so the column can be higher). " +
		"Answered: a model's answer (or, for durable-llm, its fallback) within the deadline; by a model: a model's answer within the deadline, " +
		"over the run, over the calls started in the incident, and over those started while the endpoint works (phases without faults or changed latency). " +
		"Self-heal: of the calls whose first upstream request failed (llmsim injected a fault into it or it ended in anything but a 200), the share a model still answered. " +
		"Latency: until the caller had its final result, answer or error. " +
		"Recovery: the first time after a fault ends from which ≥ 99 % of the calls started (until the next fault) were answered by a model; the longest over the fault's ends.\n")
	if chart != "" {
		fmt.Fprintf(&b, "\n![upstream arrivals per 100 ms](%s)\n", chart)
	}
	b.WriteString("\nTargets:\n\n")
	for _, t := range r.Targets() {
		b.WriteString("- " + t + "\n")
	}
	b.WriteString("\nUpstream responses:\n\n")
	for _, n := range r.Notes() {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

// WriteCSV writes every call of every run: contender, start and latency in
// milliseconds, upstream attempts, when its first request reached llmsim
// (ms since the start of its stats) and how that request ended (outcome,
// then the injected fault, if any), answered, by a model, source, error,
// and durable-llm's path (Result.Path).
func (r *StormReport) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"contender", "call", "start_ms", "latency_ms", "attempts", "first_request_ms", "first_request", "answered", "by_model", "source", "error", "path"})
	for _, run := range r.Runs {
		for _, o := range run.Outcomes {
			e := ""
			if o.Err != nil {
				e = o.Err.Error()
			}
			cv := run.Stats.Conversations[o.Key]
			firstAt, first := "", ""
			if len(cv.Requests) > 0 {
				f := cv.Requests[0]
				firstAt, first = fmt.Sprint(f.AtMS), strings.TrimSuffix(f.Outcome+" "+string(f.Fault), " ")
			}
			_ = cw.Write([]string{run.Name, fmt.Sprint(o.I), fmt.Sprint(o.Start.Milliseconds()), fmt.Sprint(o.Latency.Milliseconds()),
				fmt.Sprint(cv.Attempts), firstAt, first, fmt.Sprint(o.Answered), fmt.Sprint(o.ByModel), o.Source, e, o.Path})
		}
	}
	cw.Flush()
	return cw.Error()
}

func missedWhy(o Outcome, deadline time.Duration) string {
	if o.Err != nil {
		e := o.Err.Error()
		if len(e) > 160 {
			e = e[:160] + "…"
		}
		return fmt.Sprintf("error after %s: %s", fmtDur(o.Latency), e)
	}
	if o.Latency > deadline {
		return fmt.Sprintf("answered after %s, past the %s deadline", fmtDur(o.Latency), fmtDur(deadline))
	}
	return "no answer after " + fmtDur(o.Latency)
}
