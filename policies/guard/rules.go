package guard

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// RuleName names one rule of the guard as a call's attempts, the Web UI
// and the fallback's input show it.
type RuleName string

// The rules, in Rules' order. RuleBudget's name is also the word cache.on
// uses for "a retry budget skipped a model" (config.CacheOnBudget).
const (
	RuleCapability   RuleName = "capability"
	RuleBreaker      RuleName = "breaker"
	RuleKey          RuleName = "key"
	RuleOutlier      RuleName = "outlier"
	RuleLastChance   RuleName = "last-chance"
	RuleHold         RuleName = "hold"
	RulePace         RuleName = "pace"
	RuleBudget       RuleName = "budget"
	RulePastOpen     RuleName = "past-open"
	RuleWait         RuleName = "wait"
	RuleClass        RuleName = "class"
	RuleBlame        RuleName = "blame"
	RuleBackpressure RuleName = "backpressure"
	RuleClassBreaker RuleName = "class-breaker"
	RuleHedge        RuleName = "hedge"
	RuleOverdue      RuleName = "overdue"
	RuleGrace        RuleName = "grace"
	RuleFleet        RuleName = "fleet"
)

// Moment is when a rule decides.
type Moment int

// The moments of a request.
const (
	// BeforeSend: which rung, and send, hold, wait or skip.
	BeforeSend Moment = iota
	// AfterOutcome: what the endpoint, the model and the call learn, and
	// the call's next step.
	AfterOutcome
	// WhileOpen: keep an open request, race it, or cut it.
	WhileOpen
	// Shared: how one worker's guard joins its fleet's.
	Shared
)

func (m Moment) String() string {
	switch m {
	case BeforeSend:
		return "Before a request is sent"
	case AfterOutcome:
		return "After an outcome"
	case WhileOpen:
		return "While a request is open"
	}
	return "Across workers"
}

// Rule is one decision of the guard: what it decides, the principle
// that justifies it, the constants it is made of and the policy
// settings it reads.
type Rule struct {
	Name      RuleName
	Moment    Moment
	Decides   string
	Principle string
	// Constants are the package's constants the rule applies, each named
	// as in the code (TestEveryConstantIsARules keeps them so).
	Constants []Constant
	// Settings are the policy keys it reads (dotted, as in
	// policy.yaml); the page shows their defaults.
	Settings []string
	// Replaces says what the rule replaced, when that is worth knowing.
	Replaces string
	// Unmeasured says why the rule's removal is not measured (bench
	// -without refuses it): it is correctness, not a guard against load,
	// or a feature the policy turns on. Every other rule's removal is
	// measured in docs/benchmarks.md "What each rule earns".
	Unmeasured string
}

// Constant is a constant of the code a rule applies: its name and value.
type Constant struct {
	Name  string
	Value any
}

// The constants the rules apply that live nowhere else.
const (
	// MinAttemptTime is the least time worth giving an upstream attempt:
	// a wait that leaves less before the deadline (the fallback's reserve
	// excluded) is not taken.
	MinAttemptTime = time.Second
	// FallbackTime is what the fallback needs of call.fallback_reserve
	// once an attempt has ended: a workflow task, the decision and the
	// FAQ (local activities), the result; measured at 150–300 ms on the
	// dev server.
	FallbackTime = 500 * time.Millisecond
	// MinSamples is how many times of a model this worker must have seen
	// (to first token, or to a whole answer) before a rule reads their
	// p90.
	MinSamples = 20
	// LastChance is how close to the end of its wait a call waiting for a
	// refusing endpoint's probe sends its one request there (the worker
	// holds it until the time an answer needs is left); its last recheck
	// is set for LastChanceEarly after that window opens. The window is
	// what a workflow timer may fire late by on a loaded server: a call
	// whose last recheck misses it sends nothing.
	LastChance      = 4 * time.Second
	LastChanceEarly = 100 * time.Millisecond
	// RecheckMin and RecheckSpread draw a waiting call's step between two
	// rechecks: RecheckMin + u·RecheckSpread, so waiting calls recheck
	// apart. A wait shorter than MinWait is not taken.
	RecheckMin    = 500 * time.Millisecond
	RecheckSpread = time.Second
	MinWait       = 100 * time.Millisecond
	// HeadroomFresh is how long a key's reported headroom
	// (x-ratelimit-remaining-*) counts for the key choice.
	HeadroomFresh = time.Minute
	// AdaptiveMargin multiplies a model's p90 time to first token for an
	// adaptive hedge delay, so that the hedges go to the slow tail and
	// not to the model's usual spread.
	AdaptiveMargin = 1.5
	// OverdueRecheck is how often an attempt whose first token is overdue
	// asks again where a race could answer sooner; it tells its call at
	// most MaxOverdueNotes times (each a signal in the history),
	// OverdueNoteGap apart.
	OverdueRecheck  = 250 * time.Millisecond
	MaxOverdueNotes = 4
	OverdueNoteGap  = time.Second
	// AcceptsK is adaptive throttling's K (the SRE book, "Handling
	// Overload"): a race goes to the overdue request's own endpoint only
	// while it gives a first token in time to at least 1/AcceptsK of this
	// worker's requests of the last first_token_timeout ÷ AcceptsPart.
	// AcceptsKeep bounds how far back the requests are kept.
	AcceptsK    = 2
	AcceptsPart = 4
	AcceptsKeep = time.Minute
)

// Rules is the guard, in the order a request meets it. docs/how-it-works.md
// "The guard on one page" is Page of it (go generate ./docs).
var Rules = []Rule{
	{
		Name: RuleCapability, Moment: BeforeSend,
		Decides:    "A rung whose model lacks a capability the request needs (`tools`, `json_schema`, `vision`, `reasoning`) is skipped.",
		Principle:  "A request that cannot succeed is no load worth sending.",
		Settings:   []string{"model_defaults.capabilities"},
		Unmeasured: "correctness: without it a request goes to a model that cannot take it, and fails",
	},
	{
		Name: RuleBreaker, Moment: BeforeSend,
		Decides: "A model whose breaker is open is skipped. It opens after `consecutive_failures` failures in a row or over " +
			"`failure_rate` of the last `window` (at least `min_calls`); open `open_for`, doubling while trials fail " +
			"(at most `open_for_max`, at most half the outage); half-open, at most `probes` trials are out (one until one " +
			"succeeds), and it closes when `close_threshold` of them succeed. Only upstream-health classes count.",
		Principle: "gobreaker's states: stop sending to a model that fails, try it again a little at a time.",
		Settings: []string{"breaker.consecutive_failures", "breaker.failure_rate", "breaker.window", "breaker.min_calls",
			"breaker.open_for", "breaker.open_for_max", "breaker.heal_after", "breaker.close_threshold", "breaker.probes"},
	},
	{
		Name: RuleKey, Moment: BeforeSend,
		Decides: "A pooled model sends with the key, among those no rate limit holds, that has the most headroom left (its " +
			"x-ratelimit-remaining-* share, counted for HeadroomFresh); when every key is held, with the one free soonest, " +
			"after its hold. A key refused by a class that trips the breaker (`auth`) is parked for `key_park` while another " +
			"key of the model is free (the last one trips the model's breaker instead); a model with every key parked " +
			"(parks are shared by the fleet and by the models on the same endpoint) is skipped.",
		Principle:  "Least-loaded balancing over the keys of one account: a key the provider limits is load elsewhere.",
		Constants:  []Constant{{"HeadroomFresh", HeadroomFresh}},
		Settings:   []string{"model_defaults.key_park"},
		Unmeasured: "a feature: it acts only on a model with a pool of keys",
	},
	{
		Name: RuleOutlier, Moment: BeforeSend,
		Decides: "An endpoint is ejected when it shows it is not answering: OutlierRefusals refusals in a row with no answer " +
			"between (503 busy, 529, queue_full, a 429, a refused connection, a `timeout` before the first token, a 5xx other than a maintenance " +
			"503, a stream the connection cut or that ended without a finish_reason) — *refusing* — or a request past its `first_token_timeout` (its whole `timeout` when it does not stream) while the endpoint has answered nothing since that request started — *silent*. New calls " +
			"start on the next rung whose endpoint answers, and a hedge never goes to it. Its first period is `rate_limit.hold` " +
			"(or the refusal's Retry-After, at most OutlierMaxEjection); then " +
			"one request is its probe and no other goes until the probe's outcome (or its first-token timeout); a failed probe " +
			"doubles the period, never past half the time since the endpoint stopped answering nor OutlierMaxEjection, each " +
			"period ending with up to ReleaseJitter of it drawn. A whole answer ends the ejection; a first token ends only a silent one. With no other rung, a call waits " +
			"for the endpoint's probe (rule `wait`): for a refusing one until its last chance (rule `last-chance`), for a " +
			"silent one until the wait would leave less than the request's first-token time and LastChance, when it " +
			"sends. Each worker ejects and probes on its own view.",
		Principle: "Envoy's outlier detection (a reset counts as a 5xx), with the breaker's growing period, counting each " +
			"request once, by how it ended, as a breaker counts results (a stream cut after its first token is one failure, " +
			"not an answer and a failure); a request into an endpoint that " +
			"answers nothing is load for nothing, and a call that waits for its probe sends once, when it answers. For " +
			"a silent endpoint, Envoy's panic threshold bounds the wait: a plain client would send, and a silent " +
			"endpoint may answer late (a slow first byte looks the same until its answer comes), so the request keeps " +
			"the time a first token may take.",
		Constants: []Constant{{"OutlierRefusals", OutlierRefusals}, {"OutlierMaxEjection", OutlierMaxEjection}},
		Settings:  []string{"rate_limit.hold", "model_defaults.first_token_timeout"},
		Replaces: "a busy refusal held the model's queue, and every call waiting on the hold resent at its end; " +
			"new calls started on an endpoint that answered nothing while a healthy one was on the ladder; a call with " +
			"no other rung sent at once to a silent endpoint, and its request hung there; a stream cut after its first token " +
			"counted as an answer, so calls kept sending into an endpoint that cut every stream.",
	},
	{
		Name: RuleLastChance, Moment: BeforeSend,
		Decides: "A call waiting for a refusing endpoint's probe sends its request there once its wait is within " +
			"LastChance of its end (its last recheck set LastChanceEarly into that window), and so does a call whose " +
			"first request a rate-limit hold would keep within LastChance of its wait's end, with no rung on another " +
			"endpoint (rule `hold`): the attempt is scheduled at " +
			"once, and the worker holds the request until what an answer needs is left before the fallback's own " +
			"FallbackTime — the p90 of the model's last FirstTokenSamples whole answers on this worker, at least " +
			"MinAttemptTime, known once it has MinSamples of them (before, the request goes at once). Its first request " +
			"there goes as a plain client's would; a resend only as rule `budget` pays.",
		Principle: "A guard never leaves a caller worse off than a plain client's one request; and a request that may " +
			"still answer is worth more than a fallback that needs a fraction of the reserve (the grace of rule `grace`).",
		Constants: []Constant{{"LastChance", LastChance}, {"LastChanceEarly", LastChanceEarly}, {"FallbackTime", FallbackTime},
			{"MinAttemptTime", MinAttemptTime}, {"FirstTokenSamples", FirstTokenSamples}, {"MinSamples", MinSamples}},
		Settings: []string{"call.fallback_reserve"},
		Replaces: "a call that had sent once waited to its end for a probe that came after the refusal ended; the last " +
			"request went when the last recheck's timer fired, 3–4.4 s before the deadline, so a refusal that ended in " +
			"those seconds was never seen.",
	},
	{
		Name: RuleHold, Moment: BeforeSend,
		Decides: "A held rung is skipped while a rung on another endpoint, answering and not held, takes the call now. " +
			"Otherwise the hold puts the request off until a moment drawn up to ReleaseJitter × the hold's length " +
			"after its end, when the call weighs its rungs again: a hold renewed meanwhile (a call released before it was " +
			"refused) puts it off again, nothing is paid or reserved for it until it is sent, and a hedge never waits. A " +
			"release later than the call can wait skips the rung, except for a first request: that is put off only while " +
			"its release leaves LastChance of the wait, and then goes (rule `last-chance`). A hold is the provider's word " +
			"that every request before a moment is refused: " +
			"a 429 holds the model's scope for its Retry-After (rule `backpressure`), and a remaining of 0 in " +
			"x-ratelimit-* or anthropic-ratelimit-* until the matching reset.",
		Principle: "A request the provider has said it will refuse is load for nothing, and a hold is the wait of a call " +
			"no rung takes now: it never keeps a call off a rung that answers (the budget's principle). The jitter is " +
			"full-jitter backoff " +
			"applied to a wait every call shares, and the calls released first find out for the rest, as an ejected " +
			"endpoint's probe does: released calls that all sent would meet, together, the refusal the first one met.",
		Constants: []Constant{{"ReleaseJitter", ReleaseJitter}},
		Settings:  []string{"rate_limit.hold", "backoff.retry_after_cap"},
		Replaces: "the calls a hold put off all sent at their drawn moments, whatever the first released met, and a first " +
			"request the hold kept past the call's wait was never sent (docs/benchmarks.md, \"A hold weighed again at its release\").",
	},
	{
		Name: RulePace, Moment: BeforeSend,
		Decides: "A model with `rpm`/`tpm` waits for its turn in a token bucket of its rate-limit scope; a turn later " +
			"than the call can wait skips the rung, and so does any wait for a hedge (a hedge sent later is no sooner). " +
			"The turn is booked only for the rung the call sends.",
		Principle:  "Send at the rate the provider accepts instead of learning it from 429s.",
		Settings:   []string{"model_defaults.rpm", "model_defaults.tpm"},
		Unmeasured: "a feature: it acts only on a model with `rpm` or `tpm` set",
	},
	{
		Name: RuleBudget, Moment: BeforeSend,
		Decides: "A request to an endpoint the call has already sent to is a retry there, paid from a reserve of " +
			"`floor` that each request there refills by `ratio` (what a request earns beyond the reserve is kept only up " +
			"to `floor`); a retry leaves the reserve's count after `window` (windowBuckets buckets), so the floor comes " +
			"back once a window; the calls refused wait their turn in line (a place kept waiterLive after the last recheck), and a " +
			"tenant takes at most `tenant_share` while others call (a call refused for its tenant's share holds no place). " +
			"The call's first request to any endpoint — a failover, or a race that lands there — is that endpoint's " +
			"ordinary load, never a retry (a step of a step-by-step answer is an extra request of its call: even its " +
			"first is a retry); the resend of an attempt lost with its worker is that attempt again. Spent: another " +
			"endpoint, else a wait, else the fallback. In any `window` a sick endpoint sees at most the calls in it × " +
			"(1 + `ratio`) + `floor`, the floor split across workers.",
		Principle: "Finagle's RetryBudget (a leaky bucket whose deposits and withdrawals leave after its ttl), Envoy's " +
			"retry budgets, gRPC's retry throttling: the budget protects the endpoint that receives the resends, and never " +
			"keeps a call off a healthy one.",
		Constants: []Constant{{"windowBuckets", windowBuckets}, {"waiterLive", waiterLive}},
		Settings:  []string{"budget.window", "budget.ratio", "budget.floor", "budget.tenant_share"},
		Replaces: "every request after the call's first was charged to the budget of the endpoint it went to, so failovers " +
			"spent the healthy endpoint's floor and its rungs were skipped; and a trickle of `floor` a `window` in seconds " +
			"too thin to earn it, on top of the full reserve, let one retry past the bound at about 2 calls a second.",
	},
	{
		Name: RulePastOpen, Moment: BeforeSend,
		Decides: "A call that has sent nothing, whose every rung is behind an open breaker and whose wait is spent, sends " +
			"its first request anyway, to the first rung that takes it with the breakers set aside.",
		Principle: "gRPC's retry throttling never throttles an original request; Envoy's panic threshold routes to every " +
			"host when too few are healthy. A breaker stops the extra load of retries, not a caller's one request.",
	},
	{
		Name: RuleWait, Moment: BeforeSend,
		Decides: "A call no rung may take (open breakers, spent budgets, endpoints ejected as not answering) waits on timers the Web UI " +
			"shows, each RecheckMin + a draw of up to RecheckSpread, up to its deadline less `call.fallback_reserve` " +
			"(keeping a first request's `first_token_timeout` for it while breakers are open), or `call.max_wait` when " +
			"set; a wait shorter than MinWait is not taken. Released, a call sends only as a probe (rule `outlier`) until one " +
			"answers; the calls then come back on their own drawn rechecks, and OutlierRefusals refusals in a row eject " +
			"the endpoint again, so calls go at the pace it accepts. A failed attempt that leaves the call only rungs " +
			"behind open breakers or a spent retry budget waits the same way (decisions `wait_for_trials`, " +
			"`wait_for_budget`), not the fallback.",
		Principle: "Wait out what ends: a refusal that ends within the deadline (or a breaker that opened between planning " +
			"and sending) is answered by a model, not by the FAQ; drawn rechecks are the jitter that keeps the waiting calls " +
			"from coming back as a herd.",
		Constants: []Constant{{"RecheckMin", RecheckMin}, {"RecheckSpread", RecheckSpread}, {"MinWait", MinWait}},
		Settings:  []string{"call.fallback_reserve", "call.max_wait", "call.max_wait_stream", "call.max_wait_scenarios"},
		Replaces:  "a 10 s cap (3 s streamed) that sent calls to the FAQ while the refusal ended within their deadline.",
	},
	{
		Name: RuleClass, Moment: AfterOutcome,
		Decides: "The failure's class decides the next step (`classes.*`): retry the same model, switch to the next rung, " +
			"resend, hold for the Retry-After (the same model once, at the Retry-After up to `backoff.retry_after_cap`), " +
			"or the fallback; a retry waits a full-jitter backoff of `backoff.base` doubling to `backoff.cap`. At most " +
			"`call.max_attempts` requests per call that the server works on (backpressure refusals aside).",
		Principle: "Retry only what a retry can fix (the class table, docs/how-it-works.md \"Failure classes\"); full " +
			"jitter (AWS) so that retries of one incident spread out.",
		Settings:   []string{"backoff.base", "backoff.cap", "backoff.retry_after_cap", "call.max_attempts"},
		Unmeasured: "the class table itself: without it no failure is retried, and there is nothing for the other rules to bound",
	},
	{
		Name: RuleBlame, Moment: AfterOutcome,
		Decides: "A timeout of an attempt whose prompt took over half the model's context window, or that asked for over " +
			"a quarter of it as max_tokens, does not count against the model's breaker; nor do classes the request alone " +
			"causes (context_length_exceeded, output_truncated, invalid_request).",
		Principle: "A breaker judges the model, not one tenant's requests: one tenant's huge requests must not open it " +
			"for everyone.",
		Settings:   []string{"model_defaults.context_window"},
		Unmeasured: "no benchmark has its fault yet (one tenant's requests too large to answer in time among others' calls); unit tests hold it",
	},
	{
		Name: RuleBackpressure, Moment: AfterOutcome,
		Decides: "A 429 holds the model's scope (a pooled key's, that key) for its Retry-After (else `rate_limit.hold`; " +
			"rule `hold`), and a remaining of 0 in x-ratelimit-* or anthropic-ratelimit-* holds it until the matching " +
			"reset; a busy refusal (503 busy, 529, queue_full) ejects its endpoint (rule `outlier`) and moves the call to " +
			"the next rung at once. Refusals count against the breaker only once the endpoint has refused without an " +
			"answer for `rate_limit.breaker_after`.",
		Principle: "Backpressure is not failure: a server that says \"not now\" is healthy and busy, and a breaker that " +
			"opened on it would turn away the calls it could take in a moment. A 429 says when to come back: the calls " +
			"that arrive meanwhile wait for it too, and the first released find out for the rest (rule `hold`).",
		Settings: []string{"rate_limit.hold", "rate_limit.breaker_after"},
	},
	{
		Name: RuleClassBreaker, Moment: AfterOutcome,
		Decides: "A class whose retries fail over `class_failure_rate` of at least `class_min_retries` in `class_window` " +
			"stops being retried: its calls go where a call's own retry cap of the class sends them, the next rung, else " +
			"the fallback.",
		Principle: "Retry amplification is bounded per cause, too: retrying what keeps failing is the storm. It caps " +
			"retries, as the budget does, and never keeps a call off a rung that answers.",
		Settings: []string{"breaker.class_failure_rate", "breaker.class_window", "breaker.class_min_retries"},
		Replaces: "an open class breaker sent its calls to the fallback at once, past a healthy rung on another endpoint " +
			"(docs/benchmarks.md, the sweep of seed 1083650162).",
	},
	{
		Name: RuleHedge, Moment: WhileOpen,
		Decides: "With `hedge.after` set, an attempt without a first token after the delay is raced on `hedge.model`: a " +
			"fixed delay, or AdaptiveMargin × the model's p90 time to first token once this worker has MinSamples of " +
			"them (before, `hedge.initial`); paid from `hedge.budget` of the calls, and on an endpoint the call has " +
			"already sent to from its retry budget too. A streamed call takes the first first token; an unstreamed one " +
			"the first whole answer, and under `hedge.replace` the primary's answer replaces the hedge's.",
		Principle:  "\"The Tail at Scale\": hedge the slow tail, not the usual spread, within a budget.",
		Constants:  []Constant{{"AdaptiveMargin", AdaptiveMargin}, {"MinSamples", MinSamples}},
		Settings:   []string{"hedge.after", "hedge.model", "hedge.budget", "hedge.initial"},
		Unmeasured: "a feature: off unless `hedge.after` is set (the hedge benchmark measures it)",
	},
	{
		Name: RuleOverdue, Moment: WhileOpen,
		Decides: "A streamed request past `first_token_timeout` stays open, and every OverdueRecheck the attempt asks " +
			"where a race could answer sooner, telling its call at most MaxOverdueNotes times, OverdueNoteGap apart. The " +
			"race goes to a rung whose endpoint answers (not ejected; it gave a first token in time to a request sent after " +
			"the overdue one, or none of this worker's requests there is overdue), paid " +
			"where it lands (rule `budget`); to the request's own endpoint last, from its budget, and only once that " +
			"endpoint answers requests sent after the overdue one and at least 1/AcceptsK of this worker's requests of " +
			"the last `first_token_timeout` ÷ AcceptsPart (kept AcceptsKeep). A race needs MinAttemptTime left. The " +
			"first first token wins.",
		Principle: "\"The Tail at Scale\" for a lost request; Envoy's previous_hosts retry predicate (race away from the " +
			"endpoint that holds the request); the SRE book's adaptive throttling, K = 2 (an endpoint losing most requests " +
			"would lose the race too).",
		Constants: []Constant{{"OverdueRecheck", OverdueRecheck}, {"MaxOverdueNotes", MaxOverdueNotes},
			{"OverdueNoteGap", OverdueNoteGap}, {"AcceptsK", AcceptsK}, {"AcceptsPart", AcceptsPart},
			{"AcceptsKeep", AcceptsKeep}, {"MinAttemptTime", MinAttemptTime}},
		Settings: []string{"model_defaults.first_token_timeout"},
		Replaces: "the race went to the ladder's first such rung, often the overdue request's own flapping endpoint.",
	},
	{
		Name: RuleGrace, Moment: WhileOpen,
		Decides: "An open request is not abandoned: past `first_token_timeout` it stays open until its timeout, a reset " +
			"or the call's deadline, and into `call.fallback_reserve` up to the fallback's own FallbackTime. On a server " +
			"that stops on disconnect (`stops_on_disconnect`) it is cut once the model's p90 time to first token (of " +
			"MinSamples at least) would pass its deadline, to free the server's slot.",
		Principle: "A request that may still answer is worth more than a fallback that needs a fraction of the reserve; " +
			"a server that stops generating when its client leaves is given its slot back when the answer cannot come in time.",
		Constants: []Constant{{"FallbackTime", FallbackTime}, {"MinSamples", MinSamples}},
		Settings:  []string{"call.fallback_reserve", "model_defaults.stops_on_disconnect"},
	},
	{
		Name: RuleFleet, Moment: Shared,
		Decides: "Budgets stay per worker (the floor split by the workers counted, each held for WorkerLease after its " +
			"last report, its report number for ackKeep); breakers judge this worker's outcomes at once and the fleet's " +
			"breaker opens a model for all; holds are reported. Routine reports stay under fleetReportsPerSecond and reads " +
			"under fleetReadsPerSecond for the whole fleet.",
		Principle: "Finagle's and gRPC's budgets are per client, and a ratio adds up without coordination; one workflow " +
			"takes tens of events a second, so the fleet's traffic to it is bounded whatever its size.",
		Constants: []Constant{{"WorkerLease", WorkerLease}, {"ackKeep", ackKeep},
			{"fleetReportsPerSecond", fleetReportsPerSecond}, {"fleetReadsPerSecond", fleetReadsPerSecond}},
		Unmeasured: "how workers share the rules, not a rule of its own (the fleet benchmark measures it)",
	},
}

// Page is the guard's page, docs/how-it-works.md "The guard on one page",
// made from Rules: each rule's name, what it decides, its principle, its
// constants and its settings with their defaults (setting returns a
// policy key's default as the policy file writes it).
func Page(setting func(key string) (string, bool)) (string, error) {
	var b strings.Builder
	moment, n := Moment(-1), 0
	for _, r := range Rules {
		if r.Moment != moment {
			moment = r.Moment
			fmt.Fprintf(&b, "\n### %s\n\n", moment)
		}
		n++
		fmt.Fprintf(&b, "%d. **`%s`** — %s\n", n, r.Name, r.Decides)
		fmt.Fprintf(&b, "   *Principle:* %s\n", r.Principle)
		if len(r.Constants) > 0 {
			var cs []string
			for _, c := range r.Constants {
				cs = append(cs, fmt.Sprintf("`%s` = %s", c.Name, formatValue(c.Value)))
			}
			fmt.Fprintf(&b, "   *Constants:* %s.\n", strings.Join(cs, ", "))
		}
		if len(r.Settings) > 0 {
			var ss []string
			for _, key := range r.Settings {
				v, ok := setting(key)
				if !ok {
					return "", fmt.Errorf("rule %s reads the setting %s, which the default policy does not have", r.Name, key)
				}
				ss = append(ss, fmt.Sprintf("`%s` (%s)", key, v))
			}
			fmt.Fprintf(&b, "   *Settings:* %s.\n", strings.Join(ss, ", "))
		}
		if r.Replaces != "" {
			fmt.Fprintf(&b, "   *Replaces:* %s\n", r.Replaces)
		}
	}
	return strings.TrimPrefix(b.String(), "\n"), nil
}

// formatValue writes a constant's value for the page: durations as the
// policy writes them (1.5s), numbers as they are.
func formatValue(v any) string {
	if d, ok := v.(time.Duration); ok {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s") // 1m, not 1m0s
		}
		return s
	}
	return fmt.Sprint(v)
}

// RuleSet is names as a set.
func RuleSet(names []RuleName) map[RuleName]bool {
	set := make(map[RuleName]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// ParseRules reads a comma-separated list of rule names (bench -without),
// refusing a name no rule has and a rule whose removal is not measured
// (Rule.Unmeasured).
func ParseRules(list string) ([]RuleName, error) {
	var names []RuleName
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i := slices.IndexFunc(Rules, func(r Rule) bool { return string(r.Name) == f })
		switch {
		case i < 0:
			var all []string
			for _, r := range Rules {
				if r.Unmeasured == "" {
					all = append(all, string(r.Name))
				}
			}
			return nil, fmt.Errorf("no guard rule %q whose removal can be measured (those: %s)", f, strings.Join(all, ", "))
		case Rules[i].Unmeasured != "":
			return nil, fmt.Errorf("rule %s is not removed for a measurement: %s", f, Rules[i].Unmeasured)
		}
		names = append(names, RuleName(f))
	}
	return names, nil
}
