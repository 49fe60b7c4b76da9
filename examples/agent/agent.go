package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmworkflow"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// WorkflowName is the registered name of Agent.
const WorkflowName = "Agent"

// DefaultMaxTurns bounds the model calls of one conversation.
const DefaultMaxTurns = 6

// Input is one question to the agent.
type Input struct {
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	Question  string `json:"question"`
	// CallsQueue is the durable-llm workers' task queue; default
	// workflows.TaskQueue.
	CallsQueue string `json:"calls_queue,omitempty"`
	// MaxTurns bounds the model calls; default DefaultMaxTurns.
	MaxTurns int `json:"max_turns,omitempty"`
	// NexusEndpoint, when set, sends the model calls through the
	// durable-llm Nexus service on that endpoint (llmworkflow.WithNexus:
	// the agent runs in another namespace than durable-llm) instead of as
	// child workflows; CallsQueue then does not apply.
	NexusEndpoint string `json:"nexus_endpoint,omitempty"`
}

// Output is the agent's final answer and how it got there.
type Output struct {
	Answer string `json:"answer"`
	// Calls are the IDs of the model calls, one per turn.
	Calls []string `json:"calls"`
	// Tools are the tools run, in order.
	Tools []string `json:"tools"`
}

// toolDefs are the tools the agent offers the model; each is an activity
// of the same name (Register).
var toolDefs = []request.Tool{{Type: "function", Function: request.FunctionTool{
	Name:        ToolLookupOrder,
	Description: "Find an order by its id: its status, carrier and tracking number",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`),
}}}

// ToolLookupOrder is the name of the order lookup tool and its activity.
const ToolLookupOrder = "lookup_order"

// Agent answers in.Question, calling tools as long as the model asks for
// them.
func Agent(ctx workflow.Context, in Input) (Output, error) {
	opts := []llmworkflow.Option{}
	if in.CallsQueue != "" {
		opts = append(opts, llmworkflow.WithTaskQueue(in.CallsQueue))
	}
	if in.NexusEndpoint != "" {
		opts = append(opts, llmworkflow.WithNexus(in.NexusEndpoint))
	}
	maxTurns := in.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})

	out := Output{Calls: []string{}, Tools: []string{}}
	msgs := []request.Message{
		{Role: request.RoleSystem, Content: "You are a support agent. Use the tools to look orders up."},
		{Role: request.RoleUser, Content: in.Question},
	}
	for turn := 1; turn <= maxTurns; turn++ {
		res, err := llmworkflow.Call(ctx, workflows.CallRequest{
			UserID: in.UserID, SessionID: in.SessionID, Scenario: "customer_service",
			Messages: msgs, Tools: toolDefs,
		}, opts...)
		if err != nil {
			return out, fmt.Errorf("turn %d: %w", turn, err)
		}
		out.Calls = append(out.Calls, res.RequestID)
		if len(res.ToolCalls) == 0 {
			out.Answer = res.Content
			return out, nil
		}
		msgs = append(msgs, request.Message{Role: request.RoleAssistant, Content: res.Content, ToolCalls: res.ToolCalls})
		for _, tc := range res.ToolCalls {
			var result string
			if err := workflow.ExecuteActivity(actx, tc.Function.Name, tc.Function.Arguments).Get(ctx, &result); err != nil {
				if temporal.IsCanceledError(err) {
					return out, err
				}
				// The model hears of a failed tool and may answer anyway.
				result = "error: " + err.Error()
			}
			out.Tools = append(out.Tools, tc.Function.Name)
			msgs = append(msgs, request.Message{Role: request.RoleTool, ToolCallID: tc.ID, Content: result})
		}
	}
	return out, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no final answer after %d model calls: the model kept asking for tools", maxTurns), "agent_max_turns", nil)
}

// Order is what the order lookup knows of an order.
type Order struct {
	Status, Carrier, Tracking string
}

// Tools are the agent's tool activities. Safe for concurrent use (Orders
// is only read).
type Tools struct {
	// Orders by id.
	Orders map[string]Order
}

// LookupOrder is the lookup_order tool: its arguments are the model's JSON.
func (t *Tools) LookupOrder(ctx context.Context, arguments string) (string, error) {
	var args struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return "", temporal.NewNonRetryableApplicationError("lookup_order: arguments are not the JSON object its schema asks for", "bad_arguments", nil)
	}
	o, ok := t.Orders[args.OrderID]
	if !ok {
		return fmt.Sprintf("no order %q", args.OrderID), nil
	}
	return fmt.Sprintf("order %s is %s with %s, tracking %s", args.OrderID, o.Status, o.Carrier, o.Tracking), nil
}

// Register registers the agent workflow, its tools and llmworkflow's
// Attach activity (c reaches the calls' namespace) on w.
func Register(w worker.Registry, c client.Client, t *Tools) {
	w.RegisterWorkflowWithOptions(Agent, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterActivityWithOptions(t.LookupOrder, activity.RegisterOptions{Name: ToolLookupOrder})
	llmworkflow.Register(w, c)
}
