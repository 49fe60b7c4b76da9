package activities

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

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

// endpoints lists the endpoints of the ladder's models, each once.
func (a *Activities) endpoints() []string {
	endpoints := make([]string, 0, len(a.cfg.Models))
	for _, l := range a.cfg.Models {
		if !slices.Contains(endpoints, l.Endpoint()) {
			endpoints = append(endpoints, l.Endpoint())
		}
	}
	return endpoints
}

// TestAnOverdueRequestIsKeptOpen: an upstream whose first token comes
// after 600 ms, past the model's 200 ms first_token_timeout, answers the
// attempt: the request is never cut for being late, whatever the guards
// say (retries working, the budget spent, every breaker open), since a
// retry could only be slower. One request reaches the upstream.
func TestAnOverdueRequestIsKeptOpen(t *testing.T) {
	reply := sse{headerDelay: 600 * time.Millisecond, done: true,
		events: []sseEvent{{data: delta("Your parcel ")}, {data: delta("ships today.")}, {data: finish("stop")}, {data: usageChunk}}}
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		reply.serve(w, r)
	}))
	defer srv.Close()
	for _, guards := range []string{"working", "budget spent", "breakers open"} {
		t.Run(guards, func(t *testing.T) {
			requests = 0
			a := slowFirstTokenActivities(t, srv.URL)
			switch guards {
			case "budget spent":
				spendRetries(a, 0)
			case "breakers open":
				for _, m := range a.cfg.Models[1:] {
					a.breakers.Trip(m.Name, time.Now())
				}
			}
			v, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 3*time.Second)
			if err != nil {
				t.Fatalf("the late answer was cut: %v", err)
			}
			var out CallOutcome
			if err := v.Get(&out); err != nil {
				t.Fatal(err)
			}
			if out.Content != "Your parcel ships today." || requests != 1 {
				t.Errorf("answer %q in %d request(s), want the slow model's in one", out.Content, requests)
			}
		})
	}
}

// TestAnOverdueRequestEndsAtItsTimeout: a request whose first token never
// comes is kept to the attempt's timeout, then judged read_timeout (no
// first token), not a timeout of a reply under way.
func TestAnOverdueRequestEndsAtItsTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server sees the client leave
		<-r.Context().Done()
	}))
	defer srv.Close()
	a := slowFirstTokenActivities(t, srv.URL)
	start := time.Now()
	_, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, 700*time.Millisecond)
	took := time.Since(start)
	out, _ := failedOutcome(t, err)
	if out.Class != failure.ReadTimeout {
		t.Fatalf("class %s (%s), want read_timeout", out.Class, out.Reason)
	}
	if took < 650*time.Millisecond {
		t.Errorf("cut after %v, before the attempt's 700 ms timeout", took)
	}
}

// TestSoonerNamesWhereAHedgeCouldAnswer: the models a hedge of an overdue
// attempt may go to, those on other endpoints first, each group in the
// ladder's order. The attempt's own endpoint only once it gives a request
// sent after the attempt its first token in time and answers at least half
// of the requests of the last quarter of a first-token timeout; another
// endpoint unless a request of this process waits there
// past its first-token timeout; never a model behind an open breaker, on
// an ejected endpoint, or on its own endpoint when that one's retry budget
// is spent (a hedge elsewhere is that endpoint's first request of the call).
func TestSoonerNamesWhereAHedgeCouldAnswer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ftt := 8 * time.Second
	newA := func() *Activities {
		cfg := config.DefaultConfig()
		// qwen-72b and qwen-14b on endpoint a, llama-8b on endpoint b.
		cfg.Models[0].BaseURL, cfg.Models[1].BaseURL, cfg.Models[2].BaseURL = "http://a/v1", "http://a/v1", "http://b/v1"
		a, err := New(Options{Config: cfg, Now: func() time.Time { return t0.Add(9 * time.Second) }})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ea, eb := config.ModelConfig{BaseURL: "http://a/v1"}.Endpoint(), config.ModelConfig{BaseURL: "http://b/v1"}.Endpoint()
	// sent sends a request to endpoint e at at, answered after ttft (0:
	// not answered, lost).
	sent := func(a *Activities, e string, at time.Time, ttft time.Duration) {
		done := a.queues.wait(e, at, ftt)
		if ttft > 0 {
			a.queues.firstToken(e, at, ttft, ftt)
			done()
		}
	}
	cases := []struct {
		name  string
		setup func(a *Activities)
		want  []string
	}{
		{"nothing served since: another endpoint", func(a *Activities) {}, []string{"llama-8b"}},
		{"own endpoint answers a later request in time", func(a *Activities) {
			sent(a, ea, t0.Add(7500*time.Millisecond), 500*time.Millisecond)
		}, []string{"llama-8b", "qwen-72b", "qwen-14b"}},
		{"own endpoint answers a later request in time, the other is as slow", func(a *Activities) {
			sent(a, ea, t0.Add(7500*time.Millisecond), 500*time.Millisecond)
			a.queues.wait(eb, t0, ftt)
		}, []string{"qwen-72b", "qwen-14b"}},
		{"own endpoint answers a later request but loses most: no race there (adaptive throttling, K = 2)", func(a *Activities) {
			sent(a, ea, t0.Add(7500*time.Millisecond), 500*time.Millisecond)
			for k := range 3 {
				sent(a, ea, t0.Add(7*time.Second+time.Duration(k)*500*time.Millisecond), 0)
			}
			a.queues.wait(eb, t0, ftt)
		}, nil},
		{"own endpoint answered a later request before the last quarter of the timeout, none sent since: nothing says it loses them", func(a *Activities) {
			sent(a, ea, t0.Add(3*time.Second), 500*time.Millisecond)
			a.queues.wait(eb, t0, ftt)
		}, []string{"qwen-72b", "qwen-14b"}},
		{"own endpoint answers half of the requests of the last quarter of the first-token timeout", func(a *Activities) {
			sent(a, ea, t0.Add(7500*time.Millisecond), 500*time.Millisecond)
			sent(a, ea, t0.Add(8*time.Second), 0)
			for k := range 4 { // before the last 2 s: out of view
				sent(a, ea, t0.Add(5*time.Second+time.Duration(k)*400*time.Millisecond), 0)
			}
			a.queues.wait(eb, t0, ftt)
		}, []string{"qwen-72b", "qwen-14b"}},
		{"a later request answered late says nothing", func(a *Activities) {
			sent(a, ea, t0.Add(time.Second), 9*time.Second)
		}, []string{"llama-8b"}},
		{"an earlier request answered in time says nothing", func(a *Activities) {
			sent(a, ea, t0.Add(-time.Second), time.Second)
		}, []string{"llama-8b"}},
		{"the other endpoint is as slow", func(a *Activities) {
			a.queues.wait(eb, t0, ftt)
		}, nil},
		{"the other endpoint waits, not yet overdue", func(a *Activities) {
			a.queues.wait(eb, t0.Add(5*time.Second), ftt)
		}, []string{"llama-8b"}},
		{"the other endpoint's budget is spent: a hedge there is its ordinary load, not a retry", func(a *Activities) {
			for b, now := a.budgets.For(eb), a.now(); b.Remaining(now) > 0; {
				b.TryRetry(now)
			}
		}, []string{"llama-8b"}},
		{"own endpoint answers, its budget spent: a hedge there is a retry", func(a *Activities) {
			sent(a, ea, t0.Add(7500*time.Millisecond), 500*time.Millisecond)
			for b, now := a.budgets.For(ea), a.now(); b.Remaining(now) > 0; {
				b.TryRetry(now)
			}
		}, []string{"llama-8b"}},
		{"the other endpoint is ejected", func(a *Activities) {
			for range guard.OutlierRefusals {
				a.outliers.Record(eb, guard.Busy, t0, t0.Add(9*time.Second), 0, 0)
			}
		}, nil},
		{"the other endpoint's model breaker is open", func(a *Activities) {
			a.breakers.Trip("llama-8b", t0.Add(9*time.Second))
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newA()
			tc.setup(a)
			m, _ := a.cfg.Model("qwen-72b")
			got, why := a.sooner(CallInput{Model: m.Name}, m, t0, a.now())
			if !slices.Equal(got, tc.want) {
				t.Errorf("sooner = %v, want %v", got, tc.want)
			}
			if (why == "") != (len(got) == 0) {
				t.Errorf("why %q for %v", why, got)
			}
		})
	}
}

// TestTheFirstFirstTokenWinsTheRace: of a hedged attempt's two requests
// in one process, the first to give a first token wins and cuts the
// other at once; a side joining after the race was won is cut as it joins.
func TestTheFirstFirstTokenWinsTheRace(t *testing.T) {
	var r races
	pctx, pcut := context.WithCancelCause(context.Background())
	leaveP := r.join(raceKey("run", 1, false), pcut)
	hctx, hcut := context.WithCancelCause(context.Background())
	leaveH := r.join(raceKey("run", 1, true), hcut)
	if !r.win("run", 1, true) {
		t.Fatal("the hedge's first token, the race's first, did not win")
	}
	if !errors.Is(context.Cause(pctx), errCutByRace) {
		t.Error("the primary was not cut by the hedge's first token")
	}
	if hctx.Err() != nil {
		t.Error("the winner was cut")
	}
	if r.win("run", 1, false) {
		t.Error("the primary's later first token won too")
	}
	leaveP()
	lctx, lcut := context.WithCancelCause(context.Background())
	leaveL := r.join(raceKey("run", 1, false), lcut)
	if !errors.Is(context.Cause(lctx), errCutByRace) {
		t.Error("a primary joining the race its hedge won was not cut")
	}
	leaveL()
	leaveH()
	if len(r.won) != 0 || len(r.by) != 0 {
		t.Errorf("race state left behind: won %v, by %d", r.won, len(r.by))
	}
}

// TestAnOverdueRequestToAServerThatStopsIsCutWhenItCannotStartInTime: a
// server that stops working on a request its client leaves (vLLM), whose
// recent requests waited 5 s for their first token (p90), and an attempt
// with 1 s to go: at its 200 ms first-token timeout the request is cut,
// freeing the server's slot, since it is not expected to start in time.
// Where the p90 leaves time, or on a server that works on regardless,
// it is kept.
func TestAnOverdueRequestToAServerThatStopsIsCutWhenItCannotStartInTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		stops bool
		p90   time.Duration
		cut   bool
	}{
		{"stops, p90 past the deadline", true, 5 * time.Second, true},
		{"stops, p90 within the deadline", true, 300 * time.Millisecond, false},
		{"works on regardless", false, 5 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := slowFirstTokenActivities(t, srv.URL)
			a.cfg.Models[0].StopsOnDisconnect = tc.stops
			for range guard.MinSamples {
				a.firstTokens.Add(a.cfg.Models[0].Name, tc.p90)
			}
			start := time.Now()
			_, err := callAttempt(t, a, "Where is my parcel?", callstate.Shape{}, time.Second)
			took := time.Since(start)
			out, _ := failedOutcome(t, err)
			if out.Class != failure.ReadTimeout {
				t.Fatalf("class %s (%s), want read_timeout", out.Class, out.Reason)
			}
			if cut := took < 700*time.Millisecond; cut != tc.cut {
				t.Errorf("ended after %v (%s); want cut at the first-token timeout: %v", took, out.Reason, tc.cut)
			}
			if tc.cut && !strings.Contains(out.Reason, "stops on disconnect") {
				t.Errorf("reason %q does not say why it was cut", out.Reason)
			}
		})
	}
}
