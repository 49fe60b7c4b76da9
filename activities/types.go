package activities

import (
	"encoding/json"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
)

// Admission is the result of Admit: what the workflow needs to run the call.
type Admission struct {
	// Deadline of the whole call and the part kept for the fallback.
	Deadline        time.Duration `json:"deadline"`
	FallbackReserve time.Duration `json:"fallback_reserve"`
	MaxAttempts     int           `json:"max_attempts"`
	// HeartbeatTimeout of the call activity: a lost worker is noticed
	// within it.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// HistoryBytes and HistoryEvents are the history guard's limits
	// (config call.max_history_bytes, max_history_events); zero in
	// histories of builds without the guard, which leaves it off.
	HistoryBytes  int `json:"history_bytes,omitempty"`
	HistoryEvents int `json:"history_events,omitempty"`
	// Linger is how long a streamed call waits after its last item
	// before it returns (config stream.linger).
	Linger time.Duration `json:"linger,omitempty"`
	// Diagnose: failures no classifier rule recognises are diagnosed by a
	// small model (config diagnose), which Diagnose names.
	Diagnose      bool   `json:"diagnose,omitempty"`
	DiagnoseModel string `json:"diagnose_model,omitempty"`
	// FirstModel is the model the ladder starts from.
	FirstModel string `json:"first_model"`
	// Rule is the admission rule that matched the request, if any.
	Rule *RuleHit `json:"rule,omitempty"`
	// Shadow are the admission rules that matched but that the learner
	// turned off: they would have fired.
	Shadow []string `json:"shadow,omitempty"`
	// After are the rules whose scenario and keywords matched and that
	// wait for their technical condition (RuleHit.After), checked after
	// every failed attempt; Off ones are only evaluated (shadow).
	After []RuleHit `json:"after,omitempty"`
	// State is the call's state before its first attempt.
	State callstate.State `json:"state"`
}

// RuleHit is a matched business rule.
type RuleHit struct {
	ID      string            `json:"id"`
	Action  config.RuleAction `json:"action"`
	Message string            `json:"message,omitempty"`
	Flag    string            `json:"flag,omitempty"`
	// After is the rule's technical condition (nil: an admission rule).
	After *config.RuleAfter `json:"after,omitempty"`
	// Review: the rule starts a RiskReview workflow when it fires.
	Review bool `json:"review,omitempty"`
	// Off: the learner turned the rule off; it is evaluated in shadow.
	Off bool `json:"off,omitempty"`
}

// ruleHit is the record of rule r in an Admission.
func ruleHit(r config.Rule, off bool) RuleHit {
	return RuleHit{ID: r.ID, Action: r.Action, Message: r.Message, Flag: r.Flag, After: r.After, Review: r.Review, Off: off}
}

// PrepareInput asks for the next attempt of a call in State.
type PrepareInput struct {
	Request request.Request `json:"request"`
	State   callstate.State `json:"state"`
	// Elapsed since the call started: a rate-limit hold is waited for
	// only when the deadline allows.
	Elapsed time.Duration `json:"elapsed,omitempty"`
	// Only: prepare the state's model or none (a hedge), never the next
	// rung.
	Only bool `json:"only,omitempty"`
}

// SkippedModel is a model the ladder skipped without a request: its
// breaker is open, its endpoint's retry budget is spent, or it is held by a
// rate limit for longer than the call can wait.
type SkippedModel struct {
	Model  string `json:"model"`
	Reason string `json:"reason"`
	// Guard is the rule that skipped it (guard.Rules: "breaker",
	// "budget", "hold", "pace", "outlier", "key", "capability"); empty in
	// results recorded before rules were named: its breaker.
	Guard guard.RuleName `json:"guard,omitempty"`
}

// Prepared is the next attempt: its model, the messages it sends and the
// call's state with the model chosen.
type Prepared struct {
	// State is the call's state with the attempt's model chosen and the
	// skipped models left.
	State   callstate.State `json:"state"`
	Skipped []SkippedModel  `json:"skipped,omitempty"`
	// Model to call; empty when no model may be called (every breaker open
	// or the ladder exhausted): the call goes to the fallback, Reason says why.
	Model  string `json:"model,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Timeout of the attempt (the model's timeout).
	Timeout time.Duration `json:"timeout"`
	// Prompt is what the attempt sends, cut for the model's window.
	Prompt Prompt `json:"prompt"`
	// Hold is how long the attempt must wait before it is sent: its model
	// is held by a rate limit on HoldScope, or paced, for that long;
	// HoldReason says which.
	Hold       time.Duration `json:"hold,omitempty"`
	HoldScope  string        `json:"hold_scope,omitempty"`
	HoldReason string        `json:"hold_reason,omitempty"`
	// Rule is the guard's rule that decided the Hold or the Delay
	// ("hold", "pace", "wait", "last-chance").
	Rule guard.RuleName `json:"rule,omitempty"`
	// Recheck: after Hold the workflow prepares the attempt again instead
	// of sending it, so that the guard's state then decides whether the
	// call goes, a share at a time, rather than every waiting call at
	// once: a wait (rule wait: open breakers, spent budgets, a refusing
	// endpoint) or a rate-limit hold (rule hold), which a refusal of a
	// call released before this one may have renewed.
	Recheck bool `json:"recheck,omitempty"`
	// Delay is a waiting call's last chance (rule last-chance, guard.Weigh): its
	// request goes Delay after the attempt is scheduled, timed in the
	// worker, as late as it can still answer before the fallback's own
	// time (guard.LastChanceDelay). Zero: at once.
	Delay time.Duration `json:"delay,omitempty"`
	// Key is the id (environment variable) of the key of the model's pool
	// the attempt uses; "" for a model with one key.
	Key string `json:"key,omitempty"`
	// Fingerprint identifies the request the attempt sends (who asks,
	// model, messages, parameters; the text a continuation sends after
	// them aside: docs/operating.md "API keys").
	Fingerprint string `json:"fingerprint,omitempty"`
	// Resends is how many network-layer resends after a failed connect the
	// call's attempts cap leaves this attempt (each is also charged to the
	// endpoint's budget).
	Resends int `json:"resends,omitempty"`
	// PastOpen: every rung that could take the call was behind an open
	// breaker and this is the call's first request, sent as a plain
	// client's would (docs/how-it-works.md "The guard on one page"); the
	// attempt's breaker does not refuse it.
	PastOpen bool `json:"past_open,omitempty"`
	// Hedge is how the attempt is hedged (nil: not): the hedge policy's
	// plan on a call's first attempt, else an overdue plan on a streamed
	// model.
	Hedge *HedgePlan `json:"hedge,omitempty"`
}

// Prompt is the cut of the request's messages one attempt sends: counted
// once, when the attempt is prepared, and sent as prepared.
type Prompt struct {
	// Keep are the indexes of the request's messages sent, ascending.
	Keep []int `json:"keep"`
	// Before and Messages are the message counts before the cut and sent.
	Before   int `json:"before"`
	Messages int `json:"messages"`
	// Tokens of the prompt (exact, or an upper bound when Exact is false).
	Tokens int  `json:"tokens"`
	Exact  bool `json:"exact,omitempty"`
	// Fits is false when even the system prompt and the question exceed the
	// model's window: the attempt is refused before sending.
	Fits bool `json:"fits"`
	// Note says how the prompt was adapted to the model, when the caller
	// should know ("system prompt dropped: llama-8b takes no system role").
	Note string `json:"note,omitempty"`
}

// CallInput is one upstream attempt.
type CallInput struct {
	Request request.Request `json:"request"`
	Model   string          `json:"model"`
	// Attempt numbers the attempt in its request ID (<workflow id>/<n>).
	Attempt int             `json:"attempt"`
	Shape   callstate.Shape `json:"shape"`
	Prompt  Prompt          `json:"prompt"`
	Timeout time.Duration   `json:"timeout"`
	// Continue is the text already streamed to the caller: the attempt
	// sends it as a final assistant message for the model to continue,
	// and its answer is the rest.
	Continue string `json:"continue,omitempty"`
	// Resends bounds the attempt's network-layer resends (Prepared.Resends).
	Resends int `json:"resends,omitempty"`
	// Key is the key of the model's pool to send with (Prepared.Key).
	Key string `json:"key,omitempty"`
	// Fingerprint of the request (Prepared.Fingerprint).
	Fingerprint string `json:"fingerprint,omitempty"`
	// Announce: the attempt may be hedged, or is a hedge; it signals its
	// call at its first chunk and, with HedgeAfter, when that passed
	// without one (SignalAttemptNote).
	Announce   bool          `json:"announce,omitempty"`
	HedgeAfter time.Duration `json:"hedge_after,omitempty"`
	// Hedge: the attempt is the hedge of attempt Attempt (its request ID
	// ends in "h").
	Hedge bool `json:"hedge,omitempty"`
	// HedgeReplace: the race is under hedge.replace (the primary's answer
	// replaces the hedge's), so a hedge that answers first leaves the
	// primary running.
	HedgeReplace bool `json:"hedge_replace,omitempty"`
	// HedgeOverdue: when the attempt's first token is overdue, it tells
	// its call where a hedge could answer sooner (HedgePlan.Overdue).
	HedgeOverdue bool `json:"hedge_overdue,omitempty"`
	// FirstTokenWins: the race goes to the first attempt to give a first
	// token, whether or not the caller streams; it cuts the other.
	FirstTokenWins bool `json:"first_token_wins,omitempty"`
	// Grace: an attempt its call's deadline bounds keeps its request open
	// this much past Timeout (callstate.Grace), answer started or not.
	Grace time.Duration `json:"grace,omitempty"`
	// PastOpen: the call's first request, planned past open breakers
	// (Prepared.PastOpen): an open breaker does not refuse it.
	PastOpen bool `json:"past_open,omitempty"`
	// Cache: the answer, if good, may be kept in the answer cache (the
	// call's first model, nothing streamed before it).
	Cache bool `json:"cache,omitempty"`
	// Delay: the request goes this long after the activity was scheduled
	// (Prepared.Delay); Timeout counts from then.
	Delay time.Duration `json:"delay,omitempty"`
}

// CallOutcome is what one upstream attempt produced. On success it is the
// activity's result; on failure it is the details of the ApplicationError
// whose type is the failure class.
type CallOutcome struct {
	Class  failure.Class `json:"class,omitempty"`
	Status int           `json:"status,omitempty"`
	Code   string        `json:"code,omitempty"`
	// Diagnosable is set when the upstream's error body matched no
	// classifier rule; Type and Message are what it said (redacted).
	Diagnosable bool   `json:"diagnosable,omitempty"`
	Type        string `json:"type,omitempty"`
	Message     string `json:"message,omitempty"`
	// Reason says what was seen in the product's words and the failure's
	// structure (status, code, field path, constraint): tenants read it in
	// the call's attempts, so it never quotes the upstream, the request or
	// the model, and needs no mask.
	Reason string `json:"reason,omitempty"`
	// Detail is what was wrong with an answer (bad_tool_call,
	// schema_mismatch) in full, values included, for the repair
	// instruction sent to the model; never shown to a tenant.
	Detail string `json:"detail,omitempty"`
	// Upstream is what the upstream or the transport said (its message,
	// an error's text), key-masked, for operators: in history and logs,
	// never in a call's result.
	Upstream         string        `json:"upstream,omitempty"`
	RetryAfter       time.Duration `json:"retry_after,omitempty"`
	HasRetryAfter    bool          `json:"has_retry_after,omitempty"`
	Content          string        `json:"content,omitempty"`
	FinishReason     string        `json:"finish_reason,omitempty"`
	Duration         time.Duration `json:"duration"`
	Messages         int           `json:"messages"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	ConnectResends   int           `json:"connect_resends,omitempty"`
	// NotSent is set when the attempt was refused before any request (the
	// prompt cannot fit the model's window even pruned).
	NotSent bool `json:"not_sent,omitempty"`
	// ToolCalls of an answer that calls tools (checked against the
	// request's tools), and Logprobs as the upstream sent them (when the
	// request asked for them).
	ToolCalls []request.ToolCall `json:"tool_calls,omitempty"`
	Logprobs  json.RawMessage    `json:"logprobs,omitempty"`
	// Billed: the upstream generated for this request (an answer, or
	// tokens before it failed), so it is spend; SentBefore: this worker
	// process had a billed request with the same fingerprint within
	// DuplicateWindow.
	Billed     bool `json:"billed,omitempty"`
	SentBefore bool `json:"sent_before,omitempty"`
	// Published is the completion tokens of Content streamed to the
	// caller (0 when the caller did not ask to stream, or the stream could
	// not take it: the workflow then publishes what is missing).
	Published int `json:"published,omitempty"`
}

// DecideInput asks for the step after a failed attempt.
type DecideInput struct {
	State   callstate.State   `json:"state"`
	Outcome callstate.Outcome `json:"outcome"`
	// Needs are the capabilities the request needs (request.Needs): a
	// model without one is never switched to.
	Needs []config.Capability `json:"needs,omitempty"`
	// Scenario and Stream choose the call's call.max_wait, for a call
	// that no model is left to switch to but open breakers.
	Scenario string `json:"scenario,omitempty"`
	Stream   bool   `json:"stream,omitempty"`
}

// FallbackInput asks for the business fallback answer.
type FallbackInput struct {
	Request request.Request `json:"request"`
	Reason  string          `json:"reason"`
	// Classes the call saw and Guards that skipped models ("budget",
	// "hold", …): whether the answer cache may answer (cache.on).
	Classes []failure.Class `json:"classes,omitempty"`
	Guards  []string        `json:"guards,omitempty"`
}

// FallbackAnswer is the business fallback's answer.
type FallbackAnswer struct {
	Content string `json:"content"`
	// Source is "cache", "faq", "rule" or "placeholder".
	Source string `json:"source"`
	// Model wrote a cached answer AgeMS ago.
	Model  string  `json:"model,omitempty"`
	AgeMS  int64   `json:"age_ms,omitempty"`
	FAQID  string  `json:"faq_id,omitempty"`
	RuleID string  `json:"rule_id,omitempty"`
	Flag   string  `json:"flag,omitempty"`
	Score  float64 `json:"score,omitempty"`
}

// The topics of a streamed call's workflow stream (docs/calling.md "Streaming").
const (
	// TopicDelta carries Delta items: the answer's text, in order. Their
	// concatenation is the call's final content.
	TopicDelta = "delta"
	// TopicEvent carries the call's events (attempt started, failed,
	// waiting, resumed, done).
	TopicEvent = "event"
)

// Delta is a piece of the answer streamed to the caller.
type Delta struct {
	Attempt int    `json:"attempt"`
	Model   string `json:"model"`
	Text    string `json:"text"`
	// ToolCalls are the answer's tool calls, whole and checked: they come
	// once, in the answering attempt's last delta.
	ToolCalls []request.ToolCall `json:"tool_calls,omitempty"`
}
