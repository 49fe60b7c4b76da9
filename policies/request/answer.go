package request

import (
	"fmt"
	"strings"

	"github.com/durable-llm/durable-llm/policies/structured"
)

// CheckAnswer checks a model's answer to r (README "Agents"): its tool
// calls against r's tools and tool_choice, its content against
// response_format. toolErr (class bad_tool_call) and schemaErr (class
// schema_mismatch) say in one line what is wrong; both are nil for a good
// answer. schemas compiles each schema once (nil: compile every time).
func (r Request) CheckAnswer(schemas *structured.Cache, content string, calls []ToolCall) (toolErr, schemaErr error) {
	toolErr = r.checkToolCalls(schemas, calls)
	if len(calls) > 0 || !r.JSONAnswer() {
		return toolErr, nil
	}
	if raw := r.Schema(); raw != nil {
		s, err := schemas.Schema(raw)
		if err != nil {
			return toolErr, fmt.Errorf("the schema does not compile: %v", err)
		}
		return toolErr, s.Validate(content)
	}
	return toolErr, structured.ObjectText(content)
}

// checkToolCalls checks the tool calls of an answer to r.
func (r Request) checkToolCalls(schemas *structured.Cache, calls []ToolCall) error {
	if len(calls) == 0 {
		if r.RequiresToolCall() {
			return fmt.Errorf("tool_choice is %s but the answer called no tool", r.ToolChoice)
		}
		return nil
	}
	if len(r.Tools) == 0 || (r.ToolChoice != nil && r.ToolChoice.Mode == ToolChoiceNone) {
		return fmt.Errorf("the answer called %s but no tool was offered", calls[0].Function.Name)
	}
	var problems []string
	for i, call := range calls {
		name := call.Function.Name
		at := fmt.Sprintf("tool_calls[%d]", i)
		t, offered := r.tool(name)
		switch {
		case !offered:
			problems = append(problems, fmt.Sprintf("%s calls %q, which was not offered (offered: %s)", at, name, strings.Join(r.ToolNames(), ", ")))
			continue
		case r.ToolChoice != nil && r.ToolChoice.Function != "" && name != r.ToolChoice.Function:
			problems = append(problems, fmt.Sprintf("%s calls %q, but tool_choice names %q", at, name, r.ToolChoice.Function))
			continue
		}
		v, err := structured.Parse(call.Function.Arguments)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s (%s): the arguments are not valid JSON", at, name))
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			problems = append(problems, fmt.Sprintf("%s (%s): the arguments are not a JSON object", at, name))
			continue
		}
		if t.Function.Strict != nil && *t.Function.Strict && len(t.Function.Parameters) > 0 {
			s, err := schemas.Schema(t.Function.Parameters)
			if err == nil {
				err = s.ValidateValue(v)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s (%s): the arguments do not match its parameters: %v", at, name, err))
			}
		}
	}
	return structured.Join(problems)
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
