package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SweepFormat numbers the definitions a sweep report is judged by: 2 is
// the reachable limit, the LiteLLM-style rival and amplification on the
// sick endpoint. MergeSweep leaves out parts of another format.
const SweepFormat = 2

// SweepReport is the result of a sweep, or of the part of it that ran.
type SweepReport struct {
	Format   int            `json:"format"`
	Seed     uint64         `json:"seed"`
	Params   SweepParams    `json:"params"`
	Command  string         `json:"command"`
	Machine  Machine        `json:"machine"`
	Note     string         `json:"note,omitempty"`
	Outcomes []SweepOutcome `json:"outcomes"`
}

// Verdict judges the report's shapes.
func (r *SweepReport) Verdict() SweepVerdict { return Verdict(r.Outcomes) }

// ShapeLine is the one line a shape's result prints as it ends.
func (o SweepOutcome) ShapeLine() string {
	j, d := o.Judgement, o.Durable
	return fmt.Sprintf("shape %d (%s): reachable %s, without a resend on the sick endpoint %s; by a model %s / %s / %s / %s (one-shot / impatient / LiteLLM-style / durable-llm), "+
		"durable-llm %s of the reachable without a resend (≥ %.0f %%: %s), of the bound's limit %s, preferred %s; requests per incident call (sick / healthy endpoint): one-shot %s, impatient %s, LiteLLM-style %s, durable-llm %s; "+
		"tokens/answer %s / %s / %s / %s; amplification on the sick endpoint %.2f ≤ %.2f: %s; healthy endpoint %s; ≥ best rival: %s; within margin (%d − %d ≤ %.1f): %s; took %s",
		o.Shape.Index, o.Shape.Describe(), pct(o.ReachablePct()), pct(o.WithoutResendPct()),
		pct(o.OneShot.ByModelPct()), pct(o.Impatient.ByModelPct()), pct(o.LiteLLM.ByModelPct()), pct(d.ByModelPct()),
		pct(100*j.ReachShare), 100*SweepReachShare, yes(j.ReachOK), o.boundJudged(), pct(d.PreferredPct()),
		o.endpointLoad(o.OneShot), o.endpointLoad(o.Impatient), o.endpointLoad(o.LiteLLM), o.endpointLoad(d),
		tokens(o.OneShot), tokens(o.Impatient), tokens(o.LiteLLM), tokens(d),
		d.SickAmplification, o.Bound, yes(j.AmplificationOK), o.healthyJudged(),
		atLeast(j), j.Best, d.ByModel, j.Allowed, yes(j.WithinMargin), fmtDur(o.Elapsed.Round(time.Second)))
}

// boundJudged is the bound's limit and durable-llm's share of it ("150:
// 96.0 % (yes)"; "–" where the fault is not on a share of one endpoint's
// requests).
func (o SweepOutcome) boundJudged() string {
	if !o.Partial {
		return "–"
	}
	return fmt.Sprintf("%d: %s (%s)", o.BoundLimit, pct(100*o.Judgement.BoundShare), yes(o.Judgement.BoundOK))
}

// endpointLoad is a contender's requests per call started in the
// incident on the sick endpoint and, with two, on the healthy one
// ("1.20 / 0.85").
func (o SweepOutcome) endpointLoad(s SweepScore) string {
	if o.Shape.Endpoints < 2 {
		return fmt.Sprintf("%.2f", s.SickPerCall)
	}
	return fmt.Sprintf("%.2f / %.2f", s.SickPerCall, s.HealthyPerCall)
}

// healthyJudged is durable-llm's load on the healthy endpoint against its
// bound ("yes (0.85 ≤ 1.10)"; "–" with one endpoint).
func (o SweepOutcome) healthyJudged() string {
	if o.Shape.Endpoints < 2 {
		return "–"
	}
	return fmt.Sprintf("%s (%.2f ≤ %.2f)", yes(o.Judgement.HealthyOK), o.Durable.HealthyPerCall, o.HealthyBound)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func atLeast(j SweepJudgement) string {
	switch {
	case !j.Differ:
		return "tie"
	case j.AtLeast:
		return "yes"
	}
	return "NO"
}

func tokens(s SweepScore) string {
	if s.ByModel == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", s.TokensPerAnswer())
}

// Table is one row per shape.
func (r *SweepReport) Table() Table {
	t := Table{Left: 3, Columns: []string{"#", "fault", "shape", "calls (in incident)",
		"reachable", "reachable without a resend on the sick endpoint",
		"by a model ≤ deadline: one-shot", "impatient", "LiteLLM-style", "durable-llm",
		"durable-llm, of the reachable without a resend", "bound's limit (one endpoint, fault on a share): durable-llm of it",
		"requests per incident call, sick / healthy endpoint: one-shot", "impatient", "LiteLLM-style", "durable-llm",
		"preferred rung (durable-llm)", "tokens billed per answer: one-shot / impatient / LiteLLM-style / durable-llm",
		"amplification on the sick endpoint (durable-llm)", "bound", "healthy endpoint ≤ 1 + ratio",
		"≥ best rival", "shortfall ≤ max(1, margin)", "time"}}
	for _, o := range r.Outcomes {
		j, d := o.Judgement, o.Durable
		t.Rows = append(t.Rows, []string{fmt.Sprint(o.Shape.Index), string(o.Shape.Fault), o.Shape.Describe(),
			fmt.Sprintf("%d (%d)", o.Calls, d.IncidentCalls),
			pct(o.ReachablePct()), pct(o.WithoutResendPct()),
			pct(o.OneShot.ByModelPct()), pct(o.Impatient.ByModelPct()), pct(o.LiteLLM.ByModelPct()), pct(d.ByModelPct()),
			fmt.Sprintf("%s (%s)", pct(100*j.ReachShare), yes(j.ReachOK)), o.boundJudged(),
			o.endpointLoad(o.OneShot), o.endpointLoad(o.Impatient), o.endpointLoad(o.LiteLLM), o.endpointLoad(d),
			pct(d.PreferredPct()), strings.Join([]string{tokens(o.OneShot), tokens(o.Impatient), tokens(o.LiteLLM), tokens(d)}, " / "),
			fmt.Sprintf("%.2f", d.SickAmplification), fmt.Sprintf("%.2f", o.Bound), o.healthyJudged(), atLeast(j),
			fmt.Sprintf("%s (%d − %d ≤ %.1f)", yes(j.WithinMargin), j.Best, d.ByModel, j.Allowed),
			fmtDur(o.Elapsed.Round(time.Second))})
	}
	return t
}

// Markdown renders the report: what ran, the table and the verdict.
func (r *SweepReport) Markdown(date time.Time) string {
	p := r.Params
	shapes := make([]int, 0, len(r.Outcomes))
	for _, o := range r.Outcomes {
		shapes = append(shapes, o.Shape.Index)
	}
	h := Header{Title: fmt.Sprintf("Sweep — seed %d, %d shapes (%s)", r.Seed, len(r.Outcomes), ranges(shapes)),
		Command: r.Command, Machine: r.Machine, Date: date,
		Params: []string{
			fmt.Sprintf("each shape: %s healthy, the incident, %s recovered; the fault hits every model on one endpoint, or the first model's endpoint of two; the four contenders one after another, each against its own llmsim, at the same arrival times, the n-th request of call i meeting the same fault and latency (drawn per request number)", fmtDur(SweepLead), fmtDur(SweepTail)),
			fmt.Sprintf("deadline %s; a slow first byte comes before the deadline minus the fallback reserve (%s); impatient one-shot: one request, first_token_timeout (%s) as its timeout; LiteLLM-style router: per model 1 + 3 attempts of first_token_timeout each (Retry-After, else 0.5 s·2ⁿ backoff), then the next model", fmtDur(p.Deadline), fmtDur(p.FallbackReserve), fmtDur(p.FirstTokenTimeout)),
			"reachable (computed from the shape, no run): calls one request could have had answered by a model within the deadline — the first request (not faulted: llmsim's own draw for it; or answered despite the fault), or a request to a ladder model at a moment of [start, start + deadline − its answer time] when that model is outside the fault; without a resend on the sick endpoint: the first request answered, a healthy model on the ladder, or the fault over for good by then (not a flapping endpoint's up window)",
			"a call counts as answered by a model when the first complete model answer arrives within its deadline (whichever rung; not the fallback, not text no model completed); preferred rung: answered so by the ladder's first model; requests per incident call: the requests the calls started in the incident sent to each endpoint, per such call; tokens billed: prompt and completion tokens of every request a model took into its queue (a server that stops on disconnect bills only what it generated) per call answered by a model",
			fmt.Sprintf("targets: durable-llm answers by a model ≥ %.0f %% of the calls reachable without a resend on the sick endpoint in every shape; ≥ the best of one-shot, impatient one-shot and LiteLLM-style in ≥ %.0f %% of the shapes where the contenders differ, and never below it by more than max(1 call, z₀.₉₅·√(2·n·p·(1−p)), p pooled); amplification on the sick endpoint over the budget's stretch (from the incident's start to the last request of a call started in it: the requests on the sick endpoint per first request) ≤ 1 + ratio + endpoints × floor × ⌈stretch ÷ window⌉ ÷ first requests (ratio %.2f, floor %d, window %s); requests on the healthy endpoint ≤ 1 + ratio per call started in the incident; bound's limit, where the fault hits a share of one endpoint's requests (no call can know whether its first request will meet it): the calls whose first request was answered (the one-shot's, same draws) + ⌊(bound − 1) × the stretch's first requests⌋, capped by the reachable without a resend — what a client within the bound that sends each call's first request when it starts could answer at best",
				100*SweepReachShare, 100*SweepWinShare, p.BudgetRatio, p.BudgetFloor, fmtDur(p.BudgetWindow)),
		}}
	if r.Note != "" {
		h.Params = append([]string{"note: " + r.Note}, h.Params...)
	}
	var b strings.Builder
	b.WriteString(h.Markdown())
	b.WriteString("\n")
	b.WriteString(r.Table().Markdown())
	b.WriteString("\n")
	b.WriteString(r.Verdict().String())
	b.WriteString("\n")
	return b.String()
}

// ranges formats shape indexes as ranges ("0–7, 12").
func ranges(idx []int) string {
	idx = slices.Clone(idx)
	slices.Sort(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// SweepPartName is the base name of the files of shapes from..to of the
// sweep of seed.
func SweepPartName(seed uint64, from, to int) string {
	return fmt.Sprintf("sweep-seed%d-shapes%d-%d", seed, from, to)
}

// SweepName is the base name of the files of every shape of the sweep of
// seed run so far.
func SweepName(seed uint64) string { return fmt.Sprintf("sweep-seed%d", seed) }

// WriteSweep writes r as name.md and name.json in dir.
func WriteSweep(dir, name string, r *SweepReport, date time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(r.Markdown(date)), 0o644)
}

// MergeSweep gathers every part of the sweep of seed written in dir into
// one report, shapes in order; a shape run in several parts counts by its
// latest run.
func MergeSweep(dir string, seed uint64) (*SweepReport, error) {
	files, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("sweep-seed%d-shapes*.json", seed)))
	if err != nil {
		return nil, err
	}
	merged := &SweepReport{Format: SweepFormat, Seed: seed}
	byIndex := map[int]SweepOutcome{}
	var notes []string
	older := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var part SweepReport
		if err := json.Unmarshal(data, &part); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if part.Format != SweepFormat {
			older++
			continue
		}
		if part.Params != (SweepParams{}) {
			merged.Params, merged.Machine = part.Params, part.Machine
		}
		if part.Note != "" && !slices.Contains(notes, part.Note) {
			notes = append(notes, part.Note)
		}
		for _, o := range part.Outcomes {
			if prev, ok := byIndex[o.Shape.Index]; !ok || o.Date.After(prev.Date) {
				byIndex[o.Shape.Index] = o
			}
		}
	}
	for _, o := range byIndex {
		merged.Outcomes = append(merged.Outcomes, o)
	}
	slices.SortFunc(merged.Outcomes, func(a, b SweepOutcome) int { return a.Shape.Index - b.Shape.Index })
	merged.Command = "the parts sweep-seed" + fmt.Sprint(seed) + "-shapes*.json, merged"
	if older > 0 {
		notes = append(notes, fmt.Sprintf("%d part(s) judged by older definitions (format ≠ %d) left out", older, SweepFormat))
	}
	merged.Note = strings.Join(notes, "; ")
	return merged, nil
}

// LogSweepRun appends one line about a run to dir/runs.log: every run of
// the sweep is kept, whatever its outcome.
func LogSweepRun(dir string, date time.Time, command, revision string, r *SweepReport, elapsed time.Duration, runErr error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "runs.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	result := "error: " + fmt.Sprint(runErr)
	if runErr == nil {
		result = r.Verdict().String()
	}
	var idx []int
	for _, o := range r.Outcomes {
		idx = append(idx, o.Shape.Index)
	}
	_, err = fmt.Fprintf(f, "%s\tseed %d\tshapes %s\trevision %s\ttook %s\t%s\t%s\n",
		date.UTC().Format(time.RFC3339), r.Seed, ranges(idx), revision, elapsed.Round(time.Second), command, result)
	return err
}
