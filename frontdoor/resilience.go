package frontdoor

import "github.com/durable-llm/durable-llm/workflows"

// Resilience is the x_resilience object the front door adds to every
// completion, final stream chunk, call status and call error: how the
// durable call went. Go callers decode it from the raw JSON of a response.
type Resilience struct {
	// WorkflowID is the call's workflow ID (its idempotency key), also sent
	// as the X-Workflow-Id header.
	WorkflowID string `json:"workflow_id"`
	// Status is running, completed or failed.
	Status string `json:"status"`
	// Source says who answered: model, fallback_model, faq, rule,
	// placeholder or handoff (also the X-Resilience-Source header).
	Source string `json:"source,omitempty"`
	// Degraded is true when the preferred model did not answer.
	Degraded bool `json:"degraded"`
	// AttemptCount is len(Attempts).
	AttemptCount int `json:"attempt_count"`
	// Attempts lists every upstream attempt and the decision after it.
	Attempts []workflows.Attempt `json:"attempts"`
	// Classes are the failure classes met, in order, each once.
	Classes []string `json:"classes"`
	// Reason says why the answer is degraded, or why the call failed.
	Reason string `json:"reason,omitempty"`
	FAQID  string `json:"faq_id,omitempty"`
	RuleID string `json:"rule_id,omitempty"`
	Flag   string `json:"flag,omitempty"`
	// FailedAttemptTokens are the prompt tokens spent on failed attempts.
	FailedAttemptTokens int `json:"failed_attempt_tokens"`
	// DuplicatePromptTokens are the prompt tokens of requests sent again
	// within the hour (CallResult.Usage.DuplicatePromptTokens).
	DuplicatePromptTokens int `json:"duplicate_prompt_tokens,omitempty"`
	// Replaceable: a hedge's quick answer under hedge.replace; the first
	// model is still answering and GET /v1/calls/{id} gives the final
	// answer when the call completes. Replaced is the quick answer a final
	// answer replaced.
	Replaceable bool                   `json:"replaceable,omitempty"`
	Replaced    *workflows.QuickAnswer `json:"replaced,omitempty"`
	// Content, in a stream's last chunk only when Replaced is set, is the
	// whole answer that replaces the text streamed before it.
	Content string `json:"content,omitempty"`
	// Idempotency says which idempotency window applied to the request
	// this answers, and whether the answer is a replay; only on the
	// answer to a request that starts calls (not on a retrieve).
	Idempotency *Idempotency `json:"idempotency,omitempty"`
}

// Idempotency is the idempotency window that applied to a request (SPEC
// §6, docs/calling.md "Idempotency"): a duplicate of an earlier request,
// within the window of its key, gets the earlier call's answer.
type Idempotency struct {
	// Key is "derived" (from the tenant, user, session and request) or
	// "explicit" (the Idempotency-Key header).
	Key string `json:"key"`
	// Window is the policy field of the window that applied:
	// idempotency.replay_window for a derived key,
	// idempotency.key_window for an explicit one.
	Window string `json:"window"`
	// WindowMS is its length: how long after the call completed the same
	// request gets this answer again.
	WindowMS int64 `json:"window_ms"`
	// Replayed is true when the answer is a call's that an earlier
	// request started (still running, or completed within the window),
	// so this request sent nothing upstream; false when this request
	// started the call.
	Replayed bool `json:"replayed"`
}

// Key values of Idempotency.
const (
	KeyDerived  = "derived"
	KeyExplicit = "explicit"
)

// Status values of Resilience.
const (
	StatusRunning = "running"
	// StatusCanceling: DELETE /v1/calls/{id} asked the call to cancel.
	StatusCanceling = "canceling"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// answerStatus is the status of a call that gave res: running while a
// quick answer may still be replaced, else completed.
func answerStatus(res workflows.CallResult) string {
	if res.Replaceable {
		return StatusRunning
	}
	return StatusCompleted
}

// resilienceOf summarises a CallResult (final or so far).
func resilienceOf(id, status string, res workflows.CallResult) Resilience {
	r := Resilience{
		WorkflowID: id, Status: status, Source: string(res.Source), Degraded: res.Degraded,
		AttemptCount: len(res.Attempts), Attempts: res.Attempts, Classes: []string{},
		Reason: res.Reason, FAQID: res.FAQID, RuleID: res.RuleID, Flag: res.Flag,
		FailedAttemptTokens: res.Usage.FailedAttemptTokens, DuplicatePromptTokens: res.Usage.DuplicatePromptTokens,
		Replaceable: res.Replaceable, Replaced: res.Replaced,
	}
	if r.Attempts == nil {
		r.Attempts = []workflows.Attempt{}
	}
	for _, a := range res.Attempts {
		if a.Class == "" {
			continue
		}
		seen := false
		for _, c := range r.Classes {
			seen = seen || c == a.Class
		}
		if !seen {
			r.Classes = append(r.Classes, a.Class)
		}
	}
	return r
}

// modelOf names who answered: the model, or for a fallback answer
// "durable-llm/<source>" so it is never taken for a model of the ladder.
func modelOf(res workflows.CallResult) string {
	if res.Model != "" {
		return res.Model
	}
	return "durable-llm/" + string(res.Source)
}

// idempotencyOf is the window that applied to req, whose start found its
// call a duplicate's (replayed) or started it.
func (h *Handler) idempotencyOf(req workflows.CallRequest, replayed bool) *Idempotency {
	i := &Idempotency{Key: KeyDerived, Window: "idempotency.replay_window", Replayed: replayed}
	if req.IdempotencyKey != "" {
		i.Key, i.Window = KeyExplicit, "idempotency.key_window"
	}
	i.WindowMS = h.o.Client.Window(req).Milliseconds()
	return i
}
