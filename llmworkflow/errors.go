package llmworkflow

import (
	"errors"
	"fmt"

	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/workflows"
)

// Kind says how a call failed, for an agent to branch on.
type Kind string

// The kinds of Error.
const (
	// FallbackUnavailable: no model answered a request only a model can
	// answer (a required tool call, a JSON schema), so the FAQ could not
	// either. Retryable: the same request may be answered later.
	FallbackUnavailable Kind = workflows.ErrFallbackUnavailable
	// InvalidRequest: the request must change (Call's own checks, or the
	// worker's validation: the call's class invalid_request).
	InvalidRequest Kind = "invalid_request"
	// KeyReused: the call under a named ID (WithTurn, WithWorkflowID, an
	// idempotency key) was started by a different request, whose answer is
	// not this one's.
	KeyReused Kind = "key_reused"
	// Canceled: the parent cancelled the call (its context).
	Canceled Kind = "canceled"
	// TimedOut: the call's execution timeout passed, typically because no
	// durable-llm worker polls its task queue. Retryable.
	TimedOut Kind = "timed_out"
	// Failed: the call failed otherwise; Class says how (content_filter,
	// spend_cap, …).
	Failed Kind = "failed"
)

// The sentinels an *Error matches with errors.Is, one per Kind.
var (
	ErrFallbackUnavailable = errors.New("fallback unavailable")
	ErrInvalidRequest      = errors.New("invalid request")
	ErrKeyReused           = errors.New("key reused with a different request")
	ErrCanceled            = errors.New("LLM call canceled")
	ErrTimedOut            = errors.New("LLM call timed out")
	ErrFailed              = errors.New("LLM call failed")
)

// sentinel is the sentinel of k.
func sentinel(k Kind) error {
	switch k {
	case FallbackUnavailable:
		return ErrFallbackUnavailable
	case InvalidRequest:
		return ErrInvalidRequest
	case KeyReused:
		return ErrKeyReused
	case Canceled:
		return ErrCanceled
	case TimedOut:
		return ErrTimedOut
	}
	return ErrFailed
}

// invalidRequestClass is the error type of a call the worker refused.
const invalidRequestClass = string(failure.InvalidRequest)

// Error is the error of a call that gave no answer.
type Error struct {
	Kind Kind
	// CallID is the call's workflow ID ("" when Call refused the request
	// before starting one).
	CallID string
	// Class is the error type of the call's failure (its failure class,
	// fallback_unavailable, spend_cap), when it failed with one.
	Class string
	// Reason says what happened, in the product's words.
	Reason string
	// Result is the call's result so far (attempts, reason), when its
	// failure carried one.
	Result *workflows.CallResult
	// Err is the error from Temporal, when there is one.
	Err error
}

func (e *Error) Error() string {
	s := "LLM call"
	if e.CallID != "" {
		s += " " + e.CallID
	}
	s += ": " + string(e.Kind)
	if e.Class != "" && e.Class != string(e.Kind) {
		s += " (" + e.Class + ")"
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns the error from Temporal (so temporal.IsCanceledError and
// errors.As to *temporal.ApplicationError see through an *Error).
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of e's Kind.
func (e *Error) Is(target error) bool { return sentinel(e.Kind) == target }

// Retryable reports whether the same request may get an answer later:
// FallbackUnavailable and TimedOut.
func (e *Error) Retryable() bool { return e.Kind == FallbackUnavailable || e.Kind == TimedOut }

func invalidf(format string, args ...any) error {
	return &Error{Kind: InvalidRequest, Reason: fmt.Sprintf(format, args...)}
}
