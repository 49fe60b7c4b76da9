package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/internal/markdown"
)

// Risk review (docs/rules.md): a call whose rule has review:
// true starts a RiskReview workflow on its own task queue. It waits for an
// operator's decision (the UpdateReviewDecision update, sent by
// `starter review approve|reject <call id>`), so the reviewers' queue is
// the list of running RiskReview workflows in the Web UI:
//
//	WorkflowType = "RiskReview" AND ExecutionStatus = "Running"
const (
	ReviewWorkflowName = "RiskReview"
	// ReviewTaskQueue is the reviews' own task queue: a backlog of calls
	// never delays a review, nor the other way round.
	ReviewTaskQueue = "llm-reviews"
	// UpdateReviewDecision records an operator's decision.
	UpdateReviewDecision = "decide"
	// QueryReview returns the ReviewResult so far.
	QueryReview = "review"
	// DefaultReviewTimeout is how long a review waits for a decision
	// before it ends as expired.
	DefaultReviewTimeout = 7 * 24 * time.Hour
)

// The values of the LlmReview search attribute.
const (
	ReviewPending  = "pending"
	ReviewApproved = "approved"
	ReviewRejected = "rejected"
	ReviewExpired  = "expired"
)

// SAFlag is a fired rule's flag (e.g. risk_review), on the call and on its
// review; SAReview is a review's state.
var (
	SAFlag   = temporal.NewSearchAttributeKeyKeyword("LlmFlag")
	SAReview = temporal.NewSearchAttributeKeyKeyword("LlmReview")
)

// ReviewID is the ID of the review of call callID: "<call id>/review".
// No idempotency key holds a "/", so no call a caller starts can take it.
func ReviewID(callID string) string { return callID + reviewSuffix }

const reviewSuffix = "/review"

// ReviewCallID is the call ID of a review ID, or id itself when it is a
// call ID.
func ReviewCallID(id string) string { return strings.TrimSuffix(id, reviewSuffix) }

// ReviewInput is what the reviewer needs: the call, the rule and why it
// fired, and the question (a payload: encrypted like the call's own
// when payload encryption is on).
type ReviewInput struct {
	CallID   string `json:"call_id"`
	RuleID   string `json:"rule_id"`
	Flag     string `json:"flag,omitempty"`
	Scenario string `json:"scenario,omitempty"`
	Tenant   string `json:"tenant,omitempty"`
	Reason   string `json:"reason"`
	Question string `json:"question,omitempty"`
	// Timeout: no decision in this time ends the review as expired; 0:
	// DefaultReviewTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// ReviewDecision is an operator's decision: approve or reject.
type ReviewDecision struct {
	Decision string `json:"decision"`
	Reviewer string `json:"reviewer,omitempty"`
	Note     string `json:"note,omitempty"`
}

// The decisions an operator sends.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// ReviewResult is the state of a review and, once decided, its result.
type ReviewResult struct {
	ReviewInput
	State     string    `json:"state"`
	Reviewer  string    `json:"reviewer,omitempty"`
	Note      string    `json:"note,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitempty"`
}

// maxReviewNote bounds a reviewer's note (it is kept in history).
const maxReviewNote = 2000

// ValidateDecision refuses a decision that is neither approve nor reject,
// or whose note is too long, naming the problem.
func ValidateDecision(d ReviewDecision) error {
	var errs []error
	if d.Decision != DecisionApprove && d.Decision != DecisionReject {
		errs = append(errs, fmt.Errorf("decision must be %q or %q, got %q", DecisionApprove, DecisionReject, d.Decision))
	}
	if len(d.Note) > maxReviewNote {
		errs = append(errs, fmt.Errorf("note must be at most %d bytes, got %d", maxReviewNote, len(d.Note)))
	}
	return errors.Join(errs...)
}

// RiskReview waits for an operator's decision on a call that a rule sent
// to review, or for its timeout. A decision is taken once: a second one
// is refused, naming the first.
func RiskReview(ctx workflow.Context, in ReviewInput) (ReviewResult, error) {
	res := ReviewResult{ReviewInput: in, State: ReviewPending}
	if err := workflow.SetQueryHandler(ctx, QueryReview, func() (ReviewResult, error) { return res, nil }); err != nil {
		return res, err
	}
	decided := false
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateReviewDecision,
		func(ctx workflow.Context, d ReviewDecision) (ReviewResult, error) {
			if decided {
				// Two decisions validated in one workflow task.
				return res, fmt.Errorf("call %s was already reviewed: %s", in.CallID, res.Outcome())
			}
			res.State = ReviewApproved
			if d.Decision == DecisionReject {
				res.State = ReviewRejected
			}
			res.Reviewer, res.Note, res.DecidedAt = d.Reviewer, d.Note, workflow.Now(ctx)
			decided = true
			return res, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, d ReviewDecision) error {
			if decided {
				return fmt.Errorf("call %s was already reviewed: %s", in.CallID, res.Outcome())
			}
			return ValidateDecision(d)
		}})
	if err != nil {
		return res, err
	}
	workflow.SetCurrentDetails(ctx, reviewDetails(in))
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultReviewTimeout
	}
	ok, err := workflow.AwaitWithTimeout(ctx, timeout, func() bool { return decided })
	if err != nil {
		return res, err
	}
	if !ok {
		res.State = ReviewExpired
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAReview.ValueSet(res.State)); err != nil {
		workflow.GetLogger(ctx).Warn("search attributes not upserted", "error", err)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**\n\n%s", markdown.Escape(res.Outcome()), reviewDetails(in)))
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"rule": in.RuleID, "state": res.State}).Counter("llm_reviews").Inc(1)
	return res, nil
}

// Outcome is the review's state and who decided: "approved by alice".
func (r ReviewResult) Outcome() string {
	if r.Reviewer == "" {
		return r.State
	}
	return r.State + " by " + r.Reviewer
}

// reviewDetails is what the Web UI shows of a review (no question text:
// the details are not a payload).
func reviewDetails(in ReviewInput) string {
	d := fmt.Sprintf("rule **%s** on call %s", markdown.Escape(in.RuleID), markdown.Escape(in.CallID))
	if in.Scenario != "" {
		d += " · scenario " + markdown.Escape(in.Scenario)
	}
	if in.Tenant != "" {
		d += " · tenant " + markdown.Escape(in.Tenant)
	}
	return d + fmt.Sprintf("\n\n%s\n\ndecide with: starter review approve|reject %s", markdown.Escape(in.Reason), markdown.Escape(in.CallID))
}
