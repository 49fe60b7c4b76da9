package bench

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Result is what a contender reports for one logical call.
type Result struct {
	// Key identifies the call upstream: the conversation key llmsim files
	// its attempts under (the Idempotency-Key before its last '/').
	Key string
	// Answered reports an answer the user can read: a model's, or for
	// durable-llm also the business fallback's.
	Answered bool
	// ByModel reports that a model wrote the answer.
	ByModel bool
	// Model is the model whose answer the caller got ("" when none did or
	// the contender cannot tell); Degraded marks an answer a model did not
	// complete (durable-llm's best text received when retries ran out).
	Model    string
	Degraded bool
	// Source is durable-llm's answer source (model, fallback_model, faq,
	// rule, placeholder, handoff); empty for the baselines.
	Source string
	// Path is, for durable-llm, what each attempt met and decided
	// (model:class:decision, with its delay) and the reason of a degraded
	// answer: the raw CSV's last column, for reading a run call by call.
	Path string
	// Err is the error the caller finally saw, if any.
	Err error
}

// Outcome is a Result with its timing, as the load driver measured it.
type Outcome struct {
	Result
	// I numbers the call from 0 in arrival order.
	I int
	// Start is when the call started, since the start of the run.
	Start time.Duration
	// Latency is the time until the caller had its final result (answer or
	// error).
	Latency time.Duration
}

// CallFunc makes logical call i and reports how it ended. It must return
// once ctx is done.
type CallFunc func(ctx context.Context, i int) Result

// OpenLoop drives fn at a constant arrival rate (calls per second) for d:
// call i starts at i/rate after the start whether or not earlier calls have
// finished (an open model, as users arrive). It waits for every call and
// returns the outcomes in arrival order; start is the instant the first
// call was due.
func OpenLoop(ctx context.Context, rate float64, d time.Duration, fn CallFunc) (outs []Outcome, start time.Time) {
	n := int(rate * d.Seconds())
	outs = make([]Outcome, n)
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	start = time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			t := time.NewTimer(w)
			select {
			case <-ctx.Done():
				t.Stop()
				outs = outs[:i]
				wg.Wait()
				return outs, start
			case <-t.C:
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			began := time.Now()
			r := fn(ctx, i)
			outs[i] = Outcome{Result: r, I: i, Start: began.Sub(start), Latency: time.Since(began)}
		}(i)
	}
	wg.Wait()
	return outs, start
}

// ClosedLoop runs workers callers that each start their next call as soon
// as the previous one returned, for d, and returns the outcomes of the
// calls that started within d, in start order.
func ClosedLoop(ctx context.Context, workers int, d time.Duration, fn CallFunc) []Outcome {
	var mu sync.Mutex
	var outs []Outcome
	next := 0
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(end) {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				began := time.Now()
				r := fn(ctx, i)
				o := Outcome{Result: r, I: i, Start: began.Sub(start), Latency: time.Since(began)}
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(outs, func(a, b Outcome) int { return a.I - b.I })
	return outs
}

// Percentile returns the q-quantile (0 < q ≤ 1) of ds by the nearest-rank
// method, 0 for none. ds need not be sorted and is not modified.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q*float64(len(s))+0.999999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// Latencies returns the latencies of outs.
func Latencies(outs []Outcome) []time.Duration {
	ds := make([]time.Duration, len(outs))
	for i, o := range outs {
		ds[i] = o.Latency
	}
	return ds
}
