// Command faqeval prints how well the FAQ answers the evaluation set
// (in-scope recall, wrong answers, out-of-scope answers; per language, on the
// tune and held-out splits) and how long one match takes on a 500-entry
// knowledge base. make faq-eval runs it from the repository's root.
//
//	faqeval [-eval policies/faq/testdata/eval.yaml] [-faq file] [-threshold 0.35] [-errors]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/faq"
	"github.com/durable-llm/durable-llm/policies/faq/faqeval"
)

func main() {
	evalPath := flag.String("eval", "policies/faq/testdata/eval.yaml", "evaluation set")
	faqPath := flag.String("faq", "", "FAQ file (default: the embedded example)")
	threshold := flag.Float64("threshold", faq.DefaultThreshold, "match threshold")
	entries := flag.Int("entries", 500, "entries of the knowledge base the latency is measured on")
	rounds := flag.Int("rounds", 50, "times every question is matched for the latency")
	errors := flag.Bool("errors", false, "list the tune split's errors (never the held-out split's)")
	sweep := flag.Bool("sweep", false, "print the tune split's recall and out-of-scope answers at thresholds 0.20–0.60, and nothing else")
	flag.Parse()
	if *sweep {
		if err := runSweep(*evalPath, *faqPath); err != nil {
			fmt.Fprintln(os.Stderr, "faqeval:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*evalPath, *faqPath, *threshold, *entries, *rounds, *errors); err != nil {
		fmt.Fprintln(os.Stderr, "faqeval:", err)
		os.Exit(1)
	}
}

func run(evalPath, faqPath string, threshold float64, entries, rounds int, errors bool) error {
	items, f, err := load(evalPath, faqPath)
	if err != nil {
		return err
	}
	fmt.Printf("FAQ %s (%d entries), threshold %.2f, evaluation set %s (%d questions)\n\n",
		f.Source(), f.Len(), threshold, evalPath, len(items))
	if missing := faqeval.MissingEntries(f, items); len(missing) > 0 {
		fmt.Printf("expected entries the FAQ lacks: %s\n\n", strings.Join(missing, ", "))
	}
	results := faqeval.Run(f, items, threshold)
	if err := faqeval.WriteTable(os.Stdout, results); err != nil {
		return err
	}
	fmt.Println("\nrecall: in-scope questions answered with the right entry; wrong: … with another entry;")
	fmt.Println("oos wrong: out-of-scope questions that got an FAQ answer; precision: right answers / answers given")
	if errors {
		fmt.Println("\ntune split errors:")
		faqeval.WriteErrors(os.Stdout, results)
	}

	big, err := faqeval.Synthetic(f, entries)
	if err != nil {
		return err
	}
	qs := make([]string, len(items))
	for i, it := range items {
		qs[i] = it.Q
	}
	l := faqeval.MeasureLatency(big, qs, threshold, rounds, time.Now)
	fmt.Printf("\nlatency on a %d-entry knowledge base (%d example + %d synthetic), %d matches: mean %s, p99 %s per match\n",
		big.Len(), f.Len(), big.Len()-f.Len(), l.Matches, micro(l.Mean), micro(l.P99))
	return nil
}

// runSweep prints, for the tune split only, what each threshold would give:
// the calibration of the threshold looks at nothing else.
func runSweep(evalPath, faqPath string) error {
	items, f, err := load(evalPath, faqPath)
	if err != nil {
		return err
	}
	fmt.Println("tune split: threshold  recall  wrong  oos wrong")
	for t := 0.20; t < 0.601; t += 0.025 {
		c := faqeval.Tally(faqeval.Run(f, items, t), faqeval.SplitTune, faqeval.LangAll)
		fmt.Printf("  %.3f  %5.1f %%  %4.1f %%  %4.1f %%\n", t, 100*c.Recall(), 100*c.WrongRate(), 100*c.OOSWrongRate())
	}
	return nil
}

// load reads the evaluation set and the FAQ (the embedded example when
// faqPath is empty).
func load(evalPath, faqPath string) ([]faqeval.Item, *faq.FAQ, error) {
	items, err := faqeval.Load(evalPath)
	if err != nil {
		return nil, nil, err
	}
	if faqPath == "" {
		return items, faq.DefaultFAQ(), nil
	}
	f, err := faq.LoadFAQ(faqPath)
	return items, f, err
}

func micro(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
