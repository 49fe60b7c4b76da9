package callstate

import (
	"fmt"
	"slices"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// State is everything the next decision of one call needs. The workflow
// holds exactly one State and replaces it with Step.Next after every failed
// attempt; it is plain JSON, so it travels through history as the input and
// result of the activities that prepare and decide.
type State struct {
	// Preferred is the request's preferred model ("" for the ladder's first).
	Preferred string `json:"preferred,omitempty"`
	// Model of the next attempt ("" before the first: the ladder decides).
	Model string `json:"model,omitempty"`
	// Key is the id (environment variable) of the key of the model's pool
	// the attempt uses; "" for a model with one key.
	Key string `json:"key,omitempty"`
	// Tried are the models this call has left, in order.
	Tried []string `json:"tried,omitempty"`
	// Shape is how the next attempt cuts and parameterises the request.
	Shape Shape `json:"shape"`
	// N numbers the next attempt (1 for the first); a resend keeps it.
	N int `json:"n"`
	// Waited is how long the call has waited for open breakers' trials
	// and for the holds of backpressure it resent after (call.max_wait
	// bounds it).
	Waited time.Duration `json:"waited,omitempty"`
	// Upstream counts the failed attempts that were sent upstream
	// (lost-worker resends and attempts refused before sending excluded).
	Upstream int `json:"upstream"`
	// Requests counts every upstream request the call has started: each
	// attempt, resend and network-layer connect resend, sent or not. The
	// attempts cap (call.max_attempts, never above HardMaxRequests) reads
	// it, less the refusals of backpressure (Attempts), and every request
	// after the first is charged to the retry budget of its endpoint.
	Requests int `json:"requests,omitempty"`
	// Endpoints are the endpoints the call has sent a request to, in
	// order: a request to one of them is a retry there, paid from its
	// retry budget; the call's first request to any other is that
	// endpoint's ordinary load (docs/how-it-works.md "The guard on one page").
	Endpoints []string `json:"endpoints,omitempty"`
	// Refused counts the requests refused as backpressure (queue_full,
	// rate_limited: the server did no work for them): no attempts against
	// the cap, up to HardMaxRefused.
	Refused int `json:"refused,omitempty"`
	// Held counts the resends after a backpressure hold (action hold):
	// the class's max bounds them per call.
	Held int `json:"held,omitempty"`
	// Backoffs counts the retries that waited a full-jitter backoff: the
	// exponent n of the next one.
	Backoffs int `json:"backoffs"`
	// ClassRetries counts, per class, the retries and resends it caused.
	ClassRetries map[failure.Class]int `json:"class_retries,omitempty"`
	// ClassSwitches counts, per class, the model switches its action
	// (switch_model) caused: the class's max bounds them.
	ClassSwitches map[failure.Class]int `json:"class_switches,omitempty"`
	// Failures counts the failed attempts per model and class.
	Failures map[string]map[failure.Class]int `json:"failures,omitempty"`
	// Pending is the class the next attempt retries: its outcome tells the
	// class breaker whether retries of that class work.
	Pending failure.Class `json:"pending,omitempty"`
	// LostWithWorker is the model of the last attempt when that attempt
	// was lost with its worker (worker_lost), else "". Resent to that
	// model, it is the same request again, paid for (or free, a first
	// request) when it was first sent: the retry budget guards an
	// endpoint against its own failures, and this one failed nowhere.
	LostWithWorker string `json:"lost_with_worker,omitempty"`
	// Classes are the failure classes seen, in order of first appearance.
	Classes []failure.Class `json:"classes,omitempty"`
	// From is the attempt the next attempt retries, resends or replaces
	// (zero for the first attempt).
	From From `json:"from"`
	// Delivered counts the completion tokens already streamed to the
	// caller: from then on every attempt continues that text (or the call
	// ends with it), so the caller never sees text twice.
	Delivered int `json:"delivered,omitempty"`
	// Deadline of the whole call, measured from its start.
	Deadline time.Duration `json:"deadline"`
	// NoRetry is set when a business rule forbids retries for this call.
	NoRetry bool `json:"no_retry,omitempty"`
}

// Shape is how one attempt cuts and parameterises the request.
type Shape struct {
	// PruneStage: attempt at stage n keeps factor^n of the middle history.
	PruneStage int `json:"prune_stage,omitempty"`
	// KeepRounds > 0 keeps only the newest rounds (overrides PruneStage).
	KeepRounds int `json:"keep_rounds,omitempty"`
	// MaxTokens and Temperature sent upstream (0 / nil: upstream default).
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	// Repair is the instruction a repair attempt adds after the request's
	// messages: what was wrong with the model's last answer.
	Repair string `json:"repair,omitempty"`
	// Summarize: the rounds this attempt's KeepRounds drops are replaced
	// by a summary of them (the context refiner; config summarize).
	Summarize bool `json:"summarize,omitempty"`
	// Continue: this attempt continues the truncated answer of the last
	// one (action continue): the caller keeps that text and sends it as a
	// final assistant message; MaxTokens is for the new text only.
	Continue bool `json:"continue,omitempty"`
}

// From names the attempt a later attempt comes from and why.
type From struct {
	N     int           `json:"n,omitempty"`
	Class failure.Class `json:"class,omitempty"`
	// Resend is set when the next attempt is the same attempt sent again.
	Resend bool `json:"resend,omitempty"`
}

// String is the "retried from" of an attempt table: "2 (timeout)".
func (f From) String() string {
	if f.N == 0 {
		return ""
	}
	return fmt.Sprintf("%d (%s)", f.N, f.Class)
}

// New is the state of a call before its first attempt.
func New(preferred string, shape Shape, deadline time.Duration, noRetry bool) State {
	return State{Preferred: preferred, Model: preferred, Shape: shape, N: 1, Deadline: deadline, NoRetry: noRetry}
}

// Skip records that model was skipped without an upstream call (its
// breaker refused, or the retry budget of its endpoint): the call leaves
// it as if it had switched. class is what refused it (breaker_open), or
// None for a guard that is not a failure of the model.
func (s State) Skip(model string, class failure.Class) State {
	s = s.clone()
	s.Tried = append(s.Tried, model)
	s.Model = ""
	s.Pending = failure.None // the next model's attempt is not that retry
	if class != failure.None {
		s.addClass(class)
	}
	return s
}

// Start records that the next attempt goes to model: one more upstream
// request.
func (s State) Start(model string) State {
	return s.StartWith(model, "")
}

// StartWith is Start with the key (of a pool) the attempt uses.
func (s State) StartWith(model, key string) State {
	s = s.clone()
	s.Model, s.Key = model, key
	s.Requests++
	return s
}

// SentTo records that the call's next request goes to endpoint.
func (s State) SentTo(endpoint string) State {
	if !slices.Contains(s.Endpoints, endpoint) {
		s.Endpoints = append(slices.Clone(s.Endpoints), endpoint)
	}
	return s
}

// HasSent reports whether the call has sent a request to endpoint: its
// next one there is a retry.
func (s State) HasSent(endpoint string) bool { return slices.Contains(s.Endpoints, endpoint) }

// HardMaxRequests bounds the attempts of one call whatever the
// configuration says (config.Validate refuses a larger call.max_attempts;
// a Config built in code cannot lift it either).
const HardMaxRequests = 10

// HardMaxRefused bounds the backpressure refusals the attempts cap leaves
// out, so that no policy can make a call send without end: a call sends
// at most HardMaxRequests + HardMaxRefused requests.
const HardMaxRefused = 10

// Backpressure reports whether a failure of class is a refusal that cost
// the server nothing (a full queue, a rate limit): no attempt against the
// cap (docs/how-it-works.md "Failure classes").
func Backpressure(class failure.Class) bool {
	return class == failure.QueueFull || class == failure.RateLimited
}

// Attempts counts the call's requests that are attempts against the cap:
// every request started, less the refusals of backpressure (at most
// HardMaxRefused of them).
func (s State) Attempts() int {
	return s.Requests - min(s.Refused, HardMaxRefused)
}

// MaxRequests is the attempts cap of a call under cfg.
func MaxRequests(cfg *config.Config) int {
	return max(min(cfg.Call.MaxAttempts, HardMaxRequests), 1)
}

// FailuresOn returns how many attempts on model failed with class.
func (s State) FailuresOn(model string, class failure.Class) int {
	return s.Failures[model][class]
}

// clone copies the slices and maps so that a returned State never shares
// them with its input.
func (s State) clone() State {
	s.Tried = slices.Clone(s.Tried)
	s.Endpoints = slices.Clone(s.Endpoints)
	s.Classes = slices.Clone(s.Classes)
	s.ClassRetries = cloneCounts(s.ClassRetries)
	s.ClassSwitches = cloneCounts(s.ClassSwitches)
	f := make(map[string]map[failure.Class]int, len(s.Failures)+1)
	for m, byClass := range s.Failures {
		c := make(map[failure.Class]int, len(byClass))
		for k, v := range byClass {
			c[k] = v
		}
		f[m] = c
	}
	s.Failures = f
	return s
}

func (s *State) addClass(c failure.Class) {
	if !slices.Contains(s.Classes, c) {
		s.Classes = append(s.Classes, c)
	}
}

// Outcome is what the decision reads of a failed attempt.
type Outcome struct {
	Class failure.Class `json:"class"`
	// RetryAfter is the upstream's Retry-After, when HasRetryAfter.
	RetryAfter    time.Duration `json:"retry_after,omitempty"`
	HasRetryAfter bool          `json:"has_retry_after,omitempty"`
	// NotSent: the attempt was refused before any request was sent.
	NotSent bool `json:"not_sent,omitempty"`
	// Elapsed since the call started, at the end of the attempt.
	Elapsed time.Duration `json:"elapsed"`
	// Delivered is the completion tokens this attempt streamed to the
	// caller before it failed.
	Delivered int `json:"delivered,omitempty"`
	// ConnectResends are the requests the attempt resent at the network
	// layer after a failed connect (each was paid from the budget).
	ConnectResends int `json:"connect_resends,omitempty"`
	// Detail says what was wrong with the answer (bad_tool_call,
	// schema_mismatch): a repair tells the model.
	Detail string `json:"detail,omitempty"`
	// Partial is the completion tokens of a truncated answer's text that
	// the caller keeps to be continued (output_truncated; 0: none, or it
	// reached a streaming caller and counts in Delivered instead).
	Partial int `json:"partial,omitempty"`
	// CallerLimit: the request set max_tokens itself. The attempt's limit
	// is the caller's and never grows (docs/how-it-works.md "Failure classes").
	CallerLimit bool `json:"caller_limit,omitempty"`
}

// Verdicts are the answers of the process-wide guards, gathered by the
// caller before Next: the decision itself reads no clock, no randomness
// and no shared state.
type Verdicts struct {
	// ClassAllowed is false when retries of the class fail too often
	// across the process (the class breaker).
	ClassAllowed bool `json:"class_allowed"`
	// Spent are the endpoints whose retry budget has no retry left: no
	// step sends another request there.
	Spent []string `json:"spent,omitempty"`
	// Open are the models whose breaker is open: never switched to.
	Open []string `json:"open,omitempty"`
	// Unable are the models that cannot serve the request (they lack a
	// capability it needs): never switched to.
	Unable []string `json:"unable,omitempty"`
	// MaxWait is how long the call may wait in all (call.max_wait for its
	// scenario, MaxWaitFor): a resend after a backpressure hold is made
	// only while State.Waited stays within it. 0: no cap of its own (the
	// deadline, less the fallback reserve, bounds the waits).
	MaxWait time.Duration `json:"max_wait,omitempty"`
	// OtherKey: the failed attempt's model has another key in its pool
	// that no rate limit holds and no refusal parked: a rate limit on one
	// key is then no reason to wait.
	OtherKey string `json:"other_key,omitempty"`
	// U is a uniform random number in [0,1) for the jitter.
	U float64 `json:"u"`
}

// Kind is what a call does after a failed attempt.
type Kind int

// The kinds of step.
const (
	// Retry sends the next attempt to the same model after the wait.
	Retry Kind = iota + 1
	// Resend sends the same attempt again: at once after a lost worker,
	// after the wait for a hold after backpressure (action hold). Like
	// every request after the call's first it is charged to the retry
	// budget of its endpoint, and it counts against the attempts cap
	// unless the server refused it as backpressure.
	Resend
	// Switch sends the next attempt to Next.Model after the wait.
	Switch
	// Fallback stops calling models: the business fallback answers.
	Fallback
	// Fail ends the call with a clear, non-retryable error.
	Fail
	// Finish ends the call with the text already streamed to the caller
	// (degraded): no model that could continue it is left.
	Finish
)

var kindNames = map[Kind]string{Retry: "retry", Resend: "resend", Switch: "switch_model", Fallback: "fallback", Fail: "fail", Finish: "finish"}

// String names the kind as history and metrics show it.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MarshalText writes the kind by name, so a recorded step means the same
// whatever the order of the constants in a later build.
func (k Kind) MarshalText() ([]byte, error) { return marshalName(kindNames, k) }

// UnmarshalText reads a kind written by MarshalText.
func (k *Kind) UnmarshalText(b []byte) error { return unmarshalName(kindNames, k, b) }

// WaitReason says why a step waits before the next attempt.
type WaitReason int

// The reasons to wait.
const (
	// NoWait: the next attempt starts at once.
	NoWait WaitReason = iota
	// Backoff is exponential backoff with full jitter.
	Backoff
	// RetryAfter is the upstream's Retry-After, honoured exactly.
	RetryAfter
	// FixedWait is one of the class's fixed waits.
	FixedWait
	// HoldWait is a backpressure hold (Retry-After, else
	// rate_limit.hold), released with jitter (guard.Jittered).
	HoldWait
)

var waitNames = map[WaitReason]string{NoWait: "none", Backoff: "backoff", RetryAfter: "retry_after", FixedWait: "fixed", HoldWait: "hold"}

// String names the reason as history shows it.
func (r WaitReason) String() string {
	if n, ok := waitNames[r]; ok {
		return n
	}
	return fmt.Sprintf("WaitReason(%d)", int(r))
}

// MarshalText writes the reason by name (see Kind.MarshalText).
func (r WaitReason) MarshalText() ([]byte, error) { return marshalName(waitNames, r) }

// UnmarshalText reads a reason written by MarshalText.
func (r *WaitReason) UnmarshalText(b []byte) error { return unmarshalName(waitNames, r, b) }

func marshalName[T comparable](names map[T]string, v T) ([]byte, error) {
	n, ok := names[v]
	if !ok {
		return nil, fmt.Errorf("callstate: no name for %v", v)
	}
	return []byte(n), nil
}

func unmarshalName[T comparable](names map[T]string, v *T, b []byte) error {
	for k, n := range names {
		if n == string(b) {
			*v = k
			return nil
		}
	}
	return fmt.Errorf("callstate: unknown name %q", b)
}

// Wait is the timer before the next attempt.
type Wait struct {
	Delay  time.Duration `json:"delay,omitempty"`
	Reason WaitReason    `json:"reason"`
}

// Step is the decision after a failed attempt: what to do, how long to
// wait, and the state of the call from then on.
type Step struct {
	Kind Kind `json:"kind"`
	Wait Wait `json:"wait"`
	// Next is the call's state after this step.
	Next State `json:"next"`
	// Decision is a short label for history and tables ("prune+retry");
	// Reason one line saying why. Both are for people only.
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// BudgetRefused is set when a spent retry budget changed the step:
	// the class wanted another request on an endpoint with none left.
	BudgetRefused bool `json:"budget_refused,omitempty"`
	// NoModel is set on a fallback because the class wanted another
	// request and no model was left to take it (tried, behind an open
	// breaker, unable, or on an endpoint whose retry budget is spent): the
	// worker may turn it into a wait for the open breakers' trials, as
	// when every model is open before an attempt.
	NoModel bool `json:"no_model,omitempty"`
	// Rule is the guard's rule that made the step (policies/guard.Rules):
	// class (the class's action), backpressure, class-breaker, budget, or
	// wait when the worker made a fallback for want of a rung a wait.
	Rule guard.RuleName `json:"rule,omitempty"`
}

// cloneCounts copies a count map (never nil, so a step can count into it).
func cloneCounts(m map[failure.Class]int) map[failure.Class]int {
	out := make(map[failure.Class]int, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
