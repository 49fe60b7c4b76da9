package activities

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestAnAnswerUnderWayRunsIntoTheGrace: an attempt bounded by the call's
// deadline (800 ms here) with a grace (1 s) from the fallback's reserve
// keeps its request open to the grace's end, answer started or not: an
// answer whose first token came at 300 ms and whose end comes at 1.2 s is
// kept to its end, and so is a request whose first byte comes at 1.2 s,
// where the attempt's deadline alone cut both; a request with no first
// token by the grace's end (1.8 s) is cut there (read_timeout).
func TestAnAnswerUnderWayRunsIntoTheGrace(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply sse
		grace time.Duration
		// want: the answer, or the class of the failure
		answer string
		class  failure.Class
		within time.Duration
	}{
		{"under way, with grace", sse{headerDelay: 300 * time.Millisecond, done: true, events: []sseEvent{
			{data: delta("Your parcel ")}, {after: 900 * time.Millisecond, data: delta("ships today.")}, {data: finish("stop")}, {data: usageChunk}}},
			time.Second, "Your parcel ships today.", failure.None, 1600 * time.Millisecond},
		{"under way, no grace", sse{headerDelay: 300 * time.Millisecond, done: true, events: []sseEvent{
			{data: delta("Your parcel ")}, {after: 900 * time.Millisecond, data: delta("ships today.")}, {data: finish("stop")}, {data: usageChunk}}},
			0, "", failure.Timeout, 1100 * time.Millisecond},
		{"first token in the grace", sse{headerDelay: 1200 * time.Millisecond, done: true, events: []sseEvent{
			{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}},
			time.Second, "Your parcel ships today.", failure.None, 1600 * time.Millisecond},
		{"first token in the grace, no grace", sse{headerDelay: 1200 * time.Millisecond, done: true, events: []sseEvent{
			{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}},
			0, "", failure.Timeout, 1100 * time.Millisecond},
		{"no first token by the grace's end", sse{headerDelay: 2500 * time.Millisecond, done: true, events: []sseEvent{
			{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}},
			time.Second, "", failure.ReadTimeout, 2100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(c.reply.serve))
			defer srv.Close()
			a := slowFirstTokenActivities(t, srv.URL)
			a.cfg.Models[0].FirstTokenTimeout = config.Duration(5 * time.Second)
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			m := a.cfg.Models[0]
			req := firstPrepare().Request
			in := CallInput{Request: req, Model: m.Name, Attempt: 1, Prompt: a.fitPrompt(req, m, firstPrepare().State.Shape), Timeout: 800 * time.Millisecond, Grace: c.grace}
			began := time.Now()
			v, err := env.ExecuteActivity(a.CallModel, in)
			took := time.Since(began)
			if c.class == failure.None {
				if err != nil {
					t.Fatalf("the answer under way was cut: %v", err)
				}
				var out CallOutcome
				if err := v.Get(&out); err != nil {
					t.Fatal(err)
				}
				if out.Content != c.answer {
					t.Fatalf("answer %q, want %q", out.Content, c.answer)
				}
			} else {
				if err == nil {
					t.Fatal("answered; want the attempt cut at its deadline")
				}
				if out, _ := failedOutcome(t, err); out.Class != c.class {
					t.Fatalf("class %s (%s), want %s", out.Class, out.Reason, c.class)
				}
			}
			if took > c.within {
				t.Errorf("took %v, want within %v", took, c.within)
			}
		})
	}
}

// TestALastChanceGoesWhenItsDelayEnds: a waiting call's last chance
// (CallInput.Delay) reaches the upstream no sooner than its delay after
// the attempt was scheduled, and its request then has its whole timeout
// (the delay is not taken from it).
func TestALastChanceGoesWhenItsDelayEnds(t *testing.T) {
	reply := sse{done: true, events: []sseEvent{{data: delta("Your parcel ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	arrived := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- time.Now()
		reply.serve(w, r)
	}))
	defer srv.Close()
	a := slowFirstTokenActivities(t, srv.URL)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	m := a.cfg.Models[0]
	req := firstPrepare().Request
	const delay = 700 * time.Millisecond
	in := CallInput{Request: req, Model: m.Name, Attempt: 1, Prompt: a.fitPrompt(req, m, firstPrepare().State.Shape),
		Timeout: 500 * time.Millisecond, Delay: delay}
	began := time.Now()
	v, err := env.ExecuteActivity(a.CallModel, in)
	if err != nil {
		t.Fatalf("the last chance failed: %v", err)
	}
	var out CallOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Content != "Your parcel ships today." {
		t.Fatalf("answer %q", out.Content)
	}
	if at := (<-arrived).Sub(began); at < delay-50*time.Millisecond {
		t.Fatalf("the request reached the upstream %v after the attempt began; want no sooner than its delay, %v", at, delay)
	}
}
