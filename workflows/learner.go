package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/internal/markdown"
	"github.com/durable-llm/durable-llm/policies/rules"
)

// Rules that learn from users (docs/rules.md "Rules that learn from users"): one RulesLearner per
// scenario keeps every rule's record (rules.Ledger) and its state.
const (
	// LearnerWorkflowName is the workflow type of a scenario's learner,
	// ID LearnerID(scenario), on the calls' task queue.
	LearnerWorkflowName = "RulesLearner"
	// UpdateFeedback counts a call's feedback (FeedbackRequest) and
	// returns what it did (FeedbackResult).
	UpdateFeedback = "feedback"
	// QueryRules returns the learner's RulesView.
	QueryRules = "rules"
	// LearnerNoScenario is the learner of calls that name no scenario
	// (they match only the rules without a scenario).
	LearnerNoScenario = "_none"
	// learnerFeedbacksPerRun bounds a run's history (about five events
	// a feedback) before it continues as new with its ledger.
	learnerFeedbacksPerRun = 500
)

// LearnerScenario is the scenario key of a call's learner: the scenario
// as rules match it (case and surrounding spaces ignored),
// LearnerNoScenario for none.
func LearnerScenario(scenario string) string {
	s := strings.ToLower(strings.TrimSpace(scenario))
	if s == "" {
		return LearnerNoScenario
	}
	return s
}

// LearnerID is the workflow ID of the learner of calls of scenario.
// No idempotency key holds a "/", so no call a caller starts can take it.
func LearnerID(scenario string) string { return "rules-learner/" + LearnerScenario(scenario) }

// policyScenario is the scenario the policy's rules are matched against
// for a learner's key.
func policyScenario(key string) string {
	if key == LearnerNoScenario {
		return ""
	}
	return key
}

// LearnerInput starts a learner: its scenario key (LearnerScenario) and
// the ledger a previous run carried.
type LearnerInput struct {
	Scenario string       `json:"scenario"`
	Ledger   rules.Ledger `json:"ledger"`
	// FeedbacksPerRun before continuing as new; 0: 500.
	FeedbacksPerRun int `json:"feedbacks_per_run,omitempty"`
}

// FeedbackRequest is a call's feedback with what the call's result says
// of its rules: the rule that fired (CallResult.RuleID) and those that
// matched but were off (CallResult.ShadowRules).
type FeedbackRequest = rules.Feedback

// FeedbackResult is what a feedback did: each rule's judgment, the
// changes of state it caused, or that the call's feedback was already
// counted (Duplicate: the first one counts).
type FeedbackResult struct {
	Scenario string `json:"scenario"`
	rules.Result
}

// RulesView is a learner's answer to QueryRules.
type RulesView struct {
	Scenario    string     `json:"scenario"`
	MinFeedback int        `json:"min_feedback"`
	Rules       []RuleView `json:"rules"`
}

// RuleView is one rule's record as operators read it.
type RuleView struct {
	ID        string  `json:"id"`
	Action    string  `json:"action"`
	State     string  `json:"state"`
	Threshold float64 `json:"threshold"`
	// Precision is the estimate the state follows: over the last
	// feedbacks on calls the rule fired on while on or pinned, in shadow
	// while off; Window is how many (MinFeedback at most).
	Precision float64 `json:"precision"`
	Window    int     `json:"window"`
	// Feedbacks = Fired + Shadow: feedbacks on calls the rule fired on,
	// and on calls it matched but did not fire on.
	Feedbacks      int          `json:"feedbacks"`
	Fired          int          `json:"fired"`
	Shadow         int          `json:"shadow"`
	FiredPrecision float64      `json:"fired_precision"`
	FiredCounts    rules.Counts `json:"fired_counts"`
	ShadowCounts   rules.Counts `json:"shadow_counts"`
	// Below: a pinned rule whose precision is below its threshold over a
	// full window (it would be off were it not pinned).
	Below     bool      `json:"below,omitempty"`
	Changes   int       `json:"changes"`
	ChangedAt time.Time `json:"changed_at"`
	Reason    string    `json:"reason"`
}

// Off reports whether the view says rule id is off.
func (v RulesView) Off(id string) bool {
	return slices.ContainsFunc(v.Rules, func(r RuleView) bool { return r.ID == id && r.State == rules.Off.String() })
}

// ErrUnknownOutcome is the error type of a feedback whose outcome is not
// one of rules.Outcomes; ErrMissingCallID of one without a call ID.
const (
	ErrUnknownOutcome = "unknown_outcome"
	ErrMissingCallID  = "missing_call_id"
)

// ValidateFeedback is the feedback update's validator: a known outcome
// and a call ID.
func ValidateFeedback(fb FeedbackRequest) error {
	if strings.TrimSpace(fb.CallID) == "" {
		return temporal.NewApplicationError("feedback: call_id is required: the ID of the call (its workflow ID) the feedback is about", ErrMissingCallID)
	}
	if _, err := rules.ParseOutcome(string(fb.Outcome)); err != nil {
		return temporal.NewApplicationError("feedback: "+err.Error(), ErrUnknownOutcome)
	}
	return nil
}

// learner is one run of a RulesLearner.
type learner struct {
	scenario string
	policy   rules.Learning
	ledger   rules.Ledger
	// tried are the unknown rules this run read the policy for.
	tried []string
	n     int
	// policyRead: the policy was read (feedback waits for it).
	policyRead bool
}

// RulesLearner keeps the records of the rules that apply to one scenario's
// calls (docs/rules.md "Rules that learn from users"). Feedback comes through the UpdateFeedback
// update (a second feedback for a call already counted changes nothing);
// QueryRules reads every rule's record, precision and state. The rules,
// their thresholds and learn.min_feedback come from the worker's policy
// through the LearnerRules local activity, at the start of every run and
// when a feedback names a rule the learner does not know. Every change of
// a rule's state is logged, counted (llm_rule_state_changes), written to
// the learner's memo (rules_off, last_change: an event in its history) and
// its current details, and returned in the update's result; the gauges
// llm_rule_precision and llm_rule_off follow each rule. After
// FeedbacksPerRun feedbacks, or when Temporal suggests it, the learner
// continues as new with its ledger.
func RulesLearner(ctx workflow.Context, in LearnerInput) error {
	l := &learner{scenario: cmp.Or(in.Scenario, LearnerNoScenario), ledger: in.Ledger}
	// The handlers first: the feedback that starts the learner arrives
	// with its first workflow task (update-with-start).
	if err := workflow.SetQueryHandler(ctx, QueryRules, func() (RulesView, error) { return l.view(), nil }); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateFeedback, l.feedback, workflow.UpdateHandlerOptions{Validator: ValidateFeedback})
	if err != nil {
		return err
	}
	if err := l.readPolicy(ctx); err != nil {
		return err
	}
	l.policyRead = true
	for _, r := range l.ledger.Rules {
		l.gauges(ctx, r)
	}
	l.details(ctx)
	perRun := cmp.Or(in.FeedbacksPerRun, learnerFeedbacksPerRun)
	if err := workflow.Await(ctx, func() bool {
		return l.n >= perRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, LearnerWorkflowName, LearnerInput{Scenario: l.scenario, Ledger: l.ledger, FeedbacksPerRun: in.FeedbacksPerRun})
}

// readPolicy reads the scenario's rules from the worker's policy and
// brings the ledger to them.
func (l *learner) readPolicy(ctx workflow.Context) error {
	var a *activities.Activities
	var p rules.Learning
	err := workflow.ExecuteLocalActivity(localOptions(ctx, "read the rules of scenario "+l.scenario+" from the policy"),
		a.LearnerRules, policyScenario(l.scenario)).Get(ctx, &p)
	if err != nil {
		return err
	}
	l.policy = p
	var changes []rules.Change
	l.ledger, changes = l.ledger.Sync(p, workflow.Now(ctx))
	l.report(ctx, changes)
	return nil
}

// feedback is the UpdateFeedback handler.
func (l *learner) feedback(ctx workflow.Context, fb FeedbackRequest) (FeedbackResult, error) {
	l.n++
	if err := workflow.Await(ctx, func() bool { return l.policyRead }); err != nil {
		return FeedbackResult{}, err
	}
	fb.Outcome, _ = rules.ParseOutcome(string(fb.Outcome)) // validated
	if unknown := l.ledger.Unknown(fb); len(unknown) > 0 && slices.ContainsFunc(unknown, func(id string) bool { return !slices.Contains(l.tried, id) }) {
		// A rule new to this learner: the policy may have gained it.
		l.tried = append(l.tried, unknown...)
		if err := l.readPolicy(ctx); err != nil {
			return FeedbackResult{}, fmt.Errorf("read the policy's rules: %w", err)
		}
	}
	var res rules.Result
	l.ledger, res = l.ledger.Apply(l.policy, fb, workflow.Now(ctx))
	for _, c := range res.Counted {
		if i := slices.IndexFunc(l.ledger.Rules, func(r rules.Record) bool { return r.ID == c.Rule }); i >= 0 {
			l.gauges(ctx, l.ledger.Rules[i])
		}
	}
	l.report(ctx, res.Changes)
	if res.Duplicate {
		workflow.GetLogger(ctx).Info("feedback for a call already counted: ignored", "call", fb.CallID, "outcome", fb.Outcome, "counted", res.Previous)
	}
	return FeedbackResult{Scenario: l.scenario, Result: res}, nil
}

// report makes changes of state visible: log, metric, memo, details.
func (l *learner) report(ctx workflow.Context, changes []rules.Change) {
	if len(changes) == 0 {
		return
	}
	log := workflow.GetLogger(ctx)
	for _, c := range changes {
		log.Info("rule state changed", "scenario", l.scenario, "rule", c.Rule, "from", c.From.String(), "to", c.To.String(), "reason", c.Reason)
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
			"scenario": l.scenario, "rule": c.Rule, "state": c.To.String(),
		}).Counter("llm_rule_state_changes").Inc(1)
	}
	off := l.ledger.Off()
	if off == nil {
		off = []string{}
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{"rules_off": off, "last_change": changes[len(changes)-1].String()}); err != nil {
		log.Warn("memo not upserted", "error", err)
	}
	l.details(ctx)
}

func (l *learner) gauges(ctx workflow.Context, r rules.Record) {
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"scenario": l.scenario, "rule": r.ID})
	m.Gauge("llm_rule_precision").Update(r.Precision())
	off := 0.0
	if r.State == rules.Off {
		off = 1
	}
	m.Gauge("llm_rule_off").Update(off)
}

// details writes the rules' states as the learner's current details.
func (l *learner) details(ctx workflow.Context) {
	// The scenario is the callers' word (X-Scenario): escaped, like the
	// rule IDs, for the Web UI's Markdown.
	b := fmt.Sprintf("**rules of scenario %s**\n\n| rule | state | precision | window |\n|---|---|---|---|\n", markdown.Escape(l.scenario))
	for _, r := range l.ledger.Rules {
		b += fmt.Sprintf("| %s | %s | %.2f | %d |\n", markdown.Escape(r.ID), r.State, r.Precision(), len(r.Recent))
	}
	workflow.SetCurrentDetails(ctx, b)
}

func (l *learner) view() RulesView {
	v := RulesView{Scenario: l.scenario, MinFeedback: l.policy.MinFeedback, Rules: []RuleView{}}
	for _, r := range l.ledger.Rules {
		fired, shadow := r.Fired.Total(), r.Shadow.Total()
		v.Rules = append(v.Rules, RuleView{
			ID: r.ID, Action: string(r.Action), State: r.State.String(), Threshold: r.Threshold,
			Precision: r.Precision(), Window: len(r.Recent),
			Feedbacks: fired + shadow, Fired: fired, Shadow: shadow, FiredPrecision: r.FiredPrecision(),
			FiredCounts: r.Fired, ShadowCounts: r.Shadow, Below: r.Below(l.policy.MinFeedback),
			Changes: r.Changes, ChangedAt: r.ChangedAt, Reason: r.Reason,
		})
	}
	return v
}

// IsUnknownOutcome reports whether err is a feedback refused for its
// outcome (ErrUnknownOutcome).
func IsUnknownOutcome(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrUnknownOutcome
}
