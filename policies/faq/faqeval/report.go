package faqeval

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the counts of both splits, per language and overall.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "split\tlang\tin-scope\trecall\twrong\tmissed\tout-of-scope\toos wrong\tprecision\t")
	for _, split := range []string{SplitTune, SplitHeldOut} {
		for _, lang := range []string{LangEN, LangZH, LangAll} {
			c := Tally(results, split, lang)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t\n", split, lang,
				c.In, pct(c.Right, c.Recall()), pct(c.Wrong, c.WrongRate()), pct(c.In-c.Right-c.Wrong, c.Missed()),
				c.Out, pct(c.OutAnswered, c.OOSWrongRate()), fmt.Sprintf("%.1f %%", 100*c.Precision()))
		}
	}
	return tw.Flush()
}

func pct(n int, r float64) string { return fmt.Sprintf("%d = %.1f %%", n, 100*r) }

// WriteErrors writes the tune split's errors, one a line. The held-out
// split's errors are never written.
func WriteErrors(w io.Writer, results []Result) {
	for _, r := range TuneErrors(results) {
		got, score := r.Got, r.Score
		if got == "" {
			got, score = "(none) "+r.Below, r.BelowScore
		}
		want := r.Expect
		if want == "" {
			want = "(none)"
		}
		fmt.Fprintf(w, "  %-4s %-10s want %-18s got %-25s %.3f  %q", r.Lang, r.Kind, want, got, score, r.Q)
		if r.Closest != "" {
			fmt.Fprintf(w, " ~ %q", r.Closest)
		}
		fmt.Fprintln(w)
	}
}
