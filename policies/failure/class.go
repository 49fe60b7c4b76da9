package failure

// Class is the failure class of one upstream attempt (docs/how-it-works.md "Failure classes"). The empty
// class means the attempt succeeded.
type Class string

// The failure classes. Their string values appear in history (as the
// ApplicationError type of a failed attempt), in search attributes, in the
// policy file and in metrics, so they never change.
const (
	None                  Class = ""
	Connect               Class = "connect"
	ReadTimeout           Class = "read_timeout"
	StreamBroken          Class = "stream_broken"
	Timeout               Class = "timeout"
	QueueFull             Class = "queue_full"
	RateLimited           Class = "rate_limited"
	ContextLengthExceeded Class = "context_length_exceeded"
	OutputTruncated       Class = "output_truncated"
	ServiceUnavailable    Class = "service_unavailable"
	ServerError           Class = "server_error"
	BodyError             Class = "body_error"
	InvalidRequest        Class = "invalid_request"
	Auth                  Class = "auth"
	ModelNotFound         Class = "model_not_found"
	ContentFilter         Class = "content_filter"
	BreakerOpen           Class = "breaker_open"
	WorkerLost            Class = "worker_lost"
	// BadToolCall: a tool call whose arguments are not a JSON object, or
	// that names a tool the request did not offer (or not the one it
	// forced).
	BadToolCall Class = "bad_tool_call"
	// SchemaMismatch: an answer asked for as JSON that does not parse, or
	// does not validate against the request's JSON schema.
	SchemaMismatch Class = "schema_mismatch"
)

// AllClasses lists every failure class in the order of docs/how-it-works.md "Failure classes".
var AllClasses = []Class{
	Connect, ReadTimeout, StreamBroken, Timeout, QueueFull, RateLimited,
	ContextLengthExceeded, OutputTruncated, ServiceUnavailable,
	ServerError, BodyError, InvalidRequest, Auth,
	ModelNotFound, ContentFilter, BreakerOpen, WorkerLost,
	BadToolCall, SchemaMismatch,
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
// truncated output), answers of the wrong shape (bad_tool_call,
// schema_mismatch: the model is up, it answered badly) and our own states
// (breaker_open, worker_lost) do not.
func (c Class) CountsForBreaker() bool {
	switch c {
	case Connect, ReadTimeout, StreamBroken, Timeout, QueueFull, RateLimited,
		ServiceUnavailable, ServerError, BodyError, Auth:
		return true
	}
	return false
}
