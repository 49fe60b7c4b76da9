package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/request"
	"go.temporal.io/sdk/temporal"
)

// TaskQueue is the task queue of LLMCall workflows and their activities.
const TaskQueue = "llm-calls"

// WorkflowName is the registered name of the LLMCall workflow; starters in
// any language start it by this name with a CallRequest as JSON.
const WorkflowName = "LLMCall"

// CallRequest is the input of LLMCall (docs/calling.md).
type CallRequest = request.Request

// Message is one chat message of a CallRequest.
type Message = request.Message

// ErrFallbackUnavailable is the error type of a call whose request only a
// model can answer (a required tool call, a JSON schema) when no model
// did: the FAQ's text is no answer an agent can parse. It is retryable:
// the caller may try again later.
const ErrFallbackUnavailable = "fallback_unavailable"

// Source says who answered a call.
type Source string

// The sources of an answer.
const (
	SourceModel         Source = "model"          // the preferred (first) model answered
	SourceFallbackModel Source = "fallback_model" // another model of the ladder answered
	SourceCache         Source = "cache"          // a model's earlier answer to the same question (docs/how-it-works.md "Answer cache")
	SourceFAQ           Source = "faq"            // the FAQ answered
	SourceRule          Source = "rule"           // a business rule's card or safe message answered
	SourcePlaceholder   Source = "placeholder"    // nothing could answer: a polite placeholder
	SourceHandoff       Source = "handoff"        // a business rule handed the call to a human
)

// Outcome values of the LlmOutcome search attribute.
const (
	OutcomeRunning  = "running"
	OutcomeAnswered = "answered" // the first model answered (or a model, in full, for a call in steps)
	OutcomeDegraded = "degraded" // a degraded answer: another model's, a partial one, the cache's, the business fallback's
	OutcomeHandoff  = "handoff"
	OutcomeFailed   = "failed"
	OutcomeCanceled = "canceled"
)

// CallResult is the output of LLMCall (docs/calling.md).
type CallResult struct {
	// RequestID is the workflow ID, i.e. the idempotency key.
	RequestID    string `json:"request_id"`
	Content      string `json:"content"`
	Source       Source `json:"source"`
	Model        string `json:"model,omitempty"`
	Degraded     bool   `json:"degraded"`
	FinishReason string `json:"finish_reason,omitempty"`
	// ToolCalls of an answer that calls tools (finish_reason tool_calls),
	// checked against the request's tools; Logprobs as the model sent
	// them, when the request asked for them.
	ToolCalls []request.ToolCall `json:"tool_calls,omitempty"`
	Logprobs  json.RawMessage    `json:"logprobs,omitempty"`
	Usage     Usage              `json:"usage"`
	// FAQID is the matched FAQ entry, RuleID the business rule that
	// answered or forbade retries, Flag a rule's flag (e.g. risk_review).
	FAQID string `json:"faq_id,omitempty"`
	// CacheAgeMS is the age of a cached answer (source cache); Model is
	// then the model that wrote it.
	CacheAgeMS int64  `json:"cache_age_ms,omitempty"`
	RuleID     string `json:"rule_id,omitempty"`
	Flag       string `json:"flag,omitempty"`
	// ShadowRules are the rules that matched this call but that the
	// learner had turned off: they would have fired (docs/rules.md). Feedback on the call is counted for them in shadow.
	ShadowRules []string `json:"shadow_rules,omitempty"`
	// Review is the ID of the RiskReview workflow the call's rule started,
	// waiting for an operator's decision.
	Review string `json:"review,omitempty"`
	// Steps are the child calls of an answer given step by step.
	Steps []StepAnswer `json:"steps,omitempty"`
	// Reason says, for degraded answers, why the models did not answer.
	Reason string `json:"reason,omitempty"`
	// Replaceable marks a quick answer (the answer update's, under
	// hedge.replace): a hedge answered first and the first model is still
	// answering; the call's result (Client.Result) is the final answer.
	Replaceable bool `json:"replaceable,omitempty"`
	// Replaced is the quick answer the caller got first, when the first
	// model's answer replaced it (docs/how-it-works.md "Hedged calls").
	Replaced *QuickAnswer `json:"replaced,omitempty"`
	Attempts []Attempt    `json:"attempts"`
}

// Decisions are the call's attempts as "model:class:decision" (class "ok"
// for the answer), in order: how tests and reports name the path a call
// took.
func (r CallResult) Decisions() []string {
	d := make([]string, 0, len(r.Attempts))
	for _, a := range r.Attempts {
		class := a.Class
		if class == "" {
			class = "ok"
		}
		d = append(d, a.Model+":"+class+":"+a.Decision)
	}
	return d
}

// StepAnswer is one step of an answer given step by step: the smaller
// question, the child call that answered it and how.
type StepAnswer struct {
	Question string `json:"question"`
	CallID   string `json:"call_id"`
	Source   Source `json:"source"`
	Model    string `json:"model,omitempty"`
	Content  string `json:"content"`
}

// QuickAnswer is a hedge's answer that was delivered first and then
// replaced by the first model's.
type QuickAnswer struct {
	Model   string `json:"model"`
	Content string `json:"content"`
	// AtMS is when it was delivered, in milliseconds since the call
	// started. A streamed hedge cut short by the first model's answer has
	// no Content here (the caller has the part it streamed) and AtMS is
	// when it was cut.
	AtMS int64 `json:"at_ms"`
}

// UpdateAnswer is the update that returns a call's first answer: a quick
// one (CallResult.Replaceable) when a hedge answered first under
// hedge.replace, else the call's result. Callers that want the earliest
// answer wait on it (llmclient.Client.Call, the front door); the workflow's
// result stays the final answer.
const UpdateAnswer = "answer"

// The topics of a streamed call (docs/calling.md "Streaming").
const (
	TopicDelta = activities.TopicDelta
	TopicEvent = activities.TopicEvent
)

// Delta is a piece of a streamed call's answer; the concatenation of a
// call's deltas is its final content.
type Delta = activities.Delta

// The events of a streamed call, in Event.Type.
const (
	EventAttemptStarted = "attempt_started"
	EventAttemptFailed  = "attempt_failed"
	EventWaiting        = "waiting"
	EventResumed        = "resumed"
	// EventHedgeStarted: the first attempt had no first token in time and
	// a hedge model answers too (docs/how-it-works.md "Hedged calls").
	EventHedgeStarted = "hedge_started"
	// EventReplaced: under hedge.replace, the first model's answer
	// (Content) replaces the hedge's text streamed before it.
	EventReplaced = "replaced"
	EventDone     = "done"
	// EventFailed ends the stream of a call that fails (an invalid
	// request) or is cancelled: the result is an error, not an answer.
	EventFailed = "failed"
	// EventLive: attempt Attempt's text is followed at URL, outside the
	// history (package livestream), not in deltas on the stream.
	EventLive = activities.EventLive
)

// Event is what a streamed call tells its subscribers besides the text.
type Event struct {
	Type    string `json:"type"`
	Attempt int    `json:"attempt,omitempty"`
	Model   string `json:"model,omitempty"`
	// Class and Reason of a failed attempt; Reason and DelayMS of a wait.
	Class   string `json:"class,omitempty"`
	Reason  string `json:"reason,omitempty"`
	DelayMS int64  `json:"delay_ms,omitempty"`
	// Content is the whole answer that replaces the text so far (replaced).
	Content string `json:"content,omitempty"`
	// URL where a live attempt's text is followed (live).
	URL string `json:"url,omitempty"`
	// Source, Degraded and Usage of the answer (done).
	Source   Source `json:"source,omitempty"`
	Degraded bool   `json:"degraded,omitempty"`
	Usage    *Usage `json:"usage,omitempty"`
	// Result is the call's result without its content (done): the deltas
	// before this event add up to the content, so a subscriber that has
	// them has the whole answer and need not wait for the call to close
	// (it lingers for stream.linger after its last item).
	Result *CallResult `json:"result,omitempty"`
	// Bytes is the length of the content (done): a subscriber whose text
	// is shorter (it followed a live attempt that it could not read to its
	// end) reads the rest from the call's result.
	Bytes int `json:"bytes,omitempty"`
}

// String words an attempt event for people, on one line ("attempt 2 ·
// qwen-72b", "waiting 250 ms: …"); "" for done and failed, which the
// result tells better.
func (e Event) String() string {
	var s string
	switch e.Type {
	case EventAttemptStarted:
		s = fmt.Sprintf("attempt %d · %s", e.Attempt, e.Model)
	case EventAttemptFailed:
		s = fmt.Sprintf("attempt %d failed · %s: %s", e.Attempt, e.Class, e.Reason)
	case EventWaiting:
		s = fmt.Sprintf("waiting %d ms: %s", e.DelayMS, e.Reason)
	case EventResumed:
		s = fmt.Sprintf("attempt %d · %s · resuming the answer", e.Attempt, e.Model)
	case EventHedgeStarted:
		s = e.Reason
	case EventReplaced:
		s = "replaced by " + e.Model + "'s answer"
	default:
		return ""
	}
	return strings.Join(strings.Fields(s), " ")
}

// Usage sums token usage over the attempts.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// FailedAttemptTokens are the prompt tokens sent by attempts that failed.
	FailedAttemptTokens int `json:"failed_attempt_tokens"`
	// DuplicatePromptTokens are the prompt tokens of requests sent again:
	// the same request (who asks, model, messages, max_tokens) already
	// sent within an hour by this call or on this worker (a resend after a
	// lost worker, a retry, the prompt under a resumed stream, a caller's
	// retry of a failed call). They are also in the counts above.
	DuplicatePromptTokens int `json:"duplicate_prompt_tokens,omitempty"`
}

// Attempt is one upstream attempt (or a model skipped by its breaker) and
// the decision that followed it.
type Attempt struct {
	N     int    `json:"n"`
	Model string `json:"model"`
	// Key is the id (environment variable) of the pooled key the attempt
	// used; empty for a model with one key.
	Key          string `json:"key,omitempty"`
	Class        string `json:"class,omitempty"`
	Status       int    `json:"status,omitempty"`
	DurationMS   int64  `json:"duration_ms"`
	Messages     int    `json:"messages"`
	PromptTokens int    `json:"prompt_tokens"`
	Decision     string `json:"decision,omitempty"`
	// Rule is the guard's rule that skipped the model (docs/how-it-works.md
	// "The guard on one page"); empty for an attempt that was sent.
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	DelayMS int64  `json:"delay_ms,omitempty"`
	// RetriedFrom names the attempt this one retries ("1", "1 (worker_lost)").
	RetriedFrom string `json:"retried_from,omitempty"`
	// Hedge: the attempt is the hedge of attempt N (docs/how-it-works.md "Hedged calls").
	Hedge bool `json:"hedge,omitempty"`
	// Diagnosis is what the diagnosis model said of a failure no rule
	// recognised (docs/how-it-works.md "Diagnosis").
	Diagnosis string `json:"diagnosis,omitempty"`
}

// Search attributes upserted as the call progresses. The worker registers
// them at start-up when they are missing.
var (
	SAOutcome  = temporal.NewSearchAttributeKeyKeyword("LlmOutcome")
	SASource   = temporal.NewSearchAttributeKeyKeyword("LlmSource")
	SAModel    = temporal.NewSearchAttributeKeyKeyword("LlmModel")
	SAAttempts = temporal.NewSearchAttributeKeyInt64("LlmAttempts")
	SAClasses  = temporal.NewSearchAttributeKeyKeywordList("LlmClasses")
	SAScenario = temporal.NewSearchAttributeKeyKeyword("LlmScenario")
	// SATenant tells calls of several tenants apart in the list, whatever
	// client or SDK started them (the tenant named in the request).
	SATenant   = temporal.NewSearchAttributeKeyKeyword("LlmTenant")
	SADegraded = temporal.NewSearchAttributeKeyBool("LlmDegraded")
)

// SearchAttributes lists the search attributes with their types as the
// Temporal CLI's --search-attribute flag spells them.
var SearchAttributes = map[string]string{
	"LlmOutcome":  "Keyword",
	"LlmSource":   "Keyword",
	"LlmModel":    "Keyword",
	"LlmAttempts": "Int",
	"LlmClasses":  "KeywordList",
	"LlmScenario": "Keyword",
	"LlmTenant":   "Keyword",
	"LlmDegraded": "Bool",
	"LlmFlag":     "Keyword",
	"LlmReview":   "Keyword",
}
