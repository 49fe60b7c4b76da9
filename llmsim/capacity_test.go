package llmsim_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
	openai "github.com/sashabaranov/go-openai"
)

type timed struct {
	i       int
	end     time.Time
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
			out[i] = timed{i: i, err: err, elapsed: time.Since(begin), end: time.Now(), status: st, header: h}
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
	begin := time.Now()
	res := fire(t, srv, "m", 4, 0, 5*time.Second)
	var ends []time.Duration
	for _, r := range res {
		if r.err != nil {
			t.Fatalf("request %d: %v", r.i, r.err)
		}
		ends = append(ends, r.end.Sub(begin))
	}
	// One slot: the k-th answer cannot come before (k+1) x 100 ms.
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	for k, e := range ends {
		if lo := time.Duration(k+1) * 100 * time.Millisecond; e < lo {
			t.Errorf("answer %d after %v, want >= %v", k, e, lo)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Queueing time is part of the latency.
	sort.Slice(recs, func(i, j int) bool { return recs[i].Queued < recs[j].Queued })
	for k, r := range recs {
		if r.Service != 100*time.Millisecond || r.Duration < r.Queued+r.Service {
			t.Errorf("request %d: queued %v service %v duration %v", k, r.Queued, r.Service, r.Duration)
		}
	}
	if recs[3].Queued < 100*time.Millisecond {
		t.Errorf("longest queueing %v, want >= 100ms with 4 requests on 1 slot", recs[3].Queued)
	}
	m := srv.Stats().Models["m"]
	if m.PeakInFlight != 1 || m.PeakQueued < 1 || m.Completions != 4 || m.InFlight != 0 || m.Queued != 0 {
		t.Errorf("model counts %+v", m)
	}
}

func TestQueueFullRejectsAtOnce(t *testing.T) {
	for _, status := range []int{429, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := startScenario(t, fmt.Sprintf(`
models: [{name: m, slots: 2, queue: 2, latency: 600ms, reject_status: %d}]
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
					if r.elapsed > 500*time.Millisecond {
						t.Errorf("rejection took %v, want immediate (a queued request takes >= 600ms)", r.elapsed)
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
			launched := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			gaveUp := make(chan error)
			go func() {
				cl, _ := goClient(srv, 5*time.Second)
				_, err := cl.CreateChatCompletion(ctx, ask("m", "give up"))
				gaveUp <- err
			}()
			eventually(t, "the request to hold the slot", func() bool { in, _ := srv.InFlight("m"); return in == 1 })
			cancel()
			if err := <-gaveUp; err == nil {
				t.Fatal("the cancelled call succeeded")
			}
			eventually(t, "the server to see the client leave", func() bool {
				return srv.Stats().Totals.Responses[llmsim.OutcomeClientGone] == 1
			})
			if in, _ := srv.InFlight("m"); keep && in != 1 {
				t.Errorf("in-flight after the client left = %d, want 1 (the GPU keeps working)", in)
			}
			if !keep {
				eventually(t, "the slot to be freed", func() bool { in, _ := srv.InFlight("m"); return in == 0 })
			}
			patient, _ := goClient(srv, 5*time.Second)
			if _, err := patient.CreateChatCompletion(context.Background(), ask("m", "wait")); err != nil {
				t.Fatal(err)
			}
			if keep {
				// It waited for the abandoned work: two services of 400 ms.
				if took := time.Since(launched); took < 800*time.Millisecond {
					t.Errorf("second answer %v after the first request, want >= 800ms", took)
				}
			}
			eventually(t, "all work done", func() bool { in, q := srv.InFlight("m"); return in == 0 && q == 0 })
			st := srv.Stats().Totals
			wantDone := 1
			if keep {
				wantDone = 2
			}
			if st.Completions != wantDone || st.Responses[llmsim.OutcomeClientGone] != 1 || st.Abandoned != 1 || st.Responses["200"] != 1 {
				t.Errorf("totals %+v, want %d completions", st, wantDone)
			}
		})
	}
}

func TestAbandonedQueuedWorkStillRuns(t *testing.T) {
	// The first request holds the one slot for 1 s: long enough for the
	// second to queue and leave on a loaded machine (200 ms was not).
	srv := startScenario(t, `models: [{name: m, slots: 1, latency: 1s}]`, llmsim.Options{})
	done := make(chan error)
	go func() {
		cl, _ := goClient(srv, 5*time.Second)
		_, err := cl.CreateChatCompletion(context.Background(), ask("m", "first"))
		done <- err
	}()
	eventually(t, "the first request to hold the slot", func() bool { in, _ := srv.InFlight("m"); return in == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		impatient, _ := goClient(srv, 5*time.Second)
		_, err := impatient.CreateChatCompletion(ctx, ask("m", "second"))
		gaveUp <- err
	}()
	eventually(t, "the second request to queue", func() bool { _, q := srv.InFlight("m"); return q == 1 })
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	eventually(t, "the server to see the client leave", func() bool {
		return srv.Stats().Totals.Responses[llmsim.OutcomeClientGone] == 1
	})
	if in, q := srv.InFlight("m"); in != 1 || q != 1 {
		t.Errorf("in-flight %d queued %d after the client left, want 1 and 1", in, q)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, "the abandoned request to run", func() bool { in, _ := srv.InFlight("m"); return in == 1 })
	eventually(t, "it to finish", func() bool { return srv.Stats().Totals.Completions == 2 })
}

func TestLoadFactorSlowsFullBatches(t *testing.T) {
	var mu sync.Mutex
	var services []time.Duration
	srv := startScenario(t, `models: [{name: m, slots: 4, latency: 300ms, load_factor: 1}]`, llmsim.Options{
		OnRequest: func(r llmsim.Record) {
			mu.Lock()
			services = append(services, r.Service)
			mu.Unlock()
		}})
	for _, r := range fire(t, srv, "m", 4, 0, 5*time.Second) {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Each service is 300ms x (1 + busy/4) for the others busy at its start.
	var longest time.Duration
	for _, d := range services {
		if d < 300*time.Millisecond || d > 525*time.Millisecond || (d-300*time.Millisecond)%(75*time.Millisecond) != 0 {
			t.Errorf("service %v is not 300ms x (1 + k/4)", d)
		}
		longest = max(longest, d)
	}
	if longest == 300*time.Millisecond {
		t.Errorf("services %v: nothing was stretched", services)
	}
}

func TestRateLimitOnSimClock(t *testing.T) {
	clk := newFakeClock()
	srv := startScenario(t, `models: [{name: m, rate_limit: 2, burst: 2, ttft: 0s, itl: 0s}]`, llmsim.Options{Clock: clk.Now})
	cl, cap := goClient(srv, 5*time.Second)
	call := func() error {
		_, err := cl.CreateChatCompletion(context.Background(), ask("m", "rl"))
		return err
	}
	for i := range 2 {
		if err := call(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		// OpenAI's headers tell the headroom left after each request.
		_, h := cap.last()
		want := map[string]string{"x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": fmt.Sprint(1 - i), "x-ratelimit-reset-requests": fmt.Sprint(time.Duration(i+1) * 500 * time.Millisecond)}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, got, v)
			}
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

// TestRateLimitPerKey: with rate_limit_per_key each API key has a bucket
// of its own: a key that is out of requests gets 429 while another key of
// the same caller still gets answers, each told its own headroom.
func TestRateLimitPerKey(t *testing.T) {
	clk := newFakeClock()
	srv := startScenario(t, `models: [{name: m, rate_limit: 1, burst: 1, rate_limit_per_key: true, ttft: 0s, itl: 0s}]`, llmsim.Options{Clock: clk.Now})
	a, capA := goClient(srv, 5*time.Second, "Authorization", "Bearer sk-key-a")
	b, capB := goClient(srv, 5*time.Second, "Authorization", "Bearer sk-key-b")
	call := func(c *openai.Client) error {
		_, err := c.CreateChatCompletion(context.Background(), ask("m", "per key"))
		return err
	}
	if err := call(a); err != nil {
		t.Fatal(err)
	}
	if _, h := capA.last(); h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("key a's headroom after its request: %q, want 0", h.Get("x-ratelimit-remaining-requests"))
	}
	apiError(t, call(a), 429, "rate_limit_exceeded")
	if err := call(b); err != nil {
		t.Fatalf("key b was refused for key a's requests: %v", err)
	}
	if _, h := capB.last(); h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("key b's headroom: %q, want 0", h.Get("x-ratelimit-remaining-requests"))
	}
	apiError(t, call(b), 429, "rate_limit_exceeded")
	clk.Advance(time.Second)
	if err := call(a); err != nil {
		t.Fatalf("key a after the refill: %v", err)
	}
}

// TestPhaseRateLimit: a phase's rate_limit replaces the named model's
// limit while it lasts (a bucket of its own, one second of the rate), and
// leaves the other models and the other phases alone.
func TestPhaseRateLimit(t *testing.T) {
	clk := newFakeClock()
	srv := startScenario(t, `
models: [{name: m, ttft: 0s, itl: 0s}, {name: n, ttft: 0s, itl: 0s}]
phases:
  - {name: healthy, duration: 10s}
  - {name: quota, duration: 10s, rate_limit: {m: 2}}
  - {name: recovered}
`, llmsim.Options{Clock: clk.Now})
	cl, _ := goClient(srv, 5*time.Second)
	call := func(model string) error {
		_, err := cl.CreateChatCompletion(context.Background(), ask(model, "q"))
		return err
	}
	for i := range 5 {
		if err := call("m"); err != nil {
			t.Fatalf("healthy, request %d: %v", i, err)
		}
	}
	clk.Advance(10 * time.Second)
	for i := range 2 {
		if err := call("m"); err != nil {
			t.Fatalf("in the phase, request %d within the limit: %v", i, err)
		}
	}
	apiError(t, call("m"), 429, "rate_limit_exceeded")
	for i := range 5 {
		if err := call("n"); err != nil {
			t.Fatalf("the other model, request %d: %v", i, err)
		}
	}
	clk.Advance(500 * time.Millisecond)
	if err := call("m"); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	clk.Advance(10 * time.Second)
	for i := range 5 {
		if err := call("m"); err != nil {
			t.Fatalf("recovered, request %d: %v", i, err)
		}
	}
	if st := srv.Stats(); st.Faults["rate_limited"] != 1 {
		t.Errorf("rate_limited %d, want 1", st.Faults["rate_limited"])
	}
}

func TestPhaseRateLimitNamesABadModel(t *testing.T) {
	_, err := llmsim.ParseScenario([]byte(`
models: [{name: m}]
phases: [{name: p, rate_limit: {mm: 2, m: 0}}]
`), "s.yaml")
	if err == nil || !strings.Contains(err.Error(), `rate_limit.mm: unknown model "mm"`) || !strings.Contains(err.Error(), "rate_limit.m: want requests per second above 0") {
		t.Fatalf("err = %v", err)
	}
}
