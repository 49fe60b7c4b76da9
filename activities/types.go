package activities

import (
	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"time"
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
	// FirstModel is the model the ladder starts from.
	FirstModel string `json:"first_model"`
	// Rule is the business rule that matched the request, if any.
	Rule *RuleHit `json:"rule,omitempty"`
}

// RuleHit is a matched business rule.
type RuleHit struct {
	ID      string            `json:"id"`
	Action  config.RuleAction `json:"action"`
	Message string            `json:"message,omitempty"`
	Flag    string            `json:"flag,omitempty"`
}

// PrepareInput asks for the next attempt's model and shape.
type PrepareInput struct {
	Request request.Request `json:"request"`
	// Model wanted for this attempt; empty: the first model the ladder allows.
	Model string `json:"model,omitempty"`
	// Tried are the models this call already left.
	Tried      []string `json:"tried,omitempty"`
	PruneStage int      `json:"prune_stage"`
	KeepRounds int      `json:"keep_rounds,omitempty"`
	MaxTokens  int      `json:"max_tokens,omitempty"`
}

// SkippedModel is a model the ladder skipped because its breaker is open.
type SkippedModel struct {
	Model  string `json:"model"`
	Reason string `json:"reason"`
}

// AttemptPlan is the shape of the next attempt.
type AttemptPlan struct {
	// Model to call; empty when no model may be called (every breaker open
	// or the ladder exhausted): the call goes to the fallback.
	Model   string         `json:"model,omitempty"`
	Skipped []SkippedModel `json:"skipped,omitempty"`
	// Timeout of the attempt (the model's timeout).
	Timeout time.Duration `json:"timeout"`
	// MessagesBefore and Messages are the message counts before and after
	// pruning; PromptTokens what will be sent.
	MessagesBefore int `json:"messages_before"`
	Messages       int `json:"messages"`
	PromptTokens   int `json:"prompt_tokens"`
	// Reason says why no model was chosen.
	Reason string `json:"reason,omitempty"`
}

// CallInput is one upstream attempt.
type CallInput struct {
	Request     request.Request `json:"request"`
	Model       string          `json:"model"`
	Attempt     int             `json:"attempt"`
	PruneStage  int             `json:"prune_stage"`
	KeepRounds  int             `json:"keep_rounds,omitempty"`
	MaxTokens   int             `json:"max_tokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	Timeout     time.Duration   `json:"timeout"`
}

// CallOutcome is what one upstream attempt produced. On success it is the
// activity's result; on failure it is the details of the ApplicationError
// whose type is the failure class.
type CallOutcome struct {
	Class            failure.Class `json:"class,omitempty"`
	Status           int           `json:"status,omitempty"`
	Code             string        `json:"code,omitempty"`
	Reason           string        `json:"reason,omitempty"`
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
}

// PlanNextInput asks for the step after a failed attempt.
type PlanNextInput struct {
	Plan callstate.PlanInput `json:"plan"`
	// Tried are the models the call already left, the failed one included
	// when the plan switches.
	Tried []string `json:"tried,omitempty"`
	// Preferred is the request's preferred model.
	Preferred string `json:"preferred,omitempty"`
	// RetriedClass is set when the failed attempt was a retry of that
	// class: the class breaker learns that the retry failed.
	RetriedClass failure.Class `json:"retried_class,omitempty"`
}

// FallbackInput asks for the business fallback answer.
type FallbackInput struct {
	Request request.Request `json:"request"`
	Reason  string          `json:"reason"`
}

// FallbackAnswer is the business fallback's answer.
type FallbackAnswer struct {
	Content string `json:"content"`
	// Source is "faq", "rule" or "placeholder".
	Source string  `json:"source"`
	FAQID  string  `json:"faq_id,omitempty"`
	RuleID string  `json:"rule_id,omitempty"`
	Flag   string  `json:"flag,omitempty"`
	Score  float64 `json:"score,omitempty"`
}
