package faqeval

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/durable-llm/durable-llm/policies/faq"
	"go.yaml.in/yaml/v3"
)

// Splits of the evaluation set.
const (
	SplitTune    = "tune"
	SplitHeldOut = "heldout"
)

// Languages of the evaluation set; LangAll is every language together.
const (
	LangEN  = "en"
	LangZH  = "zh"
	LangAll = "all"
)

// Item is one question of the evaluation set.
type Item struct {
	// Q is the question as a customer types it.
	Q string `yaml:"q"`
	// Lang is en or zh: the language the question is mostly written in.
	Lang string `yaml:"lang"`
	// Expect is the id of the entry that answers the question; "" (none in
	// the file) when the knowledge base does not answer it.
	Expect string `yaml:"expect"`
	// Kind is paraphrase, typo, mixed, near-miss or unrelated.
	Kind string `yaml:"kind"`
	// Split is tune or heldout.
	Split string `yaml:"split"`
}

// InScope reports whether an entry answers the item.
func (it Item) InScope() bool { return it.Expect != "" }

// Load reads the evaluation set at path; see Parse.
func Load(path string) ([]Item, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evaluation set: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes an evaluation set (a mapping with one key, items) strictly
// and checks every item: a question, lang en or zh, an expected id or none,
// split tune or heldout.
func Parse(data []byte, source string) ([]Item, error) {
	var file struct {
		Items []Item `yaml:"items"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("evaluation set %s: %w", source, err)
	}
	if len(file.Items) == 0 {
		return nil, fmt.Errorf("evaluation set %s: no items", source)
	}
	var problems []string
	for i, it := range file.Items {
		at := fmt.Sprintf("items[%d] (%q)", i, it.Q)
		if strings.TrimSpace(it.Q) == "" {
			problems = append(problems, at+": empty question")
		}
		if it.Lang != LangEN && it.Lang != LangZH {
			problems = append(problems, fmt.Sprintf("%s: lang %q (want en or zh)", at, it.Lang))
		}
		if it.Split != SplitTune && it.Split != SplitHeldOut {
			problems = append(problems, fmt.Sprintf("%s: split %q (want tune or heldout)", at, it.Split))
		}
		switch it.Expect {
		case "":
			problems = append(problems, at+": expect missing (want an entry id or none)")
		case "none":
			file.Items[i].Expect = ""
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("evaluation set %s: %s", source, strings.Join(problems, "; "))
	}
	return file.Items, nil
}

// Result is the FAQ's answer to one item.
type Result struct {
	Item
	// Got is the id of the matched entry, "" for no answer.
	Got string
	// Score is the match's score (0 for no answer).
	Score float64
	// Closest is the entry's paraphrase closest to the question.
	Closest string
	// Below is the best entry when none reached the threshold, and
	// BelowScore its score (for reading the tune split's errors).
	Below      string
	BelowScore float64
}

// Right reports whether the answer is the expected one (for an
// out-of-scope item: no answer).
func (r Result) Right() bool { return r.Got == r.Expect }

// Run matches every item against f at threshold (not above 0: the FAQ's
// default). The best entry does not depend on the threshold: each item is
// matched once, and filed as the answer or as below the threshold.
func Run(f *faq.FAQ, items []Item, threshold float64) []Result {
	if threshold <= 0 {
		threshold = faq.DefaultThreshold
	}
	out := make([]Result, len(items))
	for i, it := range items {
		out[i].Item = it
		m, ok := f.Match(it.Q, 1e-9)
		switch {
		case !ok:
		case m.Score >= threshold:
			out[i].Got, out[i].Score, out[i].Closest = m.ID, m.Score, m.Question
		default:
			out[i].Below, out[i].BelowScore, out[i].Closest = m.ID, m.Score, m.Question
		}
	}
	return out
}

// Counts are the tallies of one split and language.
type Counts struct {
	In          int // in-scope questions
	Right       int // … answered with the expected entry
	Wrong       int // … answered with another entry
	Out         int // out-of-scope questions
	OutAnswered int // … that got an FAQ answer (all wrong)
}

// Recall is the share of in-scope questions answered with the right entry.
func (c Counts) Recall() float64 { return ratio(c.Right, c.In) }

// WrongRate is the share of in-scope questions answered with a wrong entry.
func (c Counts) WrongRate() float64 { return ratio(c.Wrong, c.In) }

// Missed is the share of in-scope questions left without an answer.
func (c Counts) Missed() float64 { return ratio(c.In-c.Right-c.Wrong, c.In) }

// OOSWrongRate is the share of out-of-scope questions that got an answer.
func (c Counts) OOSWrongRate() float64 { return ratio(c.OutAnswered, c.Out) }

// Precision is the share of the answers given that were right.
func (c Counts) Precision() float64 { return ratio(c.Right, c.Right+c.Wrong+c.OutAnswered) }

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// Tally counts the results of split in lang (LangAll: every language).
func Tally(results []Result, split, lang string) Counts {
	var c Counts
	for _, r := range results {
		if r.Split != split || lang != LangAll && r.Lang != lang {
			continue
		}
		switch {
		case r.InScope() && r.Got == r.Expect:
			c.In++
			c.Right++
		case r.InScope() && r.Got != "":
			c.In++
			c.Wrong++
		case r.InScope():
			c.In++
		case r.Got != "":
			c.Out++
			c.OutAnswered++
		default:
			c.Out++
		}
	}
	return c
}

// TuneErrors returns the tune split's wrong results. There is no such
// function for the held-out split.
func TuneErrors(results []Result) []Result {
	var out []Result
	for _, r := range results {
		if r.Split == SplitTune && !r.Right() {
			out = append(out, r)
		}
	}
	return out
}

// MissingEntries returns the expected ids the FAQ has no entry for, sorted.
func MissingEntries(f *faq.FAQ, items []Item) []string {
	have := map[string]bool{}
	for _, e := range f.Entries() {
		have[e.ID] = true
	}
	var missing []string
	for _, it := range items {
		if it.InScope() && !have[it.Expect] && !slices.Contains(missing, it.Expect) {
			missing = append(missing, it.Expect)
		}
	}
	slices.Sort(missing)
	return missing
}
