package activities

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestAClaimRefusedGivesBackWhatItTook: the walk reads a paced rung whose
// endpoint's probe is due and whose retry the budget would pay; another
// call spends the retry before the walk claims. The claim is refused by
// rule budget and gives back the probe and the pace's turn it took, and
// the walk's next read skips the rung as the rules would have.
func TestAClaimRefusedGivesBackWhatItTook(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cfg := config.DefaultConfig()
	cfg.Models = cfg.Models[:1]
	cfg.Models[0].RPM = 60
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Models[0]
	in := firstPrepare()
	in.State = in.State.StartWith(m.Name, "").SentTo(m.Capacity()) // its first request went: the next is a retry
	for range guard.OutlierRefusals {
		a.outliers.Record(m.Capacity(), guard.Busy, now.Add(-time.Minute), now.Add(-time.Minute), 0, 0)
	}
	w := &walk{a: a, in: in, call: "run", now: now, p: Prepared{State: in.State},
		c: guard.Call{CanWait: 10 * time.Second, Window: 12 * time.Second}}
	r := w.read(m)
	v := guard.Weigh(w.c, r.facts, now)
	if v.Skip || !v.Probe || r.facts.Charge != guard.ChargeRetry || !r.facts.RetryOK {
		t.Fatalf("the rung should be sent as the endpoint's probe, a retry the budget pays: %+v, facts %+v", v, r.facts)
	}
	turn := a.pacer.Turn(m.Scope(m.RateLimitScope), now, 60, 0, 1)
	for a.budgets.For(m.Capacity()).TryRetry(now) { // another call takes every retry left
	}
	if refused := w.claim(r, &v); refused != guard.RuleBudget {
		t.Fatalf("claim refused by %q, want budget", refused)
	}
	if got := a.pacer.Turn(m.Scope(m.RateLimitScope), now, 60, 0, 1); got != turn {
		t.Errorf("the pace's next turn is %v away after the refused claim, was %v: the turn was not given back", got, turn)
	}
	if adm := a.outliers.Admit(m.Capacity(), now, time.Second); adm != guard.SendProbe {
		t.Errorf("after the refused claim the endpoint admits %v, want its probe free again", adm)
	}
	a.outliers.Unclaim(m.Capacity(), now)
	if w.weigh(m) || len(w.p.Skipped) != 1 || w.p.Skipped[0].Guard != guard.RuleBudget {
		t.Errorf("weighed again, the rung should be skipped by rule budget: %+v", w.p.Skipped)
	}
}

// TestReasonsNameTheDeployment: a reason about a model of deployments
// names the deployment the attempt would go to, as tenants read it.
func TestReasonsNameTheDeployment(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cfg := config.DefaultConfig()
	cfg.Models = cfg.Models[:1]
	cfg.Models[0].APIKeyEnv = ""
	cfg.Models[0].Deployments = []config.Deployment{{Name: "east", BaseURL: "http://127.0.0.1:8001/v1"}, {Name: "west", BaseURL: "http://127.0.0.1:8002/v1"}}
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Models[0]
	for _, d := range []string{"east", "west"} {
		for range guard.OutlierRefusals {
			a.outliers.Record(m.WithKey(d).Capacity(), guard.Busy, now, now, 0, 0)
		}
	}
	in := firstPrepare()
	in.Only, in.State.Model = true, m.Name // a hedge: its one rung's reason is the call's
	p, err := a.prepareAttempt(in, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "" || !strings.HasPrefix(p.Reason, "deployment ") || !strings.Contains(p.Reason, " of "+m.Name+" is not answering") {
		t.Errorf("reason %q (model %q), want it to name the deployment of %s that is not answering", p.Reason, p.Model, m.Name)
	}
}

// TestAWalkTakesAKeyOnlyForTheRungItSends: weighing a pooled rung that a
// rule then skips spends no key's headroom; sending one does.
func TestAWalkTakesAKeyOnlyForTheRungItSends(t *testing.T) {
	a, m := pooled(t)
	now := time.Now()
	for _, k := range m.Keys() {
		a.keys.report(m.WithKey(k), 0.5, 0.1, now)
	}
	room := func() (spent []string) {
		for _, k := range m.Keys() {
			if a.keys.headroomOf(m.WithKey(k), now) < 0.5 {
				spent = append(spent, k)
			}
		}
		return spent
	}
	a.breakers.Trip(m.Name, now)
	p, err := a.prepareAttempt(firstPrepare(), "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Model == m.Name || len(p.Skipped) == 0 || p.Skipped[0].Guard != guard.RuleBreaker {
		t.Fatalf("%s's open breaker did not skip it (model %q, skipped %+v): the test shows nothing", m.Name, p.Model, p.Skipped)
	}
	if spent := room(); len(spent) > 0 {
		t.Errorf("a walk that skipped %s for its open breaker spent the headroom of %v", m.Name, spent)
	}
	k, ok := a.pickKey(m, now)
	if spent := room(); !ok || !slices.Equal(spent, []string{k}) {
		t.Errorf("a key taken (%q) spent the headroom of %v, want of it alone", k, spent)
	}
}

// TestWalksReadingAPoolAtOnceStartAtDifferentKeys: the rotation turns
// when a walk reads it, so calls prepared at once, before either claims
// its key, do not all choose the same one while the keys' headroom ties.
func TestWalksReadingAPoolAtOnceStartAtDifferentKeys(t *testing.T) {
	a, m := pooled(t)
	now := time.Now()
	first, _, _ := a.chooseKey(m, now)
	second, _, _ := a.chooseKey(m, now)
	if first == second {
		t.Errorf("two walks reading %s's pool at once both chose %s", m.Name, first)
	}
}
