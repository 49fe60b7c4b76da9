package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/rules"
)

// maxFeedbackBytes bounds a feedback's body ({"outcome":"…"}).
const maxFeedbackBytes = 4 << 10

// Feedback is the answer to POST /v1/calls/{id}/feedback: what the rules'
// learner recorded (docs/rules.md "Rules that learn from users").
type Feedback struct {
	ID       string `json:"id"`
	Object   string `json:"object"` // "call.feedback"
	Outcome  string `json:"outcome"`
	Scenario string `json:"scenario"`
	// Duplicate: the call's feedback was already recorded (as Previous);
	// this one changed nothing.
	Duplicate bool   `json:"duplicate,omitempty"`
	Previous  string `json:"previous,omitempty"`
	// Rules are the rules the feedback counted for: the one that fired on
	// the call, or those that matched it but were off; empty when no rule
	// matched the call.
	Rules []FeedbackRule `json:"rules"`
}

// FeedbackRule is one rule's part in a feedback.
type FeedbackRule struct {
	ID       string `json:"id"`
	Fired    bool   `json:"fired"`
	Judgment string `json:"judgment"` // good, bad, neutral
	State    string `json:"state"`    // on, off, pinned: after the feedback
}

// postFeedback serves POST /v1/calls/{id}/feedback with a body
// {"outcome":"resolved|abandoned|handoff_requested|complaint"}: what the
// user did after the tenant's own call. 200 with what was recorded; 400
// for a bad body or outcome; 404 for an unknown call or another tenant's,
// alike; 409 for a call that has not answered (still running, or ended
// without an answer).
func (h *Handler) postFeedback(w http.ResponseWriter, r *http.Request, tenant string) {
	o, apiErr := readOutcome(w, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	h.withOwnCall(w, r, tenant, func(ctx context.Context, id string, desc *client.WorkflowExecutionDescription) {
		res, err := h.o.Client.FeedbackOn(ctx, desc, o)
		switch {
		case errors.Is(err, llmclient.ErrCallRunning):
			callRunning(id).write(w)
			return
		case errors.Is(err, llmclient.ErrCallNotAnswered):
			callNotAnswered(id, llmclient.StatusWord(desc.Status)).write(w)
			return
		case err != nil:
			h.lookupFailed(err).write(w)
			return
		}
		out := Feedback{ID: id, Object: "call.feedback", Outcome: string(o), Scenario: res.Scenario, Duplicate: res.Duplicate,
			Previous: string(res.Previous), Rules: []FeedbackRule{}}
		for _, c := range res.Counted {
			out.Rules = append(out.Rules, FeedbackRule{ID: c.Rule, Fired: c.Fired, Judgment: c.Judgment, State: c.State.String()})
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// readOutcome reads a feedback's body: a JSON object with one field,
// outcome.
func readOutcome(w http.ResponseWriter, r *http.Request) (rules.Outcome, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFeedbackBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		closeEarly(w)
		return "", feedbackTooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		closeEarly(w)
		return "", feedbackTimeout()
	case err != nil:
		closeEarly(w)
		return "", feedbackUnreadable()
	}
	var in struct {
		Outcome *string `json:"outcome"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return "", feedbackInvalidJSON(err)
	}
	if in.Outcome == nil {
		return "", missingOutcome()
	}
	o, err := rules.ParseOutcome(*in.Outcome)
	if err != nil {
		return "", invalidOutcome(err)
	}
	return o, nil
}
