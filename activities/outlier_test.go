package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// twoEndpoints is a with qwen-72b on endpoint a and the other rungs on
// endpoint b, its clock at *now.
func twoEndpoints(t *testing.T, now *time.Time) (*Activities, string, string) {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Models[0].BaseURL, cfg.Models[1].BaseURL, cfg.Models[2].BaseURL = "http://a/v1", "http://b/v1", "http://b/v1"
	a, err := New(Options{Config: cfg, Now: func() time.Time { return *now }, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return a, cfg.Models[0].Endpoint(), cfg.Models[1].Endpoint()
}

// TestAFailoverIsTheHealthyEndpointsOrdinaryLoad: endpoint b's retry
// budget is spent by other calls' retries; a call that failed on endpoint
// a (queue_full) is still switched to b and sent there, because it never
// sent to b: its request is b's ordinary load, not a retry. Before, the
// switch was charged as a retry, refused, and the call took the FAQ while
// b was healthy.
func TestAFailoverIsTheHealthyEndpointsOrdinaryLoad(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, ea, eb := twoEndpoints(t, &now)
	for b := a.budgets.For(eb); b.Remaining(now) > 0; {
		b.TryRetry(now)
	}
	in := firstPrepare()
	p, err := a.PrepareAttempt(context.Background(), in)
	if err != nil || p.Model != "qwen-72b" {
		t.Fatalf("first attempt: %q, %v", p.Model, err)
	}
	st, err := a.DecideNext(context.Background(), DecideInput{State: p.State, Outcome: callOutcome(failure.QueueFull)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Next.Model != "qwen-14b" || st.BudgetRefused {
		t.Fatalf("after queue_full on a: %s to %q (%s); want a switch to qwen-14b on b", st.Decision, st.Next.Model, st.Reason)
	}
	in.State = st.Next
	p, err = a.PrepareAttempt(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "qwen-14b" || p.Hold > 0 || len(p.Skipped) > 0 {
		t.Fatalf("the failover: model %q, hold %v, skipped %+v; want qwen-14b at once", p.Model, p.Hold, p.Skipped)
	}
	if !slices.Equal(p.State.Endpoints, []string{ea, eb}) {
		t.Fatalf("endpoints sent to: %v, want [%s %s]", p.State.Endpoints, ea, eb)
	}
	// A retry on b now would be a retry there: its spent budget refuses
	// it, and the call waits for the budget.
	st, _ = a.DecideNext(context.Background(), DecideInput{State: p.State, Outcome: callOutcome(failure.ServerError)})
	if !st.BudgetRefused || st.Decision != "wait_for_budget" {
		t.Fatalf("a retry on b with its budget spent: %s (%s); want wait_for_budget", st.Decision, st.Reason)
	}
}

// TestNewCallsGoToTheAnsweringEndpointWhileOneIsEjected: three busy
// refusals in a row eject endpoint a; new calls start on b's rung, one
// call is a's probe once its period passes, and an answer brings the
// calls back to a.
func TestNewCallsGoToTheAnsweringEndpointWhileOneIsEjected(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, ea, _ := twoEndpoints(t, &now)
	prepare := func() Prepared {
		t.Helper()
		p, err := a.PrepareAttempt(context.Background(), firstPrepare())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	eject(a, ea, guard.Busy, now)
	p := prepare()
	if p.Model != "qwen-14b" || len(p.Skipped) != 1 || p.Skipped[0].Guard != "outlier" ||
		!strings.Contains(p.Skipped[0].Reason, "not answering (refusing)") {
		t.Fatalf("while a is ejected: model %q, skipped %+v; want qwen-14b with qwen-72b skipped by the outlier rule", p.Model, p.Skipped)
	}
	now = now.Add(a.cfg.RateLimit.Hold.D() + time.Millisecond)
	if p = prepare(); p.Model != "qwen-72b" {
		t.Fatalf("after the period: %q, want qwen-72b as a's probe", p.Model)
	}
	if p = prepare(); p.Model != "qwen-14b" {
		t.Fatalf("with a's probe out: %q, want qwen-14b", p.Model)
	}
	a.outliers.Record(ea, guard.Answered, now, now.Add(100*time.Millisecond), 0, 0)
	if p = prepare(); p.Model != "qwen-72b" || len(p.Skipped) != 0 {
		t.Fatalf("a answered its probe: %q (skipped %+v), want qwen-72b", p.Model, p.Skipped)
	}
}

// TestACallWithNoOtherRungWaitsForARefusingEndpoint: with every rung on
// one endpoint, a call meets the endpoint ejected for refusing and waits
// for its probe, sending nothing until its wait ends (then its one
// request goes); one ejected as silent (requests unanswered past their
// first-token timeout) gets it once the wait leaves the request's
// first-token time, as a plain client would send it.
func TestACallWithNoOtherRungWaitsForARefusingEndpoint(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, cfg := stoppedClock(t, now)
	e := cfg.Models[0].Endpoint()
	eject(a, e, guard.Busy, now)
	p, err := a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil {
		t.Fatal(err)
	}
	if p.Model == "" || !p.Recheck || p.Hold <= 0 || !strings.Contains(p.HoldReason, "endpoint not answering") || p.State.Requests != 0 {
		t.Fatalf("refusing: model %q recheck %v hold %v (%s), requests %d; want a wait for the probe, nothing sent",
			p.Model, p.Recheck, p.Hold, p.HoldReason, p.State.Requests)
	}
	// At the end of its wait the call's one request goes, as a plain
	// client's would, as late as its deadline lets it.
	last := firstPrepare()
	last.Elapsed = elapsedLeaving(cfg, last, guard.LastChance/2)
	p, err = a.PrepareAttempt(context.Background(), last)
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "qwen-72b" || p.Recheck {
		t.Fatalf("at the end of its wait: model %q recheck %v (%s); want its one request sent", p.Model, p.Recheck, p.HoldReason)
	}
	silent := guard.NewOutliers(time.Second)
	silent.Overdue(e, now.Add(-9*time.Second), now, 0)
	a.outliers = silent
	p, err = a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil {
		t.Fatal(err)
	}
	if p.Model == "" || !p.Recheck || p.State.Requests != 0 || !strings.Contains(p.HoldReason, "endpoint not answering") {
		t.Fatalf("silent, with time to spare: model %q recheck %v (%s), requests %d; want a wait for the probe",
			p.Model, p.Recheck, p.HoldReason, p.State.Requests)
	}
	// Once its wait leaves no more than the request's first-token time
	// (and guard.LastChance), the request goes, as a plain client's would:
	// a silent endpoint may answer late.
	late := firstPrepare()
	late.Elapsed = elapsedLeaving(cfg, late, firstTokenTime(cfg.Models[0])+guard.LastChance/2)
	p, err = a.PrepareAttempt(context.Background(), late)
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "qwen-72b" || p.Recheck || p.Delay > 0 {
		t.Fatalf("silent, first-token time left: model %q recheck %v delay %v (%s); want the request sent at once",
			p.Model, p.Recheck, p.Delay, p.HoldReason)
	}
}

// TestPastOpenBreakersARefusingEndpointGetsTheLastChance: every model's
// breaker is open. While their endpoint is not ejected, a call's first
// request goes past the breakers once its wait would leave less than a
// first-token timeout (the time a slow endpoint needs to start answering).
// Ejected for refusing, the endpoint would refuse that request at once:
// the call waits on until its last chance and sends its one request then,
// when the refusal may have ended.
func TestPastOpenBreakersARefusingEndpointGetsTheLastChance(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, cfg := stoppedClock(t, now)
	for _, m := range cfg.Models {
		a.breakers.Trip(m.Name, now)
	}
	prepareAt := func(left time.Duration) Prepared {
		in := firstPrepare()
		in.Elapsed = elapsedLeaving(cfg, in, left)
		p, err := a.PrepareAttempt(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Not ejected: the first request goes once the wait would leave less
	// than its first-token timeout.
	if p := prepareAt(firstTokenTime(cfg.Models[0]) - time.Second); p.Model == "" || p.Recheck || p.State.Requests != 1 {
		t.Fatalf("breakers open, endpoint not ejected: model %q recheck %v (%s); want the first request sent past the breakers",
			p.Model, p.Recheck, p.HoldReason)
	}
	e := cfg.Models[0].Endpoint()
	eject(a, e, guard.ServerFailed, now)
	p := prepareAt(firstTokenTime(cfg.Models[0]) - time.Second)
	if !p.Recheck || p.Hold <= 0 || p.State.Requests != 0 {
		t.Fatalf("refusing, %s left: model %q recheck %v hold %v (%s); want a wait, nothing sent",
			firstTokenTime(cfg.Models[0])-time.Second, p.Model, p.Recheck, p.Hold, p.HoldReason)
	}
	if p := prepareAt(guard.LastChance + 600*time.Millisecond); !p.Recheck || guard.LastChance+600*time.Millisecond-p.Hold >= guard.LastChance {
		t.Fatalf("refusing, just before the last chance: hold %v recheck %v; want a last recheck inside the last chance", p.Hold, p.Recheck)
	}
	p = prepareAt(guard.LastChance - guard.LastChanceEarly)
	if p.Model != "qwen-72b" || p.Recheck || p.State.Requests != 1 || p.Delay != 0 {
		t.Fatalf("refusing, at its last chance, answer time not known: model %q recheck %v delay %v (%s); want its one request sent at once",
			p.Model, p.Recheck, p.Delay, p.HoldReason)
	}
	// Once the worker knows the model's answers take 400 ms, it goes as
	// late as it can still answer: MinAttemptTime before the fallback's
	// own time, inside the reserve.
	for range guard.MinSamples {
		a.answers.Add("qwen-72b", 400*time.Millisecond)
	}
	p = prepareAt(guard.LastChance - guard.LastChanceEarly)
	if want := guard.LastChance - guard.LastChanceEarly + cfg.Call.FallbackReserve.D() - guard.FallbackTime; p.Model != "qwen-72b" || p.Delay != want || p.Hedge != nil {
		t.Fatalf("refusing, at its last chance: model %q delay %v hedge %v; want its request %v later, not raced", p.Model, p.Delay, p.Hedge, want)
	}
	// Answers that take 3 s leave it 3 s.
	for range guard.FirstTokenSamples {
		a.answers.Add("qwen-72b", 3*time.Second)
	}
	p = prepareAt(guard.LastChance - guard.LastChanceEarly)
	if want := guard.LastChance - guard.LastChanceEarly + cfg.Call.FallbackReserve.D() - guard.FallbackTime + guard.MinAttemptTime - 3*time.Second; p.Delay != want {
		t.Fatalf("refusing, at its last chance, 3 s answers: delay %v, want %v", p.Delay, want)
	}
}

// TestAtItsLastChanceACallResendsAsTheBudgetPays: a call that sent its
// request to an endpoint now ejected for refusing waits for the probe;
// when its wait is about to end its resend goes if the endpoint's retry
// budget pays for it, and not otherwise (it waits for the budget to the
// end): ejection puts a request off, the budget alone denies it.
func TestAtItsLastChanceACallResendsAsTheBudgetPays(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, cfg := stoppedClock(t, now)
	e := cfg.Models[0].Endpoint()
	eject(a, e, guard.Busy, now)
	sentOnce := func(left time.Duration) PrepareInput {
		in := firstPrepare()
		in.State = in.State.SentTo(e)
		in.State.Requests, in.State.Model = 1, cfg.Models[0].Name
		in.Elapsed = elapsedLeaving(cfg, in, left)
		return in
	}
	p, err := a.PrepareAttempt(context.Background(), sentOnce(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Recheck || p.Hold <= 0 || p.State.Requests != 1 {
		t.Fatalf("5 s before its end: model %q recheck %v hold %v (%s); want a wait for the probe", p.Model, p.Recheck, p.Hold, p.HoldReason)
	}
	if p, err = a.PrepareAttempt(context.Background(), sentOnce(guard.LastChance-guard.LastChanceEarly)); err != nil {
		t.Fatal(err)
	}
	if p.Model != cfg.Models[0].Name || p.Recheck || p.State.Requests != 2 {
		t.Fatalf("at its last chance, budget left: model %q recheck %v requests %d (%s); want its resend", p.Model, p.Recheck, p.State.Requests, p.Reason)
	}
	for b := a.budgets.For(e); b.Remaining(now) > 0; {
		b.TryRetry(now)
	}
	if p, err = a.PrepareAttempt(context.Background(), sentOnce(guard.LastChance-guard.LastChanceEarly)); err != nil {
		t.Fatal(err)
	}
	if p.State.Requests != 1 || (p.Model != "" && !p.Recheck) {
		t.Fatalf("at its last chance, budget spent: model %q recheck %v requests %d; want nothing sent, at most a wait for the budget (%s)",
			p.Model, p.Recheck, p.State.Requests, p.Reason)
	}
}

// TestAResendLostWithItsWorkerIsNotARetry: with the endpoint's retry
// budget spent, the resend of an attempt lost with its worker goes (the
// same request, paid for when first sent); a retry after an upstream
// failure waits for the budget.
func TestAResendLostWithItsWorkerIsNotARetry(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, cfg := stoppedClock(t, now)
	e, model := cfg.Models[0].Endpoint(), cfg.Models[0].Name
	for b := a.budgets.For(e); b.Remaining(now) > 0; {
		b.TryRetry(now)
	}
	again := func(lost string) Prepared {
		in := firstPrepare()
		in.State = in.State.SentTo(e)
		in.State.Requests, in.State.Model, in.State.LostWithWorker = 1, model, lost
		p, err := a.PrepareAttempt(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := again(model); p.Model != model || p.Recheck || p.Hold > 0 {
		t.Fatalf("lost with its worker, budget spent: model %q recheck %v hold %v (%s); want it resent at once", p.Model, p.Recheck, p.Hold, p.Reason)
	}
	if p := again(""); p.Model == model && !p.Recheck {
		t.Fatalf("a retry, budget spent: model %q sent; want a wait for the budget or another rung", p.Model)
	}
}

// stoppedClock is the default policy's activities with the clock stopped
// at now and every draw 0.5.
func stoppedClock(t *testing.T, now time.Time) (*Activities, *config.Config) {
	t.Helper()
	cfg := config.DefaultConfig()
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return a, cfg
}

// elapsedLeaving is the elapsed time at which in's call may still wait
// left (callstate.CanWait).
func elapsedLeaving(cfg *config.Config, in PrepareInput, left time.Duration) time.Duration {
	return in.State.Deadline - cfg.Call.FallbackReserve.D() - guard.MinAttemptTime - left
}

// eject ejects endpoint e at now: guard.OutlierRefusals refusals s in a
// row.
func eject(a *Activities, e string, s guard.Signal, now time.Time) {
	for range guard.OutlierRefusals {
		a.outliers.Record(e, s, now, now, 0, 0)
	}
}

func callOutcome(c failure.Class) callstate.Outcome {
	return callstate.Outcome{Class: c, Elapsed: time.Second}
}

// TestALastRecheckThatFiresLateStillFindsItsLastChance: a call waiting for
// a refusing endpoint's probe sets its last recheck just inside
// guard.LastChance of its wait's end. Woken 3.3 s late (what workflow
// timers were measured to lose on a loaded machine), it still has time for
// an attempt and sends its one request then; before, with a 1.5 s window,
// it woke past its last chance and took the fallback having sent nothing.
func TestALastRecheckThatFiresLateStillFindsItsLastChance(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, cfg := stoppedClock(t, now)
	eject(a, cfg.Models[0].Endpoint(), guard.Busy, now)
	in := firstPrepare()
	in.Elapsed = elapsedLeaving(cfg, in, guard.LastChance+500*time.Millisecond)
	p, err := a.PrepareAttempt(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Recheck || p.Hold <= 0 {
		t.Fatalf("the last wait: recheck %v hold %v (%s); want a recheck", p.Recheck, p.Hold, p.HoldReason)
	}
	const late = 3300 * time.Millisecond
	in.Elapsed += p.Hold + late
	in.State = p.State
	if left := callstate.CanWait(in.State.Deadline, in.Elapsed, cfg.Call.FallbackReserve.D()); left < 0 {
		t.Fatalf("woken %v late, the call has %v for an attempt: it would take the fallback having sent nothing", late, left)
	}
	if p, err = a.PrepareAttempt(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if p.Model != "qwen-72b" || p.Recheck {
		t.Fatalf("woken late: model %q recheck %v (%s); want its one request sent", p.Model, p.Recheck, p.HoldReason)
	}
}

// TestBrokenStreamsEjectTheirEndpoint: an endpoint whose streams are cut
// mid-answer fails its requests as a 5xx does (each request counts once,
// by how it ended; its first token is not an answer): guard.OutlierRefusals
// of them in a row eject it, and a new call with no other rung waits for
// its probe instead of sending into the cuts.
func TestBrokenStreamsEjectTheirEndpoint(t *testing.T) {
	cut := sse{events: []sseEvent{{0, delta("Your parcel")}}, abort: true}
	srv := httptest.NewServer(http.HandlerFunc(cut.serve))
	t.Cleanup(srv.Close)
	a := slowFirstTokenActivities(t, srv.URL)
	call := firstRequestSender(t, a)
	for i := range guard.OutlierRefusals {
		err := call("qwen-72b")
		var broken *temporal.ApplicationError
		if !errors.As(err, &broken) || broken.Type() != string(failure.StreamBroken) {
			t.Fatalf("request %d: %v, want %s", i+1, err, failure.StreamBroken)
		}
	}
	if sick, _ := a.outliers.State(a.cfg.Models[0].Capacity(), time.Now()); sick != guard.Refusing {
		t.Fatalf("after %d broken streams in a row the endpoint is %s, want ejected", guard.OutlierRefusals, sick)
	}
	p, err := a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Recheck || p.State.Requests != 0 || !strings.Contains(p.HoldReason, "endpoint not answering") {
		t.Fatalf("a new call: model %q recheck %v (%s), requests %d; want a wait for the probe", p.Model, p.Recheck, p.HoldReason, p.State.Requests)
	}
}
