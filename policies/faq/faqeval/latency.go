package faqeval

import (
	"slices"
	"time"

	"github.com/durable-llm/durable-llm/policies/faq"
)

// Latency is the time of one Match, over many.
type Latency struct {
	Matches   int
	Mean, P99 time.Duration
}

// MeasureLatency times each Match of every question against f, rounds
// times over (after one untimed round to warm up), and returns the mean and
// the 99th percentile per match. now is the clock (time.Now).
func MeasureLatency(f *faq.FAQ, questions []string, threshold float64, rounds int, now func() time.Time) Latency {
	for _, q := range questions {
		f.Match(q, threshold)
	}
	d := make([]time.Duration, 0, rounds*len(questions))
	var total time.Duration
	for range rounds {
		for _, q := range questions {
			start := now()
			f.Match(q, threshold)
			e := now().Sub(start)
			d = append(d, e)
			total += e
		}
	}
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	return Latency{
		Matches: len(d),
		Mean:    total / time.Duration(len(d)),
		P99:     d[min(len(d)-1, len(d)*99/100)],
	}
}
