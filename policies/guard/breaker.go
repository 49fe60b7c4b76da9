package guard

import (
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"math"
	"sort"
	"sync"
	"time"
)

// Defaults of BreakerConfig (README "Failure classes": open after 5
// consecutive failures or a failure rate over 50 % of the last 20 calls,
// probe with 10 % of the traffic, close at 90 % probe success). The open
// period is 30 s; a production fleet may prefer minutes (300 s is common).
const (
	DefaultBreakerConsecutiveFailures = 5
	DefaultBreakerFailureRate         = 0.5
	DefaultBreakerWindow              = 20
	DefaultBreakerMinCalls            = 10
	DefaultBreakerOpenFor             = 30 * time.Second
	DefaultBreakerProbeFraction       = 0.1
	DefaultBreakerCloseThreshold      = 0.9
	DefaultBreakerProbes              = 5
	DefaultClassFailureRate           = 0.15
	DefaultClassWindow                = 60 * time.Second
	DefaultClassMinRetries            = 20
)

// BreakerState is the state of a circuit breaker.
type BreakerState int

// The breaker states.
const (
	// BreakerClosed lets every call through and watches the outcomes.
	BreakerClosed BreakerState = iota
	// BreakerOpen refuses every call until OpenFor has passed.
	BreakerOpen
	// BreakerHalfOpen lets ProbeFraction of the calls through as probes
	// and decides from their outcomes whether to close or reopen.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half_open" (the form used in metrics
// labels and reasons).
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// breakerSettings is a BreakerConfig with its defaults resolved.
type breakerSettings struct {
	consecutive    int
	rate           float64
	window         int
	minCalls       int
	openFor        time.Duration
	probeFraction  float64
	closeThreshold float64
	probes         int
}

func resolveBreaker(cfg config.BreakerConfig) breakerSettings {
	s := breakerSettings{
		consecutive:    cfg.ConsecutiveFailures,
		rate:           cfg.FailureRate,
		window:         cfg.Window,
		minCalls:       cfg.MinCalls,
		openFor:        cfg.OpenFor.D(),
		probeFraction:  cfg.ProbeFraction,
		closeThreshold: cfg.CloseThreshold,
		probes:         cfg.Probes,
	}
	if s.consecutive <= 0 {
		s.consecutive = DefaultBreakerConsecutiveFailures
	}
	if !(s.rate > 0) {
		s.rate = DefaultBreakerFailureRate
	}
	if s.window <= 0 {
		s.window = DefaultBreakerWindow
	}
	if s.minCalls <= 0 {
		s.minCalls = DefaultBreakerMinCalls
	}
	s.minCalls = min(s.minCalls, s.window)
	if s.openFor <= 0 {
		s.openFor = DefaultBreakerOpenFor
	}
	if !(s.probeFraction > 0) {
		s.probeFraction = DefaultBreakerProbeFraction
	}
	if !(s.closeThreshold > 0) {
		s.closeThreshold = DefaultBreakerCloseThreshold
	}
	s.closeThreshold = min(s.closeThreshold, 1)
	if s.probes <= 0 {
		s.probes = DefaultBreakerProbes
	}
	return s
}

// Breaker is the circuit breaker of one model in one process (README "Failure classes").
//
// Closed, it opens after ConsecutiveFailures failures in a row, or when
// more than FailureRate of the last Window calls failed (once MinCalls
// calls were seen). Open, it refuses every call for OpenFor. Then it is
// half-open: Allow lets a call through as a probe when u < ProbeFraction;
// after Probes probe results it closes when their success share reaches
// CloseThreshold and reopens (for a new OpenFor) otherwise — as soon as the
// threshold can no longer be reached, so a still-failing upstream sees as
// few probes as possible. Half-open, only as many results count as probes
// were let through; others (late results of calls from before the breaker
// opened) are ignored, as are all results while open.
//
// State changes happen when a method is called with an instant past the
// deadline (there is no timer). Every change is reported to the hook given
// to the registry, with the instant of the call that observed it.
//
// A Breaker is safe for concurrent use.
type Breaker struct {
	mu sync.Mutex
	s  breakerSettings

	state     BreakerState
	openUntil time.Time

	// Closed: consecutive failures and a ring of the last outcomes.
	consecutive int
	outcomes    []bool // true: failure
	next        int
	calls       int
	failures    int

	// Half-open: probes let through, their results, their successes.
	probesAllowed  int
	probeResults   int
	probeSuccesses int

	onChange func(from, to BreakerState, now time.Time)
}

// NewBreaker returns a closed breaker with cfg's settings; zero fields take
// their defaults (see the Default… constants).
func NewBreaker(cfg config.BreakerConfig) *Breaker {
	s := resolveBreaker(cfg)
	return &Breaker{s: s, outcomes: make([]bool, s.window)}
}

// State returns the breaker's state at now.
func (b *Breaker) State(now time.Time) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	return b.state
}

// Allow decides whether one call may go to the model at now: always when
// closed, never when open, and when half-open if u (uniform in [0,1)) is
// below ProbeFraction, in which case the call is a probe. Call it once per
// attempt and Record the outcome of every allowed call.
func (b *Breaker) Allow(now time.Time, u float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		if u < b.s.probeFraction {
			b.probesAllowed++
			return true
		}
	}
	return false
}

// Record records the outcome of a call at now.
func (b *Breaker) Record(now time.Time, success bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	switch b.state {
	case BreakerClosed:
		b.recordClosed(now, success)
	case BreakerHalfOpen:
		b.recordProbe(now, success)
	}
}

// RecordOutcome records the outcome of a call by its failure class: the
// empty class is a success, classes whose CountsForBreaker is true are
// failures, and every other class (a client mistake such as
// invalid_request, or our own breaker_open, worker_lost) is ignored.
// It does not trip the breaker for auth; the planner calls Trip for that.
func (b *Breaker) RecordOutcome(now time.Time, class failure.Class) {
	switch {
	case class == failure.None:
		b.Record(now, true)
	case class.CountsForBreaker():
		b.Record(now, false)
	}
}

// Trip opens the breaker at once for OpenFor from now, whatever its state
// (an auth failure: the model's key is refused). Tripping an open breaker
// extends its open period.
func (b *Breaker) Trip(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick(now)
	b.open(now)
}

// tick moves an open breaker to half-open once OpenFor has passed.
func (b *Breaker) tick(now time.Time) {
	if b.state == BreakerOpen && !now.Before(b.openUntil) {
		b.probesAllowed, b.probeResults, b.probeSuccesses = 0, 0, 0
		b.set(BreakerHalfOpen, now)
	}
}

func (b *Breaker) recordClosed(now time.Time, success bool) {
	failure := !success
	if b.calls == len(b.outcomes) {
		if b.outcomes[b.next] {
			b.failures--
		}
	} else {
		b.calls++
	}
	b.outcomes[b.next] = failure
	b.next = (b.next + 1) % len(b.outcomes)
	if failure {
		b.failures++
		b.consecutive++
	} else {
		b.consecutive = 0
	}
	// Only a failure can trip the breaker.
	if failure && (b.consecutive >= b.s.consecutive ||
		b.calls >= b.s.minCalls && float64(b.failures) > b.s.rate*float64(b.calls)) {
		b.open(now)
	}
}

func (b *Breaker) recordProbe(now time.Time, success bool) {
	if b.probeResults >= b.probesAllowed {
		return // not a probe: a late result from before
	}
	b.probeResults++
	if success {
		b.probeSuccesses++
	}
	// Close when the probes are judged and good enough; reopen as soon as
	// even all-successful remaining probes could not reach the threshold.
	best := float64(b.probeSuccesses+b.s.probes-min(b.probeResults, b.s.probes)) / float64(max(b.probeResults, b.s.probes))
	switch {
	case best < b.s.closeThreshold-1e-9:
		b.open(now)
	case b.probeResults >= b.s.probes:
		b.resetClosed()
		b.set(BreakerClosed, now)
	}
}

func (b *Breaker) open(now time.Time) {
	b.openUntil = now.Add(b.s.openFor)
	b.resetClosed()
	b.set(BreakerOpen, now)
}

func (b *Breaker) resetClosed() {
	clear(b.outcomes)
	b.next, b.calls, b.failures, b.consecutive = 0, 0, 0, 0
}

func (b *Breaker) set(to BreakerState, now time.Time) {
	from := b.state
	b.state = to
	if from != to && b.onChange != nil {
		b.onChange(from, to, now)
	}
}

// StateChangeHook is called on every breaker state change with the model,
// the old and new state and the instant of the call that observed it. It
// runs while that breaker's lock is held, so changes of one model are
// reported in order; it must be quick and must not call back into the
// registry (that would deadlock).
type StateChangeHook func(model string, from, to BreakerState, now time.Time)

// BreakerRegistry holds one Breaker per model, created on first use, all
// with the same settings. It is the per-process breaker set the activities
// share.
//
// A BreakerRegistry is safe for concurrent use.
type BreakerRegistry struct {
	cfg      config.BreakerConfig
	onChange StateChangeHook

	mu       sync.RWMutex
	breakers map[string]*Breaker
}

// NewBreakerRegistry returns an empty registry whose breakers use cfg
// (zero fields: defaults). onStateChange may be nil.
func NewBreakerRegistry(cfg config.BreakerConfig, onStateChange StateChangeHook) *BreakerRegistry {
	return &BreakerRegistry{cfg: cfg, onChange: onStateChange, breakers: make(map[string]*Breaker)}
}

// Breaker returns the breaker of model, creating it (closed) on first use.
func (r *BreakerRegistry) Breaker(model string) *Breaker {
	r.mu.RLock()
	b, ok := r.breakers[model]
	r.mu.RUnlock()
	if ok {
		return b
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.breakers[model]; ok {
		return b
	}
	b = NewBreaker(r.cfg)
	if r.onChange != nil {
		hook := r.onChange
		b.onChange = func(from, to BreakerState, now time.Time) { hook(model, from, to, now) }
	}
	r.breakers[model] = b
	return b
}

// State returns the state of model's breaker at now; a model never seen is
// closed (and no breaker is created for it).
func (r *BreakerRegistry) State(model string, now time.Time) BreakerState {
	r.mu.RLock()
	b, ok := r.breakers[model]
	r.mu.RUnlock()
	if !ok {
		return BreakerClosed
	}
	return b.State(now)
}

// Allow is Breaker.Allow for model.
func (r *BreakerRegistry) Allow(model string, now time.Time, u float64) bool {
	return r.Breaker(model).Allow(now, u)
}

// Record is Breaker.Record for model.
func (r *BreakerRegistry) Record(model string, now time.Time, success bool) {
	r.Breaker(model).Record(now, success)
}

// RecordOutcome is Breaker.RecordOutcome for model.
func (r *BreakerRegistry) RecordOutcome(model string, now time.Time, class failure.Class) {
	if class != failure.None && !class.CountsForBreaker() {
		return // creates no breaker for a class it would ignore
	}
	r.Breaker(model).RecordOutcome(now, class)
}

// Trip is Breaker.Trip for model.
func (r *BreakerRegistry) Trip(model string, now time.Time) {
	r.Breaker(model).Trip(now)
}

// Models returns the models that have a breaker, sorted.
func (r *BreakerRegistry) Models() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	models := make([]string, 0, len(r.breakers))
	for m := range r.breakers {
		models = append(models, m)
	}
	sort.Strings(models)
	return models
}

// Snapshot returns the state at now of every breaker created so far.
func (r *BreakerRegistry) Snapshot(now time.Time) map[string]BreakerState {
	r.mu.RLock()
	breakers := make(map[string]*Breaker, len(r.breakers))
	for m, b := range r.breakers {
		breakers[m] = b
	}
	r.mu.RUnlock()
	out := make(map[string]BreakerState, len(breakers))
	for m, b := range breakers {
		out[m] = b.State(now)
	}
	return out
}

// ClassBreaker is the per-class breaker (README "Failure classes": when
// retries of one class fail more than 15 % of the time, skip retries and
// degrade). It counts the outcomes of retries by the failure class that
// caused them over a sliding ClassWindow; when at least ClassMinRetries
// retries of a class were seen and more than ClassFailureRate of them
// failed, Allow refuses that class until enough old failures slide out of
// the window. It is process-wide, like the budget, not per model.
//
// A ClassBreaker is safe for concurrent use.
type ClassBreaker struct {
	rate       float64
	minRetries int
	window     time.Duration

	mu      sync.Mutex
	classes map[failure.Class]*windowRing // a: retries, b: failed retries
}

// ClassStats are the counts of one class in a ClassBreaker's window.
type ClassStats struct {
	Retries  int
	Failures int
	// Open is true when the class may not retry.
	Open bool
}

// NewClassBreaker returns a class breaker with cfg's ClassFailureRate
// (default 0.15), ClassWindow (60 s) and ClassMinRetries (20).
func NewClassBreaker(cfg config.BreakerConfig) *ClassBreaker {
	c := &ClassBreaker{
		rate:       cfg.ClassFailureRate,
		minRetries: cfg.ClassMinRetries,
		window:     cfg.ClassWindow.D(),
		classes:    make(map[failure.Class]*windowRing),
	}
	if !(c.rate > 0) || math.IsInf(c.rate, 0) {
		c.rate = DefaultClassFailureRate
	}
	if c.minRetries <= 0 {
		c.minRetries = DefaultClassMinRetries
	}
	if c.window <= 0 {
		c.window = DefaultClassWindow
	}
	return c
}

// Record records at now the outcome of one retry made because an attempt
// failed with class. The empty class is ignored.
func (c *ClassBreaker) Record(class failure.Class, now time.Time, success bool) {
	if class == failure.None {
		return
	}
	failed := 0
	if !success {
		failed = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.classes[class]
	if !ok {
		ring := newWindowRing(c.window)
		r = &ring
		c.classes[class] = r
	}
	r.add(now, 1, failed)
}

// Allow reports whether failures of class may still be retried at now.
func (c *ClassBreaker) Allow(class failure.Class, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.stats(class, now).Open
}

// Snapshot returns the counts at now of every class seen so far.
func (c *ClassBreaker) Snapshot(now time.Time) map[failure.Class]ClassStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[failure.Class]ClassStats, len(c.classes))
	for class := range c.classes {
		out[class] = c.stats(class, now)
	}
	return out
}

func (c *ClassBreaker) stats(class failure.Class, now time.Time) ClassStats {
	r, ok := c.classes[class]
	if !ok {
		return ClassStats{}
	}
	retries, failures := r.sum(now)
	return ClassStats{
		Retries:  retries,
		Failures: failures,
		Open:     retries >= c.minRetries && float64(failures) > c.rate*float64(retries),
	}
}
