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

// SweepReport is the result of a sweep, or of the part of it that ran.
type SweepReport struct {
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
	j := o.Judgement
	return fmt.Sprintf("shape %d (%s): by a model %s / %s / %s (one-shot / impatient / durable-llm), preferred %s, tokens/answer %s / %s / %s, amplification %.2f ≤ %.2f: %s; ≥ better one-shot: %s; within margin (%d − %d ≤ %.1f): %s; took %s",
		o.Shape.Index, o.Shape.Describe(),
		pct(o.OneShot.ByModelPct()), pct(o.Impatient.ByModelPct()), pct(o.Durable.ByModelPct()), pct(o.Durable.PreferredPct()),
		tokens(o.OneShot), tokens(o.Impatient), tokens(o.Durable),
		o.Durable.Amplification, o.Bound, yes(j.AmplificationOK), atLeast(j), j.Better, o.Durable.ByModel, j.Allowed, yes(j.WithinMargin), fmtDur(o.Elapsed.Round(time.Second)))
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
		"by a model ≤ deadline: one-shot", "impatient", "durable-llm", "preferred rung (durable-llm)",
		"tokens billed per answer: one-shot", "impatient", "durable-llm",
		"amplification (durable-llm)", "bound", "≥ better one-shot", "shortfall ≤ max(1, margin)", "time"}}
	for _, o := range r.Outcomes {
		j := o.Judgement
		t.Rows = append(t.Rows, []string{fmt.Sprint(o.Shape.Index), string(o.Shape.Fault), o.Shape.Describe(),
			fmt.Sprintf("%d (%d)", o.Durable.Calls, o.Durable.IncidentCalls),
			pct(o.OneShot.ByModelPct()), pct(o.Impatient.ByModelPct()), pct(o.Durable.ByModelPct()), pct(o.Durable.PreferredPct()),
			tokens(o.OneShot), tokens(o.Impatient), tokens(o.Durable),
			fmt.Sprintf("%.2f", o.Durable.Amplification), fmt.Sprintf("%.2f", o.Bound), atLeast(j),
			fmt.Sprintf("%s (%d − %d ≤ %.1f)", yes(j.WithinMargin), j.Better, o.Durable.ByModel, j.Allowed),
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
			fmt.Sprintf("each shape: %s healthy, the incident, %s recovered; the fault hits every model on one endpoint, or the first model's endpoint of two; the three contenders one after another, each against its own llmsim, at the same arrival times, the n-th request of call i meeting the same fault and latency (drawn per request number)", fmtDur(SweepLead), fmtDur(SweepTail)),
			fmt.Sprintf("deadline %s; a slow first byte comes before the deadline minus the fallback reserve (%s); impatient one-shot: one request, first_token_timeout (%s) as its timeout", fmtDur(p.Deadline), fmtDur(p.FallbackReserve), fmtDur(p.FirstTokenTimeout)),
			"a call counts as answered by a model when the first complete model answer arrives within its deadline (whichever rung; not the fallback, not text no model completed); preferred rung: answered so by the ladder's first model; tokens billed: prompt and completion tokens of every request a model took into its queue (a server that stops on disconnect bills only what it generated) per call answered by a model",
			fmt.Sprintf("targets: durable-llm ≥ the better one-shot in ≥ %.0f %% of the shapes where the contenders differ, and never below it by more than max(1 call, z₀.₉₅·√(2·n·p·(1−p)), p pooled); amplification over the budget's stretch (from the incident's start to the last request of a call started in it: every request on every endpoint per first request) ≤ 1 + ratio + endpoints × floor × ⌈stretch ÷ window⌉ ÷ first requests (ratio %.2f, floor %d, window %s)",
				100*SweepWinShare, p.BudgetRatio, p.BudgetFloor, fmtDur(p.BudgetWindow)),
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
	merged := &SweepReport{Seed: seed}
	byIndex := map[int]SweepOutcome{}
	var notes []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var part SweepReport
		if err := json.Unmarshal(data, &part); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
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
