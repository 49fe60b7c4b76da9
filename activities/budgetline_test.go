package activities

import (
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestCallsWaitingForTheBudgetAreServedInTurn: two calls whose first
// requests failed wait for a spent retry budget, "old" refused first.
// When the traffic earns one retry, "young" is still refused (the retry
// goes to the call that waited longer, and its reason says so) and "old"
// sends its retry. Before, whichever rechecked first took it: in the 5 s
// flap, the call refused first waited out call.max_wait and took the FAQ
// while calls refused after it were answered.
func TestCallsWaitingForTheBudgetAreServedInTurn(t *testing.T) {
	a, err := New(Options{Config: config.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	failed := callstate.Outcome{Class: failure.ServerError}
	oldIn, youngIn := afterAFailedFirstAttempt(t, a, failed), afterAFailedFirstAttempt(t, a, failed)
	prepare := func(in PrepareInput, call string) Prepared {
		t.Helper()
		p, err := a.prepareAttempt(in, call)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sent := func(p Prepared) bool { return p.Model != "" && !p.Recheck }
	if p := prepare(oldIn, "run-old"); sent(p) {
		t.Fatalf("old sent a retry from a spent budget: %+v", p)
	}
	time.Sleep(5 * time.Millisecond)
	if p := prepare(youngIn, "run-young"); sent(p) {
		t.Fatalf("young sent a retry from a spent budget: %+v", p)
	}
	now := time.Now()
	for _, e := range a.endpoints() { // the traffic earns one retry on each
		for b := a.budgets.For(e); b.Remaining(now) < 1; {
			b.RecordRequest(now)
		}
	}
	p := prepare(youngIn, "run-young")
	if sent(p) {
		t.Fatalf("young took the retry while old, refused before it, waits: %+v", p)
	}
	if !p.Recheck || !strings.Contains(p.HoldReason, "waited longer") {
		t.Errorf("young's wait: recheck %v, %q; want a wait that says older calls come first", p.Recheck, p.HoldReason)
	}
	if p := prepare(oldIn, "run-old"); !sent(p) {
		t.Fatalf("old, first in line, did not send its retry: model %q, %s", p.Model, p.HoldReason)
	}
}

// TestARungTheBudgetRefusesBooksNoPaceTurn: the guard decides a rung
// before the walk claims anything, so a paced rung that the retry budget
// then refuses keeps its scope's turn for a request that is sent. (The
// walk used to book the pace's turn as it met rule pace, and a refusal by
// rule budget after it left the turn booked: a paced scope lost a request
// of its rpm to every retry the budget refused.)
func TestARungTheBudgetRefusesBooksNoPaceTurn(t *testing.T) {
	cfg := config.DefaultConfig()
	for i := range cfg.Models {
		cfg.Models[i].RPM = 60
	}
	a, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	in := afterAFailedFirstAttempt(t, a, callstate.Outcome{Class: failure.ServerError})
	turns := func() map[string]time.Duration {
		now := time.Now()
		out := map[string]time.Duration{}
		for _, m := range cfg.Models {
			out[m.Name] = a.pacer.Turn(m.Scope(m.RateLimitScope), now, 60, 0, 1)
		}
		return out
	}
	before := turns()
	p, err := a.prepareAttempt(in, "run")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Recheck || !strings.Contains(p.HoldReason, "retry budget") {
		t.Fatalf("the retry was not refused by the budget (model %q, %s): the test shows nothing", p.Model, p.HoldReason)
	}
	after := turns()
	for m, w := range after {
		if w > before[m]+100*time.Millisecond {
			t.Errorf("%s: its next turn moved from %v to %v away: a rung the budget refused booked a pace turn", m, before[m], w)
		}
	}
}
