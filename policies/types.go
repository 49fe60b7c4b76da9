package policies

// Message is one chat message in the OpenAI chat-completions shape. It is
// plain JSON so that starters in any language can build it.
type Message struct {
	Role       string     `json:"role" yaml:"role"`
	Content    string     `json:"content" yaml:"content"`
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

// Class is the failure class of one upstream attempt (README "Failure classes"). The empty
// class means the attempt succeeded.
type Class string

// The failure classes. Their string values appear in history (as the
// ApplicationError type of a failed attempt), in search attributes, in the
// policy file and in metrics, so they never change.
const (
	ClassNone                  Class = ""
	ClassConnect               Class = "connect"
	ClassReadTimeout           Class = "read_timeout"
	ClassTimeout               Class = "timeout"
	ClassQueueFull             Class = "queue_full"
	ClassRateLimited           Class = "rate_limited"
	ClassContextLengthExceeded Class = "context_length_exceeded"
	ClassOutputTruncated       Class = "output_truncated"
	ClassServiceUnavailable    Class = "service_unavailable"
	ClassServerError           Class = "server_error"
	ClassBodyError             Class = "body_error"
	ClassInvalidRequest        Class = "invalid_request"
	ClassAuth                  Class = "auth"
	ClassModelNotFound         Class = "model_not_found"
	ClassContentFilter         Class = "content_filter"
	ClassBreakerOpen           Class = "breaker_open"
	ClassWorkerLost            Class = "worker_lost"
)

// AllClasses lists every failure class in the order of README "Failure classes".
var AllClasses = []Class{
	ClassConnect, ClassReadTimeout, ClassTimeout, ClassQueueFull, ClassRateLimited,
	ClassContextLengthExceeded, ClassOutputTruncated, ClassServiceUnavailable,
	ClassServerError, ClassBodyError, ClassInvalidRequest, ClassAuth,
	ClassModelNotFound, ClassContentFilter, ClassBreakerOpen, ClassWorkerLost,
}

// Valid reports whether c is one of the known failure classes.
func (c Class) Valid() bool {
	for _, k := range AllClasses {
		if c == k {
			return true
		}
	}
	return false
}

// CountsForBreaker reports whether a failure of this class says something
// about the upstream's health and so counts against the model's breaker.
// Client mistakes (invalid_request, content_filter, context length,
// truncated output) and our own states (breaker_open, worker_lost) do not.
func (c Class) CountsForBreaker() bool {
	switch c {
	case ClassConnect, ClassReadTimeout, ClassTimeout, ClassQueueFull, ClassRateLimited,
		ClassServiceUnavailable, ClassServerError, ClassBodyError, ClassAuth:
		return true
	}
	return false
}

// Request is one LLM call as a caller asks for it (README "Calling it"). It is plain
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
}
