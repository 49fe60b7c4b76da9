package llmclient

import (
	"context"
	"errors"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/policies/rules"
	"github.com/durable-llm/durable-llm/workflows"
)

// Errors of Feedback, wrapped with the call's ID and what to do.
var (
	// ErrInvalidFeedback: the outcome is not one of rules.Outcomes.
	ErrInvalidFeedback = errors.New("invalid feedback")
	// ErrCallNotFound: no LLM call has this ID.
	ErrCallNotFound = errors.New("no such call")
	// ErrCallRunning: the call has not answered yet.
	ErrCallRunning = errors.New("call still running")
	// ErrCallNotAnswered: the call ended without an answer (failed,
	// canceled, timed out): no rule to learn about.
	ErrCallNotAnswered = errors.New("call ended without an answer")
)

// Feedback tells the rules' learner what the user did after call id
// (docs/rules.md "Rules that learn from users"): outcome is resolved, abandoned, handoff_requested
// or complaint. The call must be an LLM call that answered; its result
// says which rule fired (RuleID) and which matched but were off
// (ShadowRules), and its scenario (the LlmScenario search attribute)
// selects the learner, started when it does not run yet. A call no rule
// matched is answered without a learner (nothing to learn). A second
// feedback for the same call is not counted again: the result says
// Duplicate and the outcome counted.
func (c *Client) Feedback(ctx context.Context, id, outcome string) (workflows.FeedbackResult, error) {
	o, err := rules.ParseOutcome(outcome)
	if err != nil {
		return workflows.FeedbackResult{}, fmt.Errorf("%w: %v", ErrInvalidFeedback, err)
	}
	desc, err := c.Temporal.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return workflows.FeedbackResult{}, fmt.Errorf("%w: %s", ErrCallNotFound, id)
	}
	if err != nil {
		return workflows.FeedbackResult{}, fmt.Errorf("read call %s: %w", id, err)
	}
	return c.FeedbackOn(ctx, desc, o)
}

// FeedbackOn is Feedback for a call already described (the front door
// describes it to check its owner).
func (c *Client) FeedbackOn(ctx context.Context, desc *client.WorkflowExecutionDescription, o rules.Outcome) (workflows.FeedbackResult, error) {
	id := desc.WorkflowExecution.ID
	if desc.WorkflowType.Name != workflows.WorkflowName {
		return workflows.FeedbackResult{}, fmt.Errorf("%w: %s is not an LLM call", ErrCallNotFound, id)
	}
	switch desc.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return workflows.FeedbackResult{}, fmt.Errorf("%w: call %s has not answered yet: send feedback once it has", ErrCallRunning, id)
	default:
		return workflows.FeedbackResult{}, fmt.Errorf("%w: call %s ended without an answer (%s): there is no rule to learn about",
			ErrCallNotAnswered, id, StatusWord(desc.Status))
	}
	res, err := c.RunResult(ctx, id, desc.WorkflowExecution.RunID)
	if err != nil {
		return workflows.FeedbackResult{}, fmt.Errorf("read the result of call %s: %w", id, err)
	}
	scenario, _ := desc.TypedSearchAttributes.GetKeyword(workflows.SAScenario)
	fb := workflows.FeedbackRequest{CallID: id, Outcome: o, Fired: res.RuleID, Shadow: res.ShadowRules}
	key := workflows.LearnerScenario(scenario)
	if fb.Fired == "" && len(fb.Shadow) == 0 {
		// No rule matched the call: nothing to learn, no learner to start.
		return workflows.FeedbackResult{Scenario: key, Result: rules.Result{CallID: id, Outcome: o, Counted: []rules.Counted{}}}, nil
	}
	return c.sendFeedback(ctx, key, fb)
}

// sendFeedback sends fb to the learner of scenario key, starting it when
// it does not run.
func (c *Client) sendFeedback(ctx context.Context, key string, fb workflows.FeedbackRequest) (workflows.FeedbackResult, error) {
	lid := workflows.LearnerID(key)
	var out workflows.FeedbackResult
	var err error
	for range 3 { // a learner that just continued as new: try its next run
		op := c.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       lid,
			TaskQueue:                c.taskQueue(),
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			StaticSummary:            "rules learner · scenario " + key,
		}, workflows.LearnerWorkflowName, workflows.LearnerInput{Scenario: key})
		var h client.WorkflowUpdateHandle
		h, err = c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				// No update ID of the call's: Temporal would answer a second
				// feedback with the first's result; the learner says Duplicate.
				WorkflowID: lid, UpdateName: workflows.UpdateFeedback,
				Args: []any{fb}, WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			if err = h.Get(ctx, &out); err == nil {
				return out, nil
			}
		}
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) || ctx.Err() != nil {
			break
		}
	}
	return out, fmt.Errorf("feedback on call %s to %s: %w", fb.CallID, lid, err)
}

// taskQueue is the task queue the client's calls run on.
func (c *Client) taskQueue() string {
	if c.TaskQueue == "" {
		return workflows.TaskQueue
	}
	return c.TaskQueue
}

// Rules reads the records of the learner of scenario's calls; a scenario
// without a learner (no feedback yet) is a *serviceerror.NotFound.
func (c *Client) Rules(ctx context.Context, scenario string) (workflows.RulesView, error) {
	return c.learnerRules(ctx, workflows.LearnerID(scenario))
}

// learnerRules queries the learner workflow id for its records.
func (c *Client) learnerRules(ctx context.Context, id string) (workflows.RulesView, error) {
	var v workflows.RulesView
	val, err := c.Temporal.QueryWorkflow(ctx, id, "", workflows.QueryRules)
	if err != nil {
		return v, err
	}
	err = val.Get(&v)
	return v, err
}

// AllRules reads every running learner's records, by scenario.
func (c *Client) AllRules(ctx context.Context) ([]workflows.RulesView, error) {
	var views []workflows.RulesView
	var token []byte
	for {
		resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.LearnerWorkflowName),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list the rules learners: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			v, err := c.learnerRules(ctx, e.GetExecution().GetWorkflowId())
			if err != nil {
				return nil, fmt.Errorf("query %s: %w", e.GetExecution().GetWorkflowId(), err)
			}
			views = append(views, v)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Scenario < views[j].Scenario })
	return views, nil
}

// StatusWord is a workflow's status in words ("timed out").
func StatusWord(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	}
	return s.String()
}
