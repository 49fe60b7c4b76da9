package activities

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestSlowUpstreamIsWaitedForWhenRetriesFail: an upstream whose first
// token comes after 600 ms, past the model's 200 ms first_token_timeout.
// Normally the attempt is cut there (read_timeout: prune and retry, or
// switch). Once retries after read_timeout fail too often across the
// process (the class breaker is open), or the endpoint's retry budget is
// spent, the step after a cut would be the FAQ: the attempt then keeps
// its request open within its timeout, and the slow model's answer
// reaches the caller.
func TestSlowUpstreamIsWaitedForWhenRetriesFail(t *testing.T) {
	reply := sse{headerDelay: 600 * time.Millisecond, done: true,
		events: []sseEvent{{data: delta("Your parcel ")}, {data: delta("ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	srv := httptest.NewServer(http.HandlerFunc(reply.serve))
	defer srv.Close()
	for _, why := range []string{"", "retries fail", "budget spent"} {
		retriesFail := why != ""
		a := slowFirstTokenActivities(t, srv.URL)
		cfg := a.cfg
		switch why {
		case "budget spent": // every model is on srv's endpoint
			for a.budgets.For(cfg.Models[0].Endpoint()).TryRetry(time.Now()) {
			}
		case "retries fail":
			for range 2 * cfg.Breaker.ClassMinRetries {
				a.classes.Record(failure.ReadTimeout, time.Now(), false)
			}
			if a.classes.Allow(failure.ReadTimeout, time.Now()) {
				t.Fatal("the class breaker did not open for read_timeout")
			}
		}
		v, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 3*time.Second)
		if !retriesFail {
			if err == nil {
				t.Fatal("a first token past first_token_timeout was waited for while retries work")
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: the slow answer was cut: %v", why, err)
		}
		var out CallOutcome
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		if out.Content != "Your parcel ships today." {
			t.Errorf("answer %q, want the slow model's", out.Content)
		}
	}
}

// TestAQueuedEndpointKeepsItsPlace: an endpoint slow for every request
// (first token after 300 ms, past the 200 ms first_token_timeout) with
// no other endpoint to move to. Five attempts waiting there at once see a
// queue: a cut would only join its back again, so each waits (up to one
// more first-token timeout) and every caller gets the model's answer,
// also when the server's latencies vary and the later of them are served
// first. One attempt alone is cut as before (one slow request says
// little), and so are attempts that a request started well after them
// passed: the endpoint served that one, so the old ones are lost, not
// queued.
func TestAQueuedEndpointKeepsItsPlace(t *testing.T) {
	var arrivals atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reply := sse{headerDelay: 300 * time.Millisecond, done: true,
			events: []sseEvent{{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
		switch {
		case strings.Contains(string(body), "quick"):
			reply.headerDelay = 0
		case strings.Contains(string(body), "varied"):
			// The first to arrive waits longest: 380, 340, … 220 ms.
			reply.headerDelay = 380*time.Millisecond - time.Duration(arrivals.Add(1)-1)*40*time.Millisecond
		}
		reply.serve(w, r)
	}))
	defer srv.Close()
	newActivities := func() *Activities { return slowFirstTokenActivities(t, srv.URL) }
	// run starts n slow attempts on a, each gap after the one before (the
	// prompt picks the server's latencies), and after 150 ms a quick one if
	// passed; it returns how many of the slow ones the model answered.
	run := func(a *Activities, n int, prompt string, gap time.Duration, passed bool) (answered int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range n {
			wg.Go(func() {
				v, err := callAttempt(t, a, prompt, callstate.Shape{}, 3*time.Second)
				var out CallOutcome
				if err == nil && v.Get(&out) == nil && out.Content == "Your parcel ships today." {
					mu.Lock()
					answered++
					mu.Unlock()
				}
			})
			time.Sleep(gap)
		}
		if passed {
			time.Sleep(150 * time.Millisecond)
			if _, err := callAttempt(t, a, "A quick question", callstate.Shape{}, 3*time.Second); err != nil {
				t.Errorf("the quick request failed: %v", err)
			}
		}
		wg.Wait()
		return answered
	}
	if got := run(newActivities(), 1, "Where is my parcel?", 0, false); got != 0 {
		t.Errorf("one slow attempt alone was waited for past first_token_timeout (%d answered)", got)
	}
	if got := run(newActivities(), 5, "Where is my parcel?", 0, false); got != 5 {
		t.Errorf("%d of 5 attempts queued on a slow endpoint got the model's answer, want all (a cut only queues again)", got)
	}
	if got := run(newActivities(), 5, "Where is my parcel? (varied)", 5*time.Millisecond, false); got != 5 {
		t.Errorf("%d of 5 attempts on a slow endpoint whose later requests were served a moment sooner got the model's answer, want all", got)
	}
	if got := run(newActivities(), 5, "Where is my parcel?", 0, true); got != 0 {
		t.Errorf("%d of 5 attempts that a request started 150 ms later passed were waited for, want each cut", got)
	}
}

// slowFirstTokenActivities are the activities of the default policy with
// every model on url and a 200 ms first_token_timeout.
func slowFirstTokenActivities(t *testing.T, url string) *Activities {
	t.Helper()
	cfg := config.DefaultConfig()
	for i := range cfg.Models {
		cfg.Models[i].BaseURL = url + "/v1"
		cfg.Models[i].FirstTokenTimeout = config.Duration(200 * time.Millisecond)
	}
	a, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
