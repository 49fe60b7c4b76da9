package guard

import (
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// lineConfig is a budget whose reserve holds one retry (ratio 0.1, floor
// 1), earned by 10 requests, without a tenant share.
func lineConfig() config.BudgetConfig {
	c := budgetConfig(time.Minute, 0.1, 1)
	c.TenantShare = 0
	return c
}

// TestWaitingCallsAreServedInTurn: two calls are refused a retry by a
// spent budget, "old" first. When the traffic earns one retry, the call
// refused later is still refused while "old" rechecks; "old" gets it, and
// the next retry earned goes to "young". A call that stops rechecking
// gives up its place after waiterLive.
func TestWaitingCallsAreServedInTurn(t *testing.T) {
	const (
		old   = "run-old"
		young = "run-young"
	)
	b := NewRetryBudget(lineConfig())
	try := func(at time.Duration, call string) (bool, int) {
		t.Helper()
		ok, capped, ahead := b.TryRetryInTurn(budgetAt(at), "", call)
		if capped {
			t.Fatalf("%s at %s: capped without a tenant share", call, at)
		}
		return ok, ahead
	}
	earn := func(at time.Duration, requests int) {
		for range requests {
			b.RecordRequest(budgetAt(at))
		}
	}
	// The reserve starts full.
	if ok, _ := try(0, "first"); !ok {
		t.Fatal("the full reserve's retry was refused")
	}
	if ok, _ := try(100*time.Millisecond, old); ok {
		t.Fatal("old got a retry from a spent budget")
	}
	if ok, _ := try(200*time.Millisecond, young); ok {
		t.Fatal("young got a retry from a spent budget")
	}
	earn(300*time.Millisecond, 10)
	if ok, ahead := try(400*time.Millisecond, young); ok || ahead != 1 {
		t.Fatalf("young with one retry earned and old still waiting: ok %v, %d ahead; want refused, old ahead", ok, ahead)
	}
	if ok, _ := try(900*time.Millisecond, old); !ok {
		t.Fatal("old, first in line, was refused the retry earned for it")
	}
	if ok, _ := try(1000*time.Millisecond, young); ok {
		t.Fatal("young got a second retry the budget does not hold")
	}
	earn(1100*time.Millisecond, 10)
	if ok, ahead := try(1200*time.Millisecond, young); !ok {
		t.Fatalf("young, first in line now, refused (%d ahead)", ahead)
	}

	// A call that stops rechecking leaves the line.
	if ok, _ := try(2*time.Second, "gone"); ok {
		t.Fatal("gone got a retry from a spent budget")
	}
	if ok, _ := try(2100*time.Millisecond, "late"); ok {
		t.Fatal("late got a retry from a spent budget")
	}
	earn(2200*time.Millisecond, 10)
	if ok, ahead := try(2300*time.Millisecond, "late"); ok || ahead != 1 {
		t.Fatalf("late while gone rechecks: ok %v, %d ahead; want refused, one ahead", ok, ahead)
	}
	if ok, ahead := try(2*time.Second+waiterLive+200*time.Millisecond, "late"); !ok {
		t.Fatalf("late after gone stopped rechecking for %s: refused (%d ahead)", waiterLive, ahead)
	}
}

// TestARetryForNoCallComesAfterTheLine: a retry for no call in line (a
// hedge, a resend within an attempt) takes no place and is refused while
// the budget's retries are owed to the calls that wait for them.
func TestARetryForNoCallComesAfterTheLine(t *testing.T) {
	b := NewRetryBudget(lineConfig())
	b.TryRetryInTurn(budgetAt(0), "", "spender")
	if ok, _, _ := b.TryRetryInTurn(budgetAt(100*time.Millisecond), "", "waiting"); ok {
		t.Fatal("a retry from a spent budget")
	}
	for range 10 {
		b.RecordRequest(budgetAt(200 * time.Millisecond))
	}
	if ok, _ := b.TryRetryFor(budgetAt(300*time.Millisecond), ""); ok {
		t.Fatal("a retry for no call took the one retry owed to the waiting call")
	}
	if ok, _, _ := b.TryRetryInTurn(budgetAt(400*time.Millisecond), "", "waiting"); !ok {
		t.Fatal("the waiting call was refused its retry")
	}
	for range 10 {
		b.RecordRequest(budgetAt(500 * time.Millisecond))
	}
	if ok, _ := b.TryRetryFor(budgetAt(600*time.Millisecond), ""); !ok {
		t.Fatal("a retry for no call refused with nobody in line")
	}
}

// TestTurnAsksAndRefusedQueues: Turn says what TryRetryInTurn would do and
// changes nothing; Refused keeps the refused call's place, as a refusal
// by TryRetryInTurn does.
func TestTurnAsksAndRefusedQueues(t *testing.T) {
	b := NewRetryBudget(lineConfig())
	if !b.TryRetry(budgetAt(0)) {
		t.Fatal("the floor's retry was refused")
	}
	for range 3 {
		if ok, _, ahead := b.Turn(budgetAt(time.Second), "", "run-old"); ok || ahead != 0 {
			t.Fatalf("a spent budget: Turn = %v, ahead %d; want refused, no line", ok, ahead)
		}
	}
	if _, _, ahead := b.Turn(budgetAt(time.Second), "", "run-young"); ahead != 0 {
		t.Fatalf("old only asked: young has %d calls ahead, want none (Turn keeps no place)", ahead)
	}
	b.Refused(budgetAt(time.Second), "run-old", false)
	for range 10 {
		b.RecordRequest(budgetAt(2 * time.Second)) // earns one retry
	}
	if ok, _, ahead := b.Turn(budgetAt(2*time.Second), "", "run-young"); ok || ahead != 1 {
		t.Errorf("young after old was refused: Turn = %v, ahead %d; want refused, one call ahead", ok, ahead)
	}
	if ok, _, _ := b.Turn(budgetAt(2*time.Second), "", "run-old"); !ok {
		t.Error("old, first in line, would not get the retry earned")
	}
	if ok, _, _ := b.TryRetryInTurn(budgetAt(2*time.Second), "", "run-old"); !ok || b.Remaining(budgetAt(2*time.Second)) != 0 {
		t.Error("old's retry, which Turn promised, was not paid")
	}
}

// TestALateRecheckKeepsItsPlace: a call whose recheck comes after
// waiterLive still holds the place it was first refused at when it is
// refused again (Turn, then Refused), as TryRetryInTurn keeps it: old is
// refused at 0.1 s, young at 1.5 s, old again at 2.5 s; the retry earned
// then goes to old.
func TestALateRecheckKeepsItsPlace(t *testing.T) {
	b := NewRetryBudget(lineConfig())
	b.TryRetry(budgetAt(0))
	refuse := func(at time.Duration, call string) {
		t.Helper()
		if ok, _, _ := b.Turn(budgetAt(at), "", call); ok {
			t.Fatalf("%s at %s: the spent budget would pay", call, at)
		}
		b.Refused(budgetAt(at), call, false)
	}
	refuse(100*time.Millisecond, "run-old")
	refuse(1500*time.Millisecond, "run-young")
	refuse(2500*time.Millisecond, "run-old")
	for range 10 {
		b.RecordRequest(budgetAt(2500 * time.Millisecond))
	}
	if ok, _, ahead := b.Turn(budgetAt(2500*time.Millisecond), "", "run-young"); ok || ahead != 1 {
		t.Errorf("young: Turn = %v, %d ahead; want refused behind old", ok, ahead)
	}
	if ok, _, _ := b.TryRetryInTurn(budgetAt(2500*time.Millisecond), "", "run-old"); !ok {
		t.Error("old, refused first, did not get the retry earned")
	}
}
