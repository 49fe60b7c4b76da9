package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/faq"
	"github.com/durable-llm/durable-llm/policies/guard"
	promptpkg "github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/policies/rules"
	"github.com/durable-llm/durable-llm/policies/structured"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Activities are the activities of an LLMCall. Build one per process with
// New; it is safe for concurrent use by every workflow the worker runs.
// Workflows reference its methods through a nil *Activities.
type Activities struct {
	cfg      *config.Config
	budgets  *guard.Budgets
	holds    *guard.Holds
	pacer    *guard.Pacer
	paces    map[string]limits
	breakers *guard.BreakerRegistry
	classes  *guard.ClassBreaker
	tokens   *promptpkg.TokenCounter
	schemas  *structured.Cache
	keys     *keyPools
	billed   *billedRequests
	// firstTokens and hedges: the adaptive hedge delay and the hedge
	// budget (docs/how-it-works.md "Hedged calls").
	firstTokens *guard.FirstTokens
	// answers keeps each model's recent times to a whole answer, for a
	// waiting call's last chance (answerTime).
	answers *guard.FirstTokens
	// queues are the endpoints' first tokens as this process sees them
	// (stall.go): where a hedge of an overdue attempt could answer sooner.
	queues *queues
	// outliers eject the endpoints that show they are not answering
	// (guard.Outliers), this process's view.
	outliers *guard.Outliers
	tracing  bool
	hedges   *guard.RetryBudget
	// races are the upstream requests of the hedged attempts running in
	// this process (race.go): the first to answer cuts the other's.
	races races
	// cache keeps good answers for the fallback (docs/how-it-works.md "Answer cache");
	// nil when the policy turns it off.
	cache *answerCache
	// summaries are the sessions' context summaries (summarize.go).
	summaries *summaryCache
	faq       *faq.FAQ
	// live serves streamed attempts' text (live.go); nil: off.
	live    *Live
	metrics Metrics
	// without: the rules a benchmark removed (Options.Without).
	without map[guard.RuleName]bool
	getenv  func(string) string
	now     func() time.Time
	rand    func() float64
	http    *http.Client

	spend SpendMeter
	// ruleGate says whether the learner lets a rule fire (nil: all fire).
	ruleGate rules.Gate
	// steps keeps the results of the counting local activities, so that
	// a step run twice counts once (once.go).
	steps *stepResults

	// clients are the upstream clients of the models and keys (clients.go).
	mu      sync.Mutex
	clients map[string]upstream
}

// Options are the dependencies of New. Zero values mean defaults.
type Options struct {
	// Config is the policy; required.
	Config *config.Config
	// FAQ answers fallbacks; default: the FAQ file of Config (none when
	// it is off), else the embedded example FAQ.
	FAQ *faq.FAQ
	// Metrics records what happens; default: none.
	Metrics Metrics
	// Getenv reads API keys; default os.Getenv.
	Getenv func(string) string
	// Now and Rand are the clock and the source of uniform [0,1) numbers;
	// defaults time.Now and math/rand/v2.
	Now  func() time.Time
	Rand func() float64
	// Transport under the recording, header-timeout HTTP client; default a
	// clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Budgets, Breakers and Classes are the per-process retry budgets (one
	// per upstream endpoint), model breakers and class breaker; defaults
	// are built from Config (the breakers then report state changes to
	// Metrics).
	Budgets *guard.Budgets
	// Holds are the rate-limit holds and Pacer the rpm/tpm pacing;
	// defaults: none held, nothing booked.
	Holds *guard.Holds
	Pacer *guard.Pacer
	// Outliers is the outlier ejection per endpoint (default: none
	// ejected, the first period rate_limit.hold); Answers the models'
	// recent times to a whole answer (default: none yet).
	Outliers *guard.Outliers
	Answers  *guard.FirstTokens
	// Sync joins the budgets, breakers and holds to the fleet's guard
	// (see guard.Sync); nil: this process decides alone.
	Sync *guard.Sync
	// Shared is the answer cache the workers share (store.kind
	// postgres); nil: each worker's own.
	Shared SharedCache
	// Spend tells what a tenant's calls cost today, for the policy's
	// spend caps (llmworker.Usage); nil: caps are not enforced.
	Spend SpendMeter
	// RuleGate says whether a business rule fires: the learners' current
	// states (docs/rules.md); nil: every rule fires.
	RuleGate rules.Gate
	// Tracing adds a GenAI span per upstream attempt and the HTTP client
	// span under it, in the global tracer provider (package tracing).
	Tracing  bool
	Breakers *guard.BreakerRegistry
	Classes  *guard.ClassBreaker
	// Live serves streamed attempts' text outside the call's history
	// (package livestream); nil: their deltas go on the call's workflow
	// stream.
	Live *Live
	// Without are guard rules this process does not apply: a rule's
	// removal as the benchmarks measure it (bench -without,
	// docs/benchmarks.md "What each rule earns"). Never in production.
	Without []guard.RuleName
}

// New builds the per-process activities: the retry budgets, one breaker
// registry, one class breaker, one token counter, one HTTP client.
func New(o Options) (*Activities, error) {
	if o.Config == nil {
		return nil, errors.New("activities: a policy config is required")
	}
	a := &Activities{
		steps: newStepResults(),
		cfg:   o.Config, faq: o.FAQ, metrics: o.Metrics, getenv: o.Getenv, now: o.Now, rand: o.Rand,
		clients: map[string]upstream{}, schemas: request.Schemas(), billed: newBilledRequests(),
		firstTokens: guard.NewFirstTokens(), answers: guard.NewFirstTokens(), queues: newQueues(), outliers: guard.NewOutliers(o.Config.RateLimit.Hold.D()), tracing: o.Tracing, spend: o.Spend, ruleGate: o.RuleGate, cache: newAnswerCache(o.Config.Cache, o.Shared),
		hedges: newHedgeBudget(o.Config), summaries: newSummaryCache(o.Config.Pruning.Summary, o.Shared),
		live: o.Live, without: guard.RuleSet(o.Without),
	}
	if o.Outliers != nil {
		a.outliers = o.Outliers
	}
	if o.Answers != nil {
		a.answers = o.Answers
	}
	if a.metrics == nil {
		a.metrics = NopMetrics{}
	}
	if a.getenv == nil {
		a.getenv = os.Getenv
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.rand == nil {
		a.rand = rand.Float64
	}
	var err error
	if a.faq == nil && !o.Config.FAQ.Off() {
		a.faq, err = loadFAQ(o.Config)
		if err != nil {
			return nil, err
		}
	}
	a.tokens, err = promptpkg.NewTokenCounter(o.Config.Pruning.Encoding)
	if err != nil {
		return nil, fmt.Errorf("activities: token counter: %w", err)
	}
	a.budgets, a.breakers, a.classes = o.Budgets, o.Breakers, o.Classes
	if a.budgets == nil {
		a.budgets = guard.NewBudgets(o.Config.Budget)
	}
	a.holds = o.Holds
	if a.holds == nil {
		a.holds = guard.NewHolds()
	}
	a.keys = newKeyPools(a.holds)
	a.pacer, a.paces = o.Pacer, paceLimits(o.Config)
	if a.pacer == nil {
		a.pacer = guard.NewPacer()
	}
	if a.breakers == nil {
		a.breakers = guard.NewBreakerRegistry(o.Config.Breaker, func(model string, _, to guard.BreakerState, _ time.Time) {
			a.metrics.BreakerState(model, to)
		})
	}
	if o.Sync != nil {
		a.budgets.SetSync(o.Sync)
		a.breakers.SetSync(o.Sync)
		a.holds.SetSync(o.Sync)
	}
	if a.classes == nil {
		a.classes = guard.NewClassBreaker(o.Config.Breaker)
	}
	a.http = newHTTPClient(o.Config, o.Transport, a.rand)
	if a.tracing {
		a.http.Transport = tracedTransport(a.http.Transport)
	}
	return a, nil
}

// SpendMeter tells what a tenant's calls cost today (UTC).
type SpendMeter interface {
	Spent(tenant string, now time.Time) float64
}

// SpendCapError is the type of the ApplicationError a call of a tenant at
// its daily spend cap fails with; its detail is the instant the cap
// resets (midnight UTC).
const SpendCapError = "spend_cap"

// invalid is the non-retryable error of a request that must change. The
// message already says everything; err is not attached as the cause, which
// would reach the caller as the same text again, labelled "retryable: true".
func invalid(err error) error {
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(failure.InvalidRequest),
		temporal.ApplicationErrorOptions{NonRetryable: true})
}

// Admit validates the request and checks the business rules. An invalid
// request fails with a
// non-retryable ApplicationError of type invalid_request that names every
// problem.
func (a *Activities) Admit(ctx context.Context, req request.Request) (Admission, error) {
	return oncePerStep(ctx, a.steps, a.now(), req, func() (Admission, error) { return a.admit(req) })
}

func (a *Activities) admit(req request.Request) (Admission, error) {
	if err := request.Validate(req, a.cfg); err != nil {
		return Admission{}, invalid(err)
	}
	if limit := a.cfg.Spend.CapOf(req.Tenant); limit > 0 && a.spend != nil {
		now := a.now()
		if spent := a.spend.Spent(req.Tenant, now); spent >= limit {
			midnight := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
			return Admission{}, temporal.NewApplicationErrorWithOptions(
				fmt.Sprintf("tenant %q has spent %.4f today, its daily cap is %.4f (priced with the policy's input_price and output_price): no model call until %s",
					req.Tenant, spent, limit, midnight.Format(time.RFC3339)),
				SpendCapError, temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{midnight}})
		}
	}
	c := a.cfg.Call
	ad := Admission{
		Deadline:         c.Deadline.D(),
		FallbackReserve:  c.FallbackReserve.D(),
		MaxAttempts:      c.MaxAttempts,
		HeartbeatTimeout: c.HeartbeatTimeout.D(),
		FirstModel:       a.cfg.Models[0].Name,
		Linger:           a.cfg.Stream.Linger.D(),
		Diagnose:         a.cfg.Diagnose.Enabled,
		DiagnoseModel:    a.cfg.Diagnose.Model,
	}
	ad.HistoryBytes, ad.HistoryEvents = c.HistoryLimits()
	if req.DeadlineMS > 0 {
		ad.Deadline = time.Duration(req.DeadlineMS) * time.Millisecond
	}
	if req.Model != "" {
		ad.FirstModel = req.Model
	}
	a.hedges.RecordRequest(a.now())
	v := rules.Admit(a.cfg.Rules, a.ruleGate, req.Scenario, req.Question())
	if v.Fired != nil {
		hit := ruleHit(*v.Fired, false)
		ad.Rule = &hit
	}
	ad.Shadow = v.Shadow
	for _, p := range v.After {
		if req.Step > 0 && p.Rule.Action == config.RuleStepByStep {
			continue // a step of a step-by-step answer is not split again
		}
		ad.After = append(ad.After, ruleHit(p.Rule, p.Off))
	}
	ad.State = callstate.New(req.Model, callstate.Shape{MaxTokens: req.MaxTokens, Temperature: req.Temperature},
		ad.Deadline, ad.Rule != nil && ad.Rule.Action == config.RuleNoRetry)
	return ad, nil
}

// PrepareAttempt chooses the model of the next attempt (the state's model,
// or the next the ladder offers, skipping models whose breaker is open or
// that a rate limit holds for longer than the call can wait; a shorter
// hold is returned for the workflow to wait), pays for the request, and cuts the request's messages for it: this is
// where the prompt is counted, once per attempt. The call's first request
// counts as a request of its endpoint's retry budget; every later one
// (retry, resend, switch) is a retry charged to it, and a model whose
// endpoint has no retry left is skipped like one whose breaker is open.
func (a *Activities) PrepareAttempt(ctx context.Context, in PrepareInput) (Prepared, error) {
	call := ""
	if activity.IsActivity(ctx) {
		call = activity.GetInfo(ctx).WorkflowExecution.RunID
	}
	return oncePerStep(ctx, a.steps, a.now(), in, func() (Prepared, error) { return a.prepareAttempt(in, call) })
}

// firstRequest reports whether the attempt the call of in prepares at
// state st would be the call's first upstream request: nothing sent yet
// (or only attempts an open breaker refused before sending: unsent), not
// a hedge, not a step of a step-by-step answer.
func firstRequest(in PrepareInput, st callstate.State) bool {
	return !in.Only && in.Request.Step == 0 && (st.Requests == 0 || unsent(in, st))
}

// unsent reports whether the call of in, at state st, has prepared
// attempts but sent none upstream: each was refused by its model's
// breaker between planning and sending (breaker_open, the one class an
// attempt ends in without a request), so that its next request is still
// its first. Not for a hedge (its primary is in flight) or a step of a
// step-by-step answer.
func unsent(in PrepareInput, st callstate.State) bool {
	if in.Only || in.Request.Step != 0 || st.Requests == 0 {
		return false
	}
	refused := 0
	for _, classes := range st.Failures {
		refused += classes[failure.BreakerOpen]
	}
	return refused == st.Requests
}

// outputTokens is what an attempt of shape sh may generate: its max_tokens,
// else the policy's reserve.
func (a *Activities) outputTokens(sh callstate.Shape) int {
	if sh.MaxTokens > 0 {
		return sh.MaxTokens
	}
	return a.cfg.Pruning.ReserveOutputTokens
}

// limits are the rpm and tpm that pace one rate-limit scope.
type limits struct{ rpm, tpm int }

func (l limits) String() string {
	var parts []string
	if l.rpm > 0 {
		parts = append(parts, fmt.Sprintf("%d rpm", l.rpm))
	}
	if l.tpm > 0 {
		parts = append(parts, fmt.Sprintf("%d tpm", l.tpm))
	}
	return strings.Join(parts, ", ")
}

// paceLimits are the limits of each scope of the ladder: the smallest set
// by the models that share it.
func paceLimits(cfg *config.Config) map[string]limits {
	out := map[string]limits{}
	least := func(a, b int) int {
		if a <= 0 || (b > 0 && b < a) {
			return b
		}
		return a
	}
	for _, m := range cfg.Models {
		sc := m.Scope(m.RateLimitScope)
		l := out[sc]
		l.rpm, l.tpm = least(l.rpm, m.RPM), least(l.tpm, m.TPM)
		out[sc] = l
	}
	return out
}

// waitLeft is how much longer a call that has waited waited may wait
// under the cap maxWait (0: no cap of its own; the deadline bounds it).
func waitLeft(maxWait, waited time.Duration) time.Duration {
	if maxWait <= 0 {
		return math.MaxInt64
	}
	return maxWait - waited
}

// waitCap words call.max_wait for a wait's reason: nothing when unset.
func waitCap(maxWait time.Duration) string {
	if maxWait <= 0 {
		return ""
	}
	return ", call.max_wait " + callstate.FormatDuration(maxWait)
}

// firstTokenTime is how long a request to m may take to start answering:
// its first-token timeout, or its whole timeout when it cannot stream.
func firstTokenTime(m config.ModelConfig) time.Duration {
	if m.Stream {
		return m.FirstTokenTimeout.D()
	}
	return m.Timeout.D()
}

// answeringRungs are the first model other than m the call could still
// take on another endpoint that is not ejected, with its breaker not open
// (answering), and the first of those no rate limit holds either
// (unheld); "" when there is none.
func (a *Activities) answeringRungs(in PrepareInput, st callstate.State, m config.ModelConfig, now time.Time) (answering, unheld string) {
	need := in.Request.Needs()
	for _, l := range a.cfg.Models {
		if l.Name == m.Name || l.Capacity() == m.Capacity() || slices.Contains(st.Tried, l.Name) ||
			len(request.Lacks(l, need)) > 0 || a.breakers.State(l.Name, now) == guard.BreakerOpen {
			continue
		}
		if sick, _ := a.outliers.State(l.Capacity(), now); sick != guard.Healthy {
			continue
		}
		if answering == "" {
			answering = l.Name
		}
		if _, left := a.held(l, now); left <= 0 {
			return answering, l.Name
		}
	}
	return answering, ""
}

// blocked words why the models a call waits on may not take it: open
// breakers, spent retry budgets (spentWhy, when given, says how).
func blocked(open, spent, ejected []string, spentWhy string) string {
	var parts []string
	if len(open) > 0 {
		parts = append(parts, "breaker open: "+strings.Join(open, ", "))
	}
	if len(ejected) > 0 {
		parts = append(parts, "endpoint not answering: "+strings.Join(ejected, ", "))
	}
	if len(spent) > 0 {
		if spentWhy == "" {
			spentWhy = "retry budget spent"
		}
		parts = append(parts, spentWhy+": "+strings.Join(spent, ", "))
	}
	return "no model may take the call (" + strings.Join(parts, "; ") + ")"
}

// waitedFor words what a waiting call waits for.
func waitedFor(open, spent, ejected []string) string {
	var what []string
	if len(open) > 0 {
		what = append(what, "the breakers' trials")
	}
	if len(ejected) > 0 {
		what = append(what, "the endpoints' probes")
	}
	if len(spent) > 0 {
		what = append(what, "the traffic to earn the budget a retry")
	}
	return strings.Join(what, " or ")
}

// waitForTrials turns fb, a fallback for want of a model to switch to,
// into a step back to PrepareAttempt when rule wait (guard.WaitAfter)
// finds rungs to wait for: behind open breakers (open) or, when the retry
// budget refused fb's step, on endpoints whose budget is spent
// (spentEndpoints). Those models become untried again, so PrepareAttempt
// waits on a visible timer and lets the breakers and the budget say when
// the call goes. Otherwise it returns fb.
func (a *Activities) waitForTrials(in DecideInput, open, spentEndpoints []string, fb callstate.Step) callstate.Step {
	rungs := make([]guard.WaitRung, 0, len(a.cfg.Models))
	for _, m := range a.cfg.Models {
		rungs = append(rungs, guard.WaitRung{Model: m.Name, Able: len(request.Lacks(m, in.Needs)) == 0,
			Open: slices.Contains(open, m.Name), Spent: slices.Contains(spentEndpoints, m.Capacity()),
			Tried: slices.Contains(fb.Next.Tried, m.Name)})
	}
	maxWait := a.cfg.Call.MaxWaitFor(in.Scenario, in.Stream)
	w, ok := guard.WaitAfter(rungs, fb.BudgetRefused, waitLeft(maxWait, in.State.Waited),
		callstate.CanWait(in.State.Deadline, in.Outcome.Elapsed, a.cfg.Call.FallbackReserve.D()))
	if !ok {
		return fb
	}
	next := fb.Next
	failed := next.Model
	next.Tried = slices.DeleteFunc(slices.Clone(next.Tried), func(m string) bool { return slices.Contains(w.On, m) })
	if !slices.Contains(w.On, failed) && !slices.Contains(next.Tried, failed) {
		next.Tried = append(next.Tried, failed) // its class said switch: not this model again
	}
	next.Model, next.Pending = w.On[0], failure.None
	next.From = callstate.From{N: next.N, Class: in.Outcome.Class}
	next.N++
	return callstate.Step{Kind: callstate.Switch, Next: next, Decision: w.Decision(), BudgetRefused: fb.BudgetRefused,
		Reason: fmt.Sprintf("%s; %s: wait for %s (%s waited%s)",
			fb.Reason, blocked(w.Open, w.Spent, nil, ""), waitedFor(w.Open, w.Spent, nil), callstate.FormatDuration(in.State.Waited),
			waitCap(maxWait))}
}

// held returns the rate-limit hold on model m at now: the scope held the
// longest (its rate_limit_scope, or the model's own queue) and how long it
// is still held; 0 when free.
func (a *Activities) held(m config.ModelConfig, now time.Time) (config.RateLimitScope, time.Duration) {
	sc, scope := m.RateLimitScope, m.Scope(m.RateLimitScope)
	left := a.holds.Left(scope, now)
	if q := m.Scope(config.ScopeModel); q != scope {
		if l := a.holds.Left(q, now); l > left {
			sc, left = config.ScopeModel, l
		}
	}
	return sc, left
}

// DecideNext decides the step after a failed attempt: it tells the guards
// what the attempt taught them (a failed retry of a class, an auth failure
// that trips the model's breaker), gathers their verdicts (the endpoints
// whose retry budget is spent among them), and asks callstate.Next. The
// next request is paid for when PrepareAttempt starts it.
func (a *Activities) DecideNext(ctx context.Context, in DecideInput) (callstate.Step, error) {
	return oncePerStep(ctx, a.steps, a.now(), in, func() (callstate.Step, error) { return a.decideNext(ctx, in) })
}

func (a *Activities) decideNext(ctx context.Context, in DecideInput) (callstate.Step, error) {
	now := a.now()
	s, out := in.State, in.Outcome
	if s.Pending != failure.None && out.Class != failure.WorkerLost {
		// The failed attempt was a retry of that class: it did not work.
		a.classes.Record(s.Pending, now, false)
	}
	m, _ := a.cfg.Model(s.Model)
	if a.cfg.ClassPolicy(out.Class).TripBreaker {
		if m.Pooled() && s.Key != "" && a.unparkedOther(m, s.Key, now) {
			// One key of a pool was refused: leave it out, not the model.
			a.keys.park(m.WithKey(s.Key), now, now.Add(m.KeyPark.D()))
		} else {
			// auth: never send to this model again until its breaker heals.
			a.breakers.Trip(s.Model, now)
		}
	}
	v := callstate.Verdicts{
		ClassAllowed: a.classes.Allow(out.Class, now),
		U:            a.rand(),
		MaxWait:      a.cfg.Call.MaxWaitFor(in.Scenario, in.Stream),
	}
	endpoints := make([]string, 0, len(a.cfg.Models))
	for _, m := range a.cfg.Models {
		if a.breakers.State(m.Name, now) == guard.BreakerOpen {
			v.Open = append(v.Open, m.Name)
		}
		endpoints = append(endpoints, m.Capacity())
		if len(request.Lacks(m, in.Needs)) > 0 {
			v.Unable = append(v.Unable, m.Name)
		}
	}
	v.Spent = a.budgets.Spent(now, endpoints...)
	if a.without[guard.RuleBreaker] {
		v.Open = nil
	}
	if a.without[guard.RuleBudget] {
		v.Spent = nil
	}
	if a.without[guard.RuleClassBreaker] {
		v.ClassAllowed = true
	}
	if out.Class == failure.RateLimited && s.Key != "" {
		// The 429 held only its key (backpressure, in CallModel).
		v.OtherKey = a.otherKey(m, s.Key, now)
	}
	step := callstate.Next(a.cfg, s, out, v)
	if step.Kind == callstate.Fallback && step.NoModel && !a.without[guard.RuleWait] {
		if step = a.waitForTrials(in, v.Open, v.Spent, step); step.Kind != callstate.Fallback {
			step.Rule = guard.RuleWait
		}
	}
	if step.BudgetRefused {
		a.metrics.BudgetRefused()
	}
	noteDecision(ctx, out.Class, step.Decision, step.Next.Model)
	logDecision(ctx, s.Model, out.Class, step)
	return step, nil
}

// logDecision is the one line an attempt the policy classified gets in
// the worker's log: info while a model may still answer, warn when the
// call leaves the models (fallback, failure). The SDK's own error line of
// the attempt is debug (internal/logging).
func logDecision(ctx context.Context, model string, class failure.Class, step callstate.Step) {
	if !activity.IsActivity(ctx) {
		return
	}
	log := activity.GetLogger(ctx).Info
	if step.Kind == callstate.Fallback || step.Kind == callstate.Fail {
		log = activity.GetLogger(ctx).Warn
	}
	log("attempt failed", "class", string(class), "model", model, "decision", step.Decision, "next_model", step.Next.Model)
}

// RecordRetrySuccess tells the class breaker that a retry of class
// succeeded (the call's next attempt answered).
func (a *Activities) RecordRetrySuccess(ctx context.Context, class failure.Class) error {
	_, err := oncePerStep(ctx, a.steps, a.now(), class, func() (bool, error) {
		a.classes.Record(class, a.now(), true)
		return true, nil
	})
	return err
}

// Fallback answers from the business fallback: the FAQ (best match above
// the threshold), else a business rule's card, else the placeholder.
func (a *Activities) Fallback(ctx context.Context, in FallbackInput) (FallbackAnswer, error) {
	if cacheServes(a.cfg.Cache, in.Classes, in.Guards) {
		now := a.now()
		e, ok, err := a.cache.get(ctx, in.Request, now)
		if err != nil {
			// A store that cannot answer is a miss: the FAQ answers.
			activity.GetLogger(ctx).Warn("shared answer cache not read", "error", err)
		}
		if ok {
			return FallbackAnswer{Content: e.content, Source: "cache", Model: e.model, AgeMS: now.Sub(e.at).Milliseconds()}, nil
		}
	}
	q := in.Request.Question()
	if a.faq == nil {
		// faq.file off: the rule card or the placeholder.
	} else if m, ok := a.faq.Match(q, a.cfg.FAQ.Threshold); ok {
		return FallbackAnswer{Content: m.Answer, Source: "faq", FAQID: m.ID, Score: m.Score}, nil
	}
	if r, ok := rules.RuleCard(a.cfg.Rules, a.ruleGate, in.Request.Scenario, q); ok {
		return FallbackAnswer{Content: r.Message, Source: "rule", RuleID: r.ID, Flag: r.Flag}, nil
	}
	return FallbackAnswer{Content: a.cfg.Placeholder, Source: "placeholder"}, nil
}

func loadFAQ(cfg *config.Config) (*faq.FAQ, error) {
	if cfg.FAQ.File == "" {
		return faq.DefaultFAQ(), nil
	}
	f, err := faq.LoadFAQ(cfg.FAQ.File)
	if err != nil {
		return nil, fmt.Errorf("activities: %w", err)
	}
	return f, nil
}
