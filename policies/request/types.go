package request

import "encoding/json"

// Message is one chat message in the OpenAI chat-completions shape. It is
// plain JSON so that starters in any language can build it.
type Message struct {
	Role string `json:"role" yaml:"role"`
	// Content is the message's text. A message with image parts has them
	// in Parts instead (content is then an array on the wire; see Text).
	Content    string     `json:"content" yaml:"content"`
	Parts      []Part     `json:"-" yaml:"parts,omitempty"`
	Name       string     `json:"name,omitempty" yaml:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty" yaml:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty" yaml:"tool_call_id,omitempty"`
}

// ToolCall is a function call requested by an assistant message.
type ToolCall struct {
	ID       string       `json:"id" yaml:"id"`
	Type     string       `json:"type" yaml:"type"`
	Function FunctionCall `json:"function" yaml:"function"`
}

// FunctionCall names the function and carries its JSON arguments.
type FunctionCall struct {
	Name      string `json:"name" yaml:"name"`
	Arguments string `json:"arguments" yaml:"arguments"`
}

// Message roles accepted in a request.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Request is one LLM call as a caller asks for it (docs/calling.md). It is plain
// JSON; the workflow's input type CallRequest is this type.
type Request struct {
	// Tenant scopes the idempotency key; set by the front door from the
	// bearer token, empty for direct callers.
	Tenant    string `json:"tenant,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// Scenario selects business rules (e.g. "customer_service", "medical").
	Scenario string `json:"scenario,omitempty"`
	// Model is the preferred model; empty means the first rung of the ladder.
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	// MaxTokens of the answer; 0 means the upstream's default.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature; nil means the upstream's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// DeadlineMS is the whole call's deadline in milliseconds; 0 means the
	// policy's default (60 s).
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	// IdempotencyKey, when set, is the workflow ID instead of the key
	// derived from tenant, user, session and messages.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Stream asks for the answer's tokens live (docs/calling.md
	// "Streaming"); the result is the same. The call's workflow stream
	// carries its events and, for each attempt, where the worker serves
	// the attempt's text (llmclient.Follow reads both).
	Stream bool `json:"stream,omitempty"`
	// StreamDeltas puts the text itself on the call's workflow stream, in
	// batches, for subscribers that read only the stream (Temporal's
	// Workflow Streams clients): a history write per batch of tokens.
	StreamDeltas bool `json:"stream_deltas,omitempty"`
	// NoStore marks a response created with store: false at the front
	// door's Responses API: answered, then never retrieved, listed or
	// continued. It is in the key (a kept and an unkept request are two
	// calls); the workflow does not read it.
	NoStore bool `json:"no_store,omitempty"`

	// The chat-completions fields agents use (docs/agents.md), sent
	// upstream as given; nil or zero: not sent.
	Tools             []Tool          `json:"tools,omitempty"`
	ToolChoice        *ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *ResponseFormat `json:"response_format,omitempty"`
	Stop              Stop            `json:"stop,omitempty"`
	Seed              *int64          `json:"seed,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	PresencePenalty   *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty,omitempty"`
	LogitBias         map[string]int  `json:"logit_bias,omitempty"`
	Logprobs          bool            `json:"logprobs,omitempty"`
	TopLogprobs       *int            `json:"top_logprobs,omitempty"`
	ReasoningEffort   string          `json:"reasoning_effort,omitempty"`
	// Passthrough are provider-specific top-level fields (vLLM's top_k,
	// …), forwarded as written to the models whose policy lists them
	// (passthrough); a field no model lists is refused.
	Passthrough map[string]json.RawMessage `json:"passthrough,omitempty"`

	// Step numbers a step (1–3) of a call answered step by step (README
	// "Business rules"): set by the parent call on its child calls, which
	// are never split again. 0 for every call a caller starts.
	Step int `json:"step,omitempty"`
}
