package activities

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/request"
)

// callAttempt runs one CallModel attempt of a's first model, asking
// question with shape sh, in an activity test environment, and returns
// what the SDK returned.
func callAttempt(t *testing.T, a *Activities, question string, sh callstate.Shape, timeout time.Duration) (converter.EncodedValue, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	m := a.cfg.Models[0]
	req := request.Request{Messages: []request.Message{{Role: request.RoleUser, Content: question}}}
	in := CallInput{Request: req, Model: m.Name, Attempt: 1, Shape: sh, Prompt: a.fitPrompt(req, m, sh), Timeout: timeout}
	return env.ExecuteActivity(a.CallModel, in)
}

// failedOutcome is the outcome a failed attempt carries: err must be the
// activity's application error with a CallOutcome in its details.
func failedOutcome(t *testing.T, err error) (CallOutcome, *temporal.ApplicationError) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("not an application error: %v", err)
	}
	var out CallOutcome
	if err := appErr.Details(&out); err != nil {
		t.Fatal(err)
	}
	return out, appErr
}
