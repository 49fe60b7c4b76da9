package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/prompt"
)

// SourceSteps: the answer was given step by step, by child calls.
const SourceSteps Source = "steps"

// rulesAfterFailure checks the rules that wait for failures
// (Admission.After, whose scenario and keywords matched at admission)
// against the call's failures so far, in order; the first whose technical
// condition holds fires and answers the call (acted is true): no more
// attempts. A rule the learner turned off is only noted in ShadowRules.
// Text already streamed to the caller is never followed by a rule's
// answer: such a call goes on as decided.
func (c *call) rulesAfterFailure(ctx workflow.Context, next callstate.State) (acted bool, err error) {
	if len(c.admission.After) == 0 || c.delivered != "" {
		return false, nil
	}
	//workflowcheck:ignore failuresByClass sums over the maps: the order cannot change a sum
	counts := failuresByClass(next.Failures)
	for _, r := range c.admission.After {
		//workflowcheck:ignore Holds sums over the map: the order cannot change a sum
		if r.After == nil || !r.After.Holds(counts) || slices.Contains(c.rulesTried, r.ID) {
			continue
		}
		if r.Off {
			if !slices.Contains(c.res.ShadowRules, r.ID) {
				c.res.ShadowRules = append(c.res.ShadowRules, r.ID)
			}
			continue
		}
		//workflowcheck:ignore describeFailures sorts what it reads from the map
		why := fmt.Sprintf("business rule %s after %s", r.ID, describeFailures(counts, r.After))
		// The rule, not the step decided after the last attempt, says what
		// comes next (unless step-by-step mode gives up).
		var last *Attempt
		var decided Attempt
		if n := len(c.res.Attempts); n > 0 {
			last = &c.res.Attempts[n-1]
			decided = *last
			last.Decision, last.Reason, last.DelayMS = "rule "+string(r.Action), why, 0
		}
		if r.Action == config.RuleStepByStep {
			// Tried once: a later failure does not split the question again.
			c.rulesTried = append(c.rulesTried, r.ID)
			acted, err := c.stepByStep(ctx, r, why)
			if !acted && last != nil {
				*last = decided
			}
			return acted, err
		}
		return true, c.fire(ctx, r, why)
	}
	return false, nil
}

// failuresByClass sums a state's failures per model and class by class.
func failuresByClass(byModel map[string]map[failure.Class]int) map[failure.Class]int {
	counts := map[failure.Class]int{}
	for _, byClass := range byModel {
		for class, n := range byClass {
			counts[class] += n
		}
	}
	return counts
}

// describeFailures names the failures that met a rule's condition:
// "2 × output_truncated".
func describeFailures(counts map[failure.Class]int, a *config.RuleAfter) string {
	var parts []string
	for class, n := range counts {
		if len(a.Classes) == 0 || slices.Contains(a.Classes, class) {
			parts = append(parts, fmt.Sprintf("%d × %s", n, class))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// fire answers the call with a handoff or safe_message rule's message,
// why being what made it fire; a rule with review starts its review
// first.
func (c *call) fire(ctx workflow.Context, r activities.RuleHit, why string) error {
	c.res.RuleID, c.res.Flag = r.ID, r.Flag
	outcome := OutcomeDegraded
	switch r.Action {
	case config.RuleHandoff:
		c.res.Content, c.res.Source, c.res.Degraded = r.Message, SourceHandoff, false
		c.res.Reason = why + ": hand-off to a human"
		outcome = OutcomeHandoff
	default: // safe_message
		c.res.Content, c.res.Source, c.res.Degraded = r.Message, SourceRule, true
		c.res.Reason = why + ": safe message"
	}
	if len(c.res.Attempts) == 0 {
		c.res.Reason += ", no model call"
	} else {
		c.res.Reason += ", no more attempts"
	}
	c.res.FinishReason, c.res.Model = "", ""
	if r.Review {
		if err := c.startReview(ctx, r, why); err != nil {
			return err
		}
	}
	c.finish(ctx, outcome)
	return nil
}

// startReview starts the RiskReview workflow of the call on its own task
// queue; it outlives the call (ParentClosePolicy abandon). A review that
// cannot start (one for this call exists already) is logged, not fatal:
// the user's answer does not depend on it.
func (c *call) startReview(ctx workflow.Context, r activities.RuleHit, why string) error {
	id := ReviewID(c.res.RequestID)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        id,
		TaskQueue:         ReviewTaskQueue,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SAFlag.ValueSet(keyword(r.Flag)), SAReview.ValueSet(ReviewPending),
			SAScenario.ValueSet(keyword(c.req.Scenario)), SATenant.ValueSet(keyword(c.req.Tenant)),
		),
		StaticSummary: fmt.Sprintf("review · rule %s · call %s", r.ID, c.res.RequestID),
	})
	f := workflow.ExecuteChildWorkflow(cctx, ReviewWorkflowName, ReviewInput{
		CallID: c.res.RequestID, RuleID: r.ID, Flag: r.Flag, Scenario: c.req.Scenario, Tenant: c.req.Tenant,
		Reason: why, Question: c.req.Question(),
	})
	var started workflow.Execution
	if err := f.GetChildWorkflowExecution().Get(ctx, &started); err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		workflow.GetLogger(ctx).Warn("risk review not started", "review", id, "error", err)
		return nil
	}
	c.res.Review = id
	return nil
}

// stepByStep answers the call in three steps: a model (or a rule) splits
// the question into three smaller ones, each is answered by a child
// LLMCall with the request's system messages and that question alone, and
// the answers are joined into one that says it was answered in steps.
// When no step was answered by a model, nothing is gained over the
// decision the failure led to: acted is false and the call goes on.
func (c *call) stepByStep(ctx workflow.Context, r activities.RuleHit, why string) (bool, error) {
	if c.timeLeft(ctx) < 2*guard.MinAttemptTime {
		return false, nil
	}
	workflow.SetCurrentDetails(ctx, "step by step: splitting the question ("+why+")")
	c.event(ctx, Event{Type: EventWaiting, Reason: why + ": answering in steps"})
	q := c.req.Question()
	sp, err := c.splitQuestion(ctx, r, q)
	if err != nil {
		return false, err
	}
	remaining := c.timeLeft(ctx)
	if remaining < guard.MinAttemptTime {
		return false, nil
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("step by step: %d child calls (%s)", len(sp.Questions), why))
	steps, byModel, degraded, err := c.answerSteps(ctx, q, sp, remaining)
	if err != nil {
		return false, err
	}
	c.res.Steps = steps
	if byModel == 0 {
		c.res.Reason = why + ": no step was answered by a model"
		return false, nil
	}
	c.res.RuleID, c.res.Flag = r.ID, r.Flag
	c.res.Content = joinSteps(q, steps)
	// An answer with a step no model answered is a degraded one.
	degraded = degraded || byModel < len(steps)
	c.res.Source, c.res.Degraded, c.res.FinishReason, c.res.Model = SourceSteps, degraded, "", steps[0].Model
	split := "split by " + sp.By
	if sp.By == activities.SplitRule && sp.Reason != "" {
		split += " (" + sp.Reason + ")"
	}
	c.res.Reason = fmt.Sprintf("%s: answered in %d steps, %d by a model; %s", why, len(steps), byModel, split)
	outcome := OutcomeAnswered
	if degraded {
		outcome = OutcomeDegraded
	}
	c.finish(ctx, outcome)
	return true, nil
}

// splitQuestion splits q in three, by a model, else by rule; the split's
// own request is the call's too. Its error is a cancellation only.
func (c *call) splitQuestion(ctx workflow.Context, r activities.RuleHit, q string) (activities.Split, error) {
	var a *activities.Activities
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: min(25*time.Second, c.timeLeft(ctx)/2),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             "split: the question into three smaller ones (" + r.ID + ")",
	})
	var sp activities.Split
	if err := workflow.ExecuteActivity(sctx, a.SplitQuestion, activities.SplitInput{Question: q, Tenant: c.req.Tenant, RuleID: r.ID}).Get(ctx, &sp); err != nil {
		if temporal.IsCanceledError(err) {
			return sp, err
		}
		sp = activities.Split{Questions: activities.SplitByRule(q), By: activities.SplitRule, Reason: err.Error()}
	}
	c.res.Usage.PromptTokens += sp.PromptTokens
	c.res.Usage.CompletionTokens += sp.CompletionTokens
	if sp.PromptTokens+sp.CompletionTokens > 0 {
		c.tokens(ctx, "prompt", sp.Model, sp.PromptTokens)
		c.tokens(ctx, "completion", sp.Model, sp.CompletionTokens)
	}
	return sp, nil
}

// answerSteps answers each question of sp by a child LLMCall, all at once,
// within remaining, and adds their usage to the call's: the steps, how
// many a model answered, and whether any answer is degraded. Its error is
// a cancellation only.
func (c *call) answerSteps(ctx workflow.Context, q string, sp activities.Split, remaining time.Duration) ([]StepAnswer, int, bool, error) {
	futures := make([]workflow.ChildWorkflowFuture, len(sp.Questions))
	for i, sq := range sp.Questions {
		req := CallRequest{
			Tenant: c.req.Tenant, UserID: c.req.UserID, SessionID: c.req.SessionID, Scenario: c.req.Scenario,
			Messages: activities.StepMessages(c.req, q, sq), MaxTokens: c.req.MaxTokens, Temperature: c.req.Temperature,
			DeadlineMS: remaining.Milliseconds(), Step: i + 1,
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:               fmt.Sprintf("%s/step-%d", c.res.RequestID, i+1),
			WorkflowExecutionTimeout: remaining + time.Minute,
			StaticSummary:            fmt.Sprintf("step %d/%d of %s", i+1, len(sp.Questions), c.res.RequestID),
		})
		futures[i] = workflow.ExecuteChildWorkflow(cctx, WorkflowName, req)
	}
	steps := make([]StepAnswer, len(futures))
	byModel, degraded := 0, false
	for i, f := range futures {
		var res CallResult
		err := f.Get(ctx, &res)
		if err != nil && temporal.IsCanceledError(err) {
			return nil, 0, false, err
		}
		var exec workflow.Execution
		_ = f.GetChildWorkflowExecution().Get(ctx, &exec)
		steps[i] = StepAnswer{Question: sp.Questions[i], CallID: exec.ID, Source: res.Source, Model: res.Model, Content: res.Content}
		if err != nil {
			steps[i].Content, degraded = "", true
			continue
		}
		if res.Source == SourceModel || res.Source == SourceFallbackModel {
			byModel++
		}
		degraded = degraded || res.Degraded
		c.res.Usage.PromptTokens += res.Usage.PromptTokens
		c.res.Usage.CompletionTokens += res.Usage.CompletionTokens
		c.res.Usage.FailedAttemptTokens += res.Usage.FailedAttemptTokens
		c.res.Usage.DuplicatePromptTokens += res.Usage.DuplicatePromptTokens
	}
	return steps, byModel, degraded, nil
}

// joinSteps writes the steps' answers as one, in the question's language,
// saying it was answered in steps.
func joinSteps(question string, steps []StepAnswer) string {
	zh := prompt.MostlyChinese(question)
	head, step := "This question was answered in %d steps.", "\n\nStep %d: %s\n%s"
	if zh {
		head, step = "这个问题分 %d 步回答。", "\n\n第 %d 步：%s\n%s"
	}
	out := fmt.Sprintf(head, len(steps))
	for i, s := range steps {
		content := s.Content
		if content == "" {
			content = "—"
		}
		out += fmt.Sprintf(step, i+1, s.Question, content)
	}
	return out
}
