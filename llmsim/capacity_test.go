package llmsim_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

type timed struct {
	i       int
	err     error
	elapsed time.Duration
	status  int
	header  map[string][]string
}

// fire sends n requests to model, the i-th after i*gap, and waits for all.
func fire(t *testing.T, srv *llmsim.Server, model string, n int, gap, timeout time.Duration) []timed {
	t.Helper()
	out := make([]timed, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, cap := goClient(srv, timeout)
			begin := time.Now()
			_, err := cl.CreateChatCompletion(context.Background(), ask(model, fmt.Sprintf("load %d", i)))
			st, h := cap.last()
			out[i] = timed{i: i, err: err, elapsed: time.Since(begin), status: st, header: h}
		}()
		time.Sleep(gap)
	}
	wg.Wait()
	return out
}

func TestQueueLatencyGrowsWithDepth(t *testing.T) {
	var mu sync.Mutex
	var recs []llmsim.Record
	srv := startScenario(t, `
models: [{name: m, slots: 1, latency: 100ms}]
`, llmsim.Options{OnRequest: func(r llmsim.Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	}})
	for _, r := range fire(t, srv, "m", 4, 0, 5*time.Second) {
		if r.err != nil {
			t.Fatalf("request %d: %v", r.i, r.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// In arrival order, request k waits for the k before it: it starts at
	// about first arrival + k x 100 ms, so its queueing time and latency grow
	// with the depth it found.
	sort.Slice(recs, func(i, j int) bool { return recs[i].Time.Before(recs[j].Time) })
	first := recs[0].Time
	for k, r := range recs {
		start := r.Time.Sub(first) + r.Queued
		if lo := time.Duration(k)*100*time.Millisecond - 5*time.Millisecond; start < lo {
			t.Errorf("request %d started %v after the first arrival, want >= %v", k, start, lo)
		}
		if k > 0 && r.Duration <= recs[k-1].Duration-r.Time.Sub(recs[k-1].Time) {
			t.Errorf("request %d (%v) did not take longer than request %d (%v)", k, r.Duration, k-1, recs[k-1].Duration)
		}
	}
	if spread := recs[3].Time.Sub(first); recs[3].Queued < 300*time.Millisecond-spread-5*time.Millisecond {
		t.Errorf("the fourth request queued %v (arrivals spread over %v), want about 300ms", recs[3].Queued, spread)
	}
	st := srv.Stats()
	m := st.Models["m"]
	if m.PeakInFlight != 1 || m.Completions != 4 || m.InFlight != 0 || m.Queued != 0 {
		t.Errorf("model counts %+v", m)
	}
	if m.PeakQueued < 2 {
		t.Errorf("peak queue %d, want 3 (at least 2 when arrivals spread)", m.PeakQueued)
	}
}

func TestQueueFullRejectsAtOnce(t *testing.T) {
	for _, status := range []int{429, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := startScenario(t, fmt.Sprintf(`
models: [{name: m, slots: 2, queue: 2, latency: 300ms, reject_status: %d}]
`, status), llmsim.Options{})
			res := fire(t, srv, "m", 7, 5*time.Millisecond, 5*time.Second)
			ok, rejected := 0, 0
			for _, r := range res {
				switch {
				case r.err == nil:
					ok++
				case r.status == status:
					rejected++
					apiError(t, r.err, status, "queue_full")
					if r.header["X-Ratelimit-Remaining"][0] != "0" {
						t.Errorf("headers %v", r.header)
					}
					if r.elapsed > 250*time.Millisecond {
						t.Errorf("rejection took %v, want immediate", r.elapsed)
					}
				default:
					t.Errorf("request %d: status %d err %v", r.i, r.status, r.err)
				}
			}
			if ok != 4 || rejected != 3 {
				t.Errorf("ok %d rejected %d, want 4 and 3", ok, rejected)
			}
			st := srv.Stats().Totals
			if st.Arrivals != 7 || st.Rejected != 3 || st.Responses[fmt.Sprint(status)] != 3 || st.Responses["200"] != 4 ||
				st.Completions != 4 || st.PeakInFlight != 2 || st.PeakQueued != 2 {
				t.Errorf("totals %+v", st)
			}
		})
	}
}

func TestWorkContinuesAfterDisconnect(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("continue_on_disconnect=%v", keep), func(t *testing.T) {
			srv := startScenario(t, fmt.Sprintf(`
continue_on_disconnect: %v
models: [{name: m, slots: 1, latency: 400ms}]
`, keep), llmsim.Options{})
			impatient, _ := goClient(srv, 50*time.Millisecond)
			if _, err := impatient.CreateChatCompletion(context.Background(), ask("m", "give up")); err == nil {
				t.Fatal("the impatient client should time out")
			}
			if keep {
				if in, _ := srv.InFlight("m"); in != 1 {
					t.Errorf("in-flight after the client left = %d, want 1 (the GPU keeps working)", in)
				}
			} else {
				eventually(t, "the slot to be freed", func() bool { in, _ := srv.InFlight("m"); return in == 0 })
			}
			patient, _ := goClient(srv, 5*time.Second)
			begin := time.Now()
			if _, err := patient.CreateChatCompletion(context.Background(), ask("m", "wait")); err != nil {
				t.Fatal(err)
			}
			took := time.Since(begin)
			eventually(t, "all work done", func() bool { in, q := srv.InFlight("m"); return in == 0 && q == 0 })
			st := srv.Stats().Totals
			if keep {
				// The second request waited for the abandoned one.
				if took < 650*time.Millisecond {
					t.Errorf("second request took %v, want >= 650ms behind the abandoned work", took)
				}
				if st.Completions != 2 {
					t.Errorf("completions %d, want 2", st.Completions)
				}
			} else {
				if took > 600*time.Millisecond {
					t.Errorf("second request took %v, want about 400ms", took)
				}
				if st.Completions != 1 {
					t.Errorf("completions %d, want 1", st.Completions)
				}
			}
			if st.Responses[llmsim.OutcomeClientGone] != 1 || st.Abandoned != 1 || st.Responses["200"] != 1 {
				t.Errorf("totals %+v", st)
			}
		})
	}
}

func TestAbandonedQueuedWorkStillRuns(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, slots: 1, latency: 200ms}]`, llmsim.Options{})
	done := make(chan error)
	go func() {
		cl, _ := goClient(srv, 5*time.Second)
		_, err := cl.CreateChatCompletion(context.Background(), ask("m", "first"))
		done <- err
	}()
	eventually(t, "the first request to hold the slot", func() bool { in, _ := srv.InFlight("m"); return in == 1 })
	impatient, _ := goClient(srv, 50*time.Millisecond)
	if _, err := impatient.CreateChatCompletion(context.Background(), ask("m", "second")); err == nil {
		t.Fatal("want a timeout")
	}
	if _, q := srv.InFlight("m"); q != 1 {
		t.Errorf("queued = %d after the client left, want 1", q)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, "the abandoned request to run", func() bool { in, _ := srv.InFlight("m"); return in == 1 })
	eventually(t, "it to finish", func() bool { return srv.Stats().Totals.Completions == 2 })
}

func TestLoadFactorSlowsFullBatches(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, slots: 4, latency: 100ms, load_factor: 1}]`, llmsim.Options{})
	res := fire(t, srv, "m", 4, 2*time.Millisecond, 5*time.Second)
	var longest time.Duration
	for _, r := range res {
		if r.err != nil {
			t.Fatal(r.err)
		}
		longest = max(longest, r.elapsed)
	}
	// The fourth request shares the batch with three others: 100ms x (1 + 3/4).
	if longest < 170*time.Millisecond {
		t.Errorf("longest %v, want >= 170ms", longest)
	}
}

func TestRateLimitOnSimClock(t *testing.T) {
	clk := newFakeClock()
	srv := startScenario(t, `models: [{name: m, rate_limit: 2, burst: 2}]`, llmsim.Options{Clock: clk.Now})
	cl, cap := goClient(srv, 5*time.Second)
	call := func() error {
		_, err := cl.CreateChatCompletion(context.Background(), ask("m", "rl"))
		return err
	}
	for i := range 2 {
		if err := call(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	apiError(t, call(), 429, "rate_limit_exceeded")
	if _, h := cap.last(); h.Get("Retry-After") != "1" || h.Get("Retry-After-Ms") != "500" {
		t.Errorf("Retry-After %q retry-after-ms %q, want 1 and 500", h.Get("Retry-After"), h.Get("Retry-After-Ms"))
	}
	clk.Advance(500 * time.Millisecond)
	if err := call(); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	apiError(t, call(), 429, "rate_limit_exceeded")
	st := srv.Stats()
	if st.Faults["rate_limited"] != 2 || st.Totals.Responses["200"] != 3 {
		t.Errorf("stats %+v %+v", st.Faults, st.Totals)
	}
}
