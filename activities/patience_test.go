package activities

import (
	"context"
	"fmt"
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
// spent, the step after a cut would be the FAQ, and once every model's
// breaker is open it would be a wait for their trials: the attempt then
// keeps its request open within its timeout, and the slow model's answer
// reaches the caller. (In the slowdown with three workers a call was cut
// with every breaker open, waited for the trials until its deadline and
// took the FAQ, its request about 2 s from its answer.)
func TestSlowUpstreamIsWaitedForWhenRetriesFail(t *testing.T) {
	reply := sse{headerDelay: 600 * time.Millisecond, done: true,
		events: []sseEvent{{data: delta("Your parcel ")}, {data: delta("ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	var onRequest atomic.Pointer[func()] // run as each request arrives
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := onRequest.Load(); f != nil {
			(*f)()
		}
		reply.serve(w, r)
	}))
	defer srv.Close()
	for _, why := range []string{"", "retries fail", "budget spent", "breakers open"} {
		retriesFail := why != ""
		a := slowFirstTokenActivities(t, srv.URL)
		cfg := a.cfg
		onRequest.Store(nil)
		switch why {
		case "budget spent":
			spendRetries(a, 0)
		case "breakers open":
			// Every breaker opens once the request is sent (other calls'
			// failures), before its first token is overdue.
			trip := func() {
				for _, m := range cfg.Models {
					a.breakers.Trip(m.Name, time.Now())
				}
			}
			onRequest.Store(&trip)
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

// spendRetries spends the retry budget of every endpoint of a's ladder
// down to leave retries.
func spendRetries(a *Activities, leave int) {
	now := time.Now()
	for _, e := range a.endpoints() {
		for b := a.budgets.For(e); b.Remaining(now) > leave; {
			b.TryRetry(now)
		}
	}
}

// quickOrLateServer answers a request that mentions "quick" at once and
// any other after firstToken.
func quickOrLateServer(firstToken time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reply := sse{headerDelay: firstToken, done: true,
			events: []sseEvent{{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
		if strings.Contains(string(body), "quick") {
			reply.headerDelay = 0
		}
		reply.serve(w, r)
	}))
}

// TestALostRequestIsCutWhenRetriesFail: retries after read_timeout fail
// too often across the process (as after a hang), so an attempt whose
// first token is overdue keeps its request open rather than go to the
// FAQ. Its request hangs; then the endpoint answers a request sent after
// it. That one is lost, not slow: the attempt is cut within a recheck of
// being passed over (not at its timeout), marked passed over, and the step
// after it is a retry the class breaker does not refuse, since the
// endpoint serves. Before, such an attempt waited to its timeout and the
// call went to the FAQ: in the hang benchmark, four in five of the calls
// started during the hang, all with seconds left after it ended.
func TestALostRequestIsCutWhenRetriesFail(t *testing.T) {
	srv := quickOrLateServer(time.Hour)
	defer srv.Close()
	a := slowFirstTokenActivities(t, srv.URL)
	for range 2 * a.cfg.Breaker.ClassMinRetries {
		a.classes.Record(failure.ReadTimeout, time.Now(), false)
	}
	if a.classes.Allow(failure.ReadTimeout, time.Now()) {
		t.Fatal("the class breaker did not open for read_timeout")
	}
	type result struct {
		err  error
		took time.Duration
	}
	lost := make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 5*time.Second)
		lost <- result{err, time.Since(start)}
	}()
	time.Sleep(500 * time.Millisecond)
	if _, err := callAttempt(t, a, "A quick question", callstate.Shape{}, 3*time.Second); err != nil {
		t.Fatalf("the quick request failed: %v", err)
	}
	r := <-lost
	if r.err == nil {
		t.Fatal("a request that never answers was answered")
	}
	if r.took > 2*time.Second {
		t.Fatalf("the lost request was cut after %v, want within a recheck of being passed over (at 0.5 s), not at its 5 s timeout", r.took.Round(time.Millisecond))
	}
	out, _ := failedOutcome(t, r.err)
	if out.Class != failure.ReadTimeout || !out.PassedOver || !strings.Contains(out.Reason, "passed over") {
		t.Fatalf("outcome %s passed_over=%v (%q), want read_timeout passed over", out.Class, out.PassedOver, out.Reason)
	}
	m := a.cfg.Models[0]
	st := callstate.State{Model: m.Name, Requests: 1, Deadline: 20 * time.Second}.StartWith(m.Name, "")
	for _, o := range a.cfg.Models[1:] {
		st.Tried = append(st.Tried, o.Name) // no model to switch to: retry or the FAQ
	}
	for _, passed := range []bool{false, true} {
		step, err := a.DecideNext(context.Background(), DecideInput{State: st, Outcome: callstate.Outcome{Class: failure.ReadTimeout, Elapsed: r.took, PassedOver: passed}})
		if err != nil {
			t.Fatal(err)
		}
		retried := step.Kind != callstate.Fallback && step.Kind != callstate.Fail
		if retried != passed {
			t.Errorf("passed over %v: step %s (%s), want a retry only for the request passed over", passed, step.Decision, step.Reason)
		}
	}
}

// TestAKeptRequestStaysKeptWhenRetriesReturn: retries after read_timeout
// fail too often (the class breaker is open), so an attempt whose first
// token is overdue keeps its request open. Then retries succeed again and
// the class breaker closes, while the request still hangs and nothing
// passes it over. The attempt stays kept to its timeout: a cut now would
// pay for a second request while the first may still answer, and in a
// hang that lasts every kept attempt would be cut each time a breaker
// let trials through (40 calls on a hung endpoint sent 59 requests, over
// the 54 the retry budget allows them, before the rule).
func TestAKeptRequestStaysKeptWhenRetriesReturn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read: the server then sees the client leave
		sse{headerDelay: time.Hour, done: true, events: []sseEvent{{data: delta("late")}}}.serve(w, r)
	}))
	defer srv.Close()
	a := slowFirstTokenActivities(t, srv.URL)
	for range 2 * a.cfg.Breaker.ClassMinRetries {
		a.classes.Record(failure.ReadTimeout, time.Now(), false)
	}
	if a.classes.Allow(failure.ReadTimeout, time.Now()) {
		t.Fatal("the class breaker did not open for read_timeout")
	}
	go func() {
		time.Sleep(400 * time.Millisecond) // past the 200 ms first-token timeout
		for range 20 * a.cfg.Breaker.ClassMinRetries {
			a.classes.Record(failure.ReadTimeout, time.Now(), true)
		}
	}()
	start := time.Now()
	_, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 2*time.Second)
	took := time.Since(start)
	if !a.classes.Allow(failure.ReadTimeout, time.Now()) {
		t.Fatal("the class breaker did not close again")
	}
	out, _ := failedOutcome(t, err)
	if out.Class == failure.ReadTimeout || took < 1500*time.Millisecond {
		t.Fatalf("the kept request was cut after %v as %s (%s), want it kept to its 2 s timeout", took.Round(time.Millisecond), out.Class, out.Reason)
	}
}

// TestALostRequestWithNoRetryLeftIsKept: after a slowdown, the requests
// sent in it are answered late while new ones are served at once, so each
// old one is passed over. With the endpoint's retry budget spent, a cut
// could only end in the FAQ: the request is kept and its late answer
// reaches the caller (in the slowdown benchmark, cutting such requests
// sent 62 of the 100 calls started in it to the FAQ). So too when the
// budget has a retry but a call refused before waits in its line for it:
// a cut would only join the line behind it (in the slowdown with three
// workers, calls cut that way waited for the budget until their
// deadline and took the FAQ, their requests about 2 s from their answers).
func TestALostRequestWithNoRetryLeftIsKept(t *testing.T) {
	for _, why := range []string{"budget spent", "retry claimed by the line"} {
		t.Run(why, func(t *testing.T) { lostRequestIsKept(t, why == "retry claimed by the line") })
	}
}

func lostRequestIsKept(t *testing.T, line bool) {
	srv := quickOrLateServer(1200 * time.Millisecond)
	defer srv.Close()
	a := slowFirstTokenActivities(t, srv.URL)
	spendRetries(a, 0)
	if line {
		now := time.Now()
		for _, e := range a.endpoints() {
			b := a.budgets.For(e)
			if ok, _, _ := b.TryRetryInTurn(now, "", "call-refused-before"); ok {
				t.Fatal("a spent budget gave a retry")
			}
			for b.Remaining(now) < 1 {
				b.RecordRequest(now) // the traffic earns one retry
			}
			if b.Free(now) != 0 {
				t.Fatalf("budget of %s: %d retries free with its one retry claimed by the call in line", e, b.Free(now))
			}
		}
	}
	late := make(chan error, 1)
	go func() {
		v, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 5*time.Second)
		if err == nil {
			var out CallOutcome
			if err = v.Get(&out); err == nil && out.Content != "Your parcel ships today." {
				err = fmt.Errorf("answer %q, want the late model's", out.Content)
			}
		}
		late <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if _, err := callAttempt(t, a, "A quick question", callstate.Shape{}, 3*time.Second); err != nil {
		t.Fatalf("the quick request failed: %v", err)
	}
	if err := <-late; err != nil {
		t.Fatalf("the request passed over with no retry left was not kept to its answer: %v", err)
	}
}

// TestTheLastRetryGoesToTheFirstCut: one retry is left in the budget when
// two attempts, started 100 ms apart on a server that answers after
// 1.2 s, pass their 200 ms first_token_timeout. The first is cut (its
// retry is left); the second finds the same retry still unpaid, since
// the first's is paid only at the workflow's next step, so a cut would
// end in the FAQ: it keeps its request and the model's answer comes. Both
// were cut before, and in the slowdown benchmark one call of 100 waited
// for the budget that way and took the FAQ, its request about 2 s from
// its answer.
func TestTheLastRetryGoesToTheFirstCut(t *testing.T) {
	srv := quickOrLateServer(1200 * time.Millisecond)
	defer srv.Close()
	a := slowFirstTokenActivities(t, srv.URL)
	spendRetries(a, 1) // every model is on srv's endpoint: one retry left
	type result struct {
		out CallOutcome
		err error
	}
	results := make([]chan result, 2)
	for i := range results {
		results[i] = make(chan result, 1)
		go func() {
			v, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 5*time.Second)
			var out CallOutcome
			if err == nil {
				err = v.Get(&out)
			}
			results[i] <- result{out, err}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	first, second := <-results[0], <-results[1]
	if first.err == nil {
		t.Fatal("the first overdue attempt was kept, with a retry left for it")
	}
	if out, _ := failedOutcome(t, first.err); out.Class != failure.ReadTimeout {
		t.Fatalf("the first attempt failed as %s, want read_timeout", out.Class)
	}
	if second.err != nil {
		t.Fatalf("the second overdue attempt was cut while the one retry left went to the first: %v", second.err)
	}
	if second.out.Content != "Your parcel ships today." {
		t.Fatalf("the second attempt answered %q, want the late model's answer", second.out.Content)
	}
}

// TestCutsCountUntilPaid: the retries that the cuts of the last cutSettle
// take are not paid in the budget until their calls prepare their next
// attempts; an overdue attempt is cut only when one is left beyond them
// and beyond the older attempts waiting on its endpoint that are not kept
// (they are cut first).
func TestCutsCountUntilPaid(t *testing.T) {
	s := newStalls()
	t0 := time.Now()
	old, doneOld := s.wait("run-old", "ep", "m", t0)
	defer doneOld()
	young, doneYoung := s.wait("run-young", "ep", "m", t0.Add(100*time.Millisecond))
	defer doneYoung()
	if s.overdue(young, t0.Add(time.Second), 1) {
		t.Error("cut with one retry left and an older attempt to be cut before it")
	}
	old.kept.Store(true)
	if !s.overdue(young, t0.Add(time.Second), 1) {
		t.Error("kept with one retry left and the older attempt kept (it takes no retry)")
	}
	other, doneOther := s.wait("run-other", "ep2", "m", t0.Add(200*time.Millisecond))
	defer doneOther()
	if s.overdue(other, t0.Add(time.Second+cutSettle/2), 1) {
		t.Error("cut on another endpoint while the one retry left is the earlier cut's, unpaid")
	}
	if !s.overdue(other, t0.Add(time.Second+cutSettle), 1) {
		t.Errorf("kept %v after the earlier cut, which no step of its call paid: it is forgotten by then", cutSettle)
	}
	last, doneLast := s.wait("run-last", "ep2", "m", t0.Add(300*time.Millisecond))
	defer doneLast()
	if s.overdue(last, t0.Add(time.Second+cutSettle), 1) {
		t.Error("cut while the one retry left is the other's, whose call has not prepared its retry")
	}
	s.prepared("run-other")
	if !s.overdue(last, t0.Add(time.Second+cutSettle), 1) {
		t.Error("kept after the other's call prepared its retry: the budget shows it, and one is left")
	}
}

// TestPassedOverSaysWhichModelServes: a request passed over is lost; the
// breaker of its model leaves it out only when that model itself served
// the later request (it works now), not when another model on the
// endpoint did (the model may be the one that hangs).
func TestPassedOverSaysWhichModelServes(t *testing.T) {
	s := newStalls()
	t0 := time.Now()
	big, doneBig := s.wait("", "ep", "qwen-72b", t0)
	defer doneBig()
	small, doneSmall := s.wait("", "ep", "qwen-14b", t0)
	defer doneSmall()
	if lost, _ := s.lost(big, t0.Add(10*time.Second), 10); lost {
		t.Fatal("lost before the endpoint served anything")
	}
	s.firstToken("ep", "qwen-72b", t0.Add(9*time.Second))
	for _, c := range []struct {
		w       *stallWait
		byModel bool
	}{{big, true}, {small, false}} {
		if _, cut := s.lost(c.w, t0.Add(10*time.Second), 10); !cut || !c.w.passed.Load() {
			t.Errorf("%s: a request started 9 s after it and served: not passed over", c.w.model)
		}
		if got := c.w.byModel.Load(); got != c.byModel {
			t.Errorf("%s: served by its own model = %v, want %v", c.w.model, got, c.byModel)
		}
	}
	other, doneOther := s.wait("", "ep", "qwen-72b", t0.Add(8*time.Second))
	defer doneOther()
	if lost, _ := s.lost(other, t0.Add(10*time.Second), 10); lost {
		t.Error("a request started 1 s after one waiting 2 s passed it over (half its wait is the bar)")
	}
	// Retries for one: the two oldest passed over are cut (the same
	// start), one started after them is kept, since its cut would find
	// the budget spent by theirs.
	young, doneYoung := s.wait("", "ep", "qwen-72b", t0.Add(time.Second))
	defer doneYoung()
	if lost, cut := s.lost(young, t0.Add(10*time.Second), 1); !lost || cut || young.passed.Load() {
		t.Errorf("with one retry left and two older requests passed over: lost %v, cut %v, marked %v; want lost, kept, unmarked", lost, cut, young.passed.Load())
	}
	if lost, cut := s.lost(young, t0.Add(10*time.Second), 3); !lost || !cut {
		t.Errorf("with three retries left: lost %v, cut %v; want cut", lost, cut)
	}
}
