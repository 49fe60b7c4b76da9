package request

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/durable-llm/durable-llm/policies/structured"
)

// CheckAnswer checks a model's answer to r (docs/agents.md): its tool
// calls against r's tools and tool_choice, its content against
// response_format. toolErr (class bad_tool_call) and schemaErr (class
// schema_mismatch) say in one line what is wrong; both are nil for a good
// answer. An answer that could not be checked (structured.ErrStepBudget,
// or ctx ended) is a schemaErr, whatever part of it was being checked.
// Their Error is what a tenant may read (the place and the
// constraint, no values, no names the model chose); structured.Detail of
// them is the full text for the model's repair instruction. schemas compiles each schema once (nil: compile every time).
func (r Request) CheckAnswer(ctx context.Context, schemas *structured.Cache, content string, calls []ToolCall) (toolErr, schemaErr error) {
	toolErr, unchecked := r.checkToolCalls(ctx, schemas, calls)
	if unchecked != nil {
		return nil, unchecked
	}
	if len(calls) > 0 || !r.JSONAnswer() {
		return toolErr, nil
	}
	if raw := r.Schema(); raw != nil {
		s, err := schemas.Schema(raw)
		if err != nil {
			return toolErr, structured.Join([]structured.Problem{{
				Public: "the schema does not compile",
				Detail: fmt.Sprintf("the schema does not compile: %v", err),
			}})
		}
		return toolErr, s.Validate(ctx, content)
	}
	return toolErr, structured.ObjectText(content)
}

// checkToolCalls checks the tool calls of an answer to r. A problem's
// public words name the call by its index and the constraint only; the
// names (the model's and the offered ones) go into its detail. unchecked
// is the error of arguments that could not be checked.
func (r Request) checkToolCalls(ctx context.Context, schemas *structured.Cache, calls []ToolCall) (err, unchecked error) {
	if len(calls) == 0 {
		if r.RequiresToolCall() {
			return structured.Join([]structured.Problem{{
				Public: "tool_choice requires a tool call but the answer called no tool",
				Detail: fmt.Sprintf("tool_choice is %s but the answer called no tool", r.ToolChoice),
			}}), nil
		}
		return nil, nil
	}
	if len(r.Tools) == 0 || (r.ToolChoice != nil && r.ToolChoice.Mode == ToolChoiceNone) {
		return structured.Join([]structured.Problem{{
			Public: "the answer called a tool but no tool was offered",
			Detail: fmt.Sprintf("the answer called %s but no tool was offered", calls[0].Function.Name),
		}}), nil
	}
	var problems []structured.Problem
	for i, call := range calls {
		name := call.Function.Name
		at := fmt.Sprintf("tool_calls[%d]", i)
		t, offered := r.tool(name)
		switch {
		case !offered:
			problems = append(problems, structured.Problem{
				Public: at + " calls a tool that was not offered",
				Detail: fmt.Sprintf("%s calls %q, which was not offered (offered: %s)", at, name, strings.Join(r.ToolNames(), ", ")),
			})
			continue
		case r.ToolChoice != nil && r.ToolChoice.Function != "" && name != r.ToolChoice.Function:
			problems = append(problems, structured.Problem{
				Public: at + " calls another tool than the one tool_choice names",
				Detail: fmt.Sprintf("%s calls %q, but tool_choice names %q", at, name, r.ToolChoice.Function),
			})
			continue
		}
		v, err := structured.Parse(call.Function.Arguments)
		if err != nil {
			problems = append(problems, structured.Problem{
				Public: at + ": the arguments are not valid JSON",
				Detail: fmt.Sprintf("%s (%s): the arguments are not valid JSON", at, name),
			})
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			problems = append(problems, structured.Problem{
				Public: at + ": the arguments are not a JSON object",
				Detail: fmt.Sprintf("%s (%s): the arguments are not a JSON object", at, name),
			})
			continue
		}
		if t.Function.Strict != nil && *t.Function.Strict && len(t.Function.Parameters) > 0 {
			s, err := schemas.Schema(t.Function.Parameters)
			if err != nil {
				problems = append(problems, structured.Problem{
					Public: at + ": its parameters do not compile",
					Detail: fmt.Sprintf("%s (%s): its parameters do not compile: %v", at, name, err),
				})
				continue
			}
			err = s.ValidateValue(ctx, v)
			var m *structured.Mismatch
			switch {
			case errors.As(err, &m):
				problems = append(problems, structured.Problem{
					Public: fmt.Sprintf("%s: the arguments do not match its parameters: %v", at, err),
					Detail: fmt.Sprintf("%s (%s): the arguments do not match its parameters: %s", at, name, structured.Detail(err)),
				})
			case err != nil:
				return nil, fmt.Errorf("%s: %w", at, err)
			}
		}
	}
	return structured.Join(problems), nil
}

// tool is r's function named name.
func (r Request) tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}
