package failure

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
