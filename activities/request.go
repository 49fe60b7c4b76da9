package activities

import (
	"encoding/json"
	"fmt"
	"math"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
)

// fitPrompt is the prompt an attempt on model m sends for the call's shape.
func (a *Activities) fitPrompt(req request.Request, m config.ModelConfig, sh callstate.Shape) Prompt {
	reserve := sh.MaxTokens
	if reserve <= 0 {
		reserve = a.cfg.Pruning.ReserveOutputTokens
	}
	// Tools and a JSON schema are prompt too: the window keeps room for
	// them, and the attempt counts them.
	defs := a.definitionTokens(req)
	f := prompt.Fit(req.Messages, prompt.Shape{
		Stage: sh.PruneStage, KeepRounds: sh.KeepRounds, Factor: a.cfg.Pruning.Factor,
		Window: m.ContextWindow, Reserve: reserve + defs, Support: m.SystemPrompt,
	}, a.tokens)
	sent := prompt.Build(req.Messages, f.Keep, m.SystemPrompt)
	p := Prompt{
		Keep: f.Keep, Before: f.Before, Tokens: f.Tokens + defs, Exact: f.Exact, Fits: f.Fits,
		Messages: len(sent),
	}
	if prompt.DropsSystem(req.Messages, m.SystemPrompt) {
		p.Note = "system prompt dropped: " + m.Name + " takes no system role"
	}
	return p
}

// definitionTokens counts the tools and the response schema of req as the
// upstream reads them: their JSON, tokenized.
func (a *Activities) definitionTokens(req request.Request) int {
	if len(req.Tools) == 0 && req.Schema() == nil {
		return 0
	}
	b, err := json.Marshal(struct {
		Tools  []request.Tool  `json:"tools,omitempty"`
		Schema json.RawMessage `json:"schema,omitempty"`
	}{req.Tools, req.Schema()})
	if err != nil {
		return 0
	}
	return a.tokens.Count(string(b))
}

// attemptMessages are the messages attempt in sends to m: the prepared
// cut, and the text to continue when the attempt continues one.
func attemptMessages(in CallInput, m config.ModelConfig) []request.Message {
	msgs := prompt.Build(in.Request.Messages, in.Prompt.Keep, m.SystemPrompt)
	if in.Continue != "" {
		msgs = append(msgs, request.Message{Role: request.RoleAssistant, Content: in.Continue})
	}
	return msgs
}

// upstreamRequest is the request attempt in sends to m with msgs: the
// call's fields and shape (chatRequest), and a max_tokens within the window
// when neither the caller nor the policy set one.
func (a *Activities) upstreamRequest(in CallInput, m config.ModelConfig, msgs []request.Message) openai.ChatCompletionRequest {
	req := chatRequest(m, in.Request, msgs, in.Shape)
	if req.MaxTokens == 0 && a.cfg.Limits.DefaultMaxTokens > 0 {
		// No limit of the caller's or the policy's yet: the default,
		// within what the window leaves after the prompt (a server's
		// own default may be small enough to cut most answers).
		req.MaxTokens = defaultMaxTokens(a.cfg.Limits.DefaultMaxTokens, m.ContextWindow, in.Prompt.Tokens, a.cfg.Pruning.ReserveOutputTokens)
		if openai.NewReasoningValidator().Validate(req) != nil {
			req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0
		}
	}
	return req
}

// defaultMaxTokens is the max_tokens sent for a request that sets none:
// the policy's default, at most what the model's context window leaves
// after the prompt, and at least the output reserve the prompt's cut kept
// free.
func defaultMaxTokens(def, window, promptTokens, reserve int) int {
	if window > 0 && promptTokens > 0 && window-promptTokens < def {
		return max(window-promptTokens, min(reserve, def))
	}
	return def
}

// chatRequest is the upstream request of one attempt on model m: the
// request's fields (docs/agents.md), the attempt's messages and shape.
func chatRequest(m config.ModelConfig, r request.Request, msgs []request.Message, sh callstate.Shape) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: m.Name, MaxTokens: sh.MaxTokens}
	if sh.Temperature != nil {
		req.Temperature = float32(*sh.Temperature)
		if req.Temperature == 0 {
			// go-openai omits a zero temperature; this is its documented
			// way to send 0.
			req.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if r.NeedsTools() || (len(r.Tools) > 0 && m.Can(config.CapTools)) {
		req.Tools, req.ToolChoice = chatTools(r)
		if r.ParallelToolCalls != nil {
			req.ParallelToolCalls = *r.ParallelToolCalls
		}
	}
	if f := r.ResponseFormat; f != nil {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatType(f.Type)}
		if s := f.JSONSchema; s != nil {
			js := &openai.ChatCompletionResponseFormatJSONSchema{Name: s.Name, Description: s.Description, Schema: s.Schema}
			if s.Strict != nil {
				js.Strict = *s.Strict
			}
			req.ResponseFormat.JSONSchema = js
		}
	}
	req.Stop = r.Stop
	if r.Seed != nil {
		seed := int(*r.Seed)
		req.Seed = &seed
	}
	req.TopP, req.PresencePenalty, req.FrequencyPenalty = sampling(r.TopP), sampling(r.PresencePenalty), sampling(r.FrequencyPenalty)
	req.LogitBias, req.LogProbs, req.ReasoningEffort = r.LogitBias, r.Logprobs, r.ReasoningEffort
	if r.TopLogprobs != nil {
		req.TopLogProbs = *r.TopLogprobs
	}
	if openai.NewReasoningValidator().Validate(req) != nil {
		// Reasoning models take max_completion_tokens and a fixed
		// temperature: adapt rather than fail the attempt before sending.
		req.MaxCompletionTokens, req.MaxTokens, req.Temperature = req.MaxTokens, 0, 0
		// They take no logprobs and only the default sampling either
		// (go-openai refuses such a request before sending it).
		req.LogProbs, req.TopLogProbs, req.TopP, req.PresencePenalty, req.FrequencyPenalty = false, 0, 0, 0, 0
	}
	req.Messages = chatMessages(msgs)
	if sh.Repair != "" {
		// A repair: the model is told what was wrong with its last answer.
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: sh.Repair})
	}
	return req
}

// sampling is a sampling parameter as go-openai sends it: unset omitted,
// and 0 as the smallest float32 (go-openai omits a zero; its documented
// way to send 0).
func sampling(v *float64) float32 {
	if v == nil {
		return 0
	}
	if *v == 0 {
		return math.SmallestNonzeroFloat32
	}
	return float32(*v)
}

// chatTools are the tools of r and its tool choice in go-openai's types.
func chatTools(r request.Request) (tools []openai.Tool, choice any) {
	for _, t := range r.Tools {
		fd := &openai.FunctionDefinition{Name: t.Function.Name, Description: t.Function.Description}
		if len(t.Function.Parameters) > 0 {
			fd.Parameters = t.Function.Parameters
		}
		if t.Function.Strict != nil {
			fd.Strict = *t.Function.Strict
		}
		tools = append(tools, openai.Tool{Type: openai.ToolTypeFunction, Function: fd})
	}
	if c := r.ToolChoice; c != nil {
		if c.Function != "" {
			choice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: c.Function}}
		} else {
			choice = c.Mode
		}
	}
	return tools, choice
}

// chatMessages are msgs in go-openai's type, with room for a repair.
func chatMessages(msgs []request.Message) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, 0, len(msgs)+1)
	for _, m := range msgs {
		cm := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, p := range m.Parts {
			part := openai.ChatMessagePart{Type: openai.ChatMessagePartType(p.Type), Text: p.Text}
			if p.ImageURL != nil {
				part.ImageURL = &openai.ChatMessageImageURL{URL: p.ImageURL.URL, Detail: openai.ImageURLDetail(p.ImageURL.Detail)}
			}
			cm.MultiContent = append(cm.MultiContent, part)
		}
		if len(cm.MultiContent) > 0 {
			cm.Content = ""
		}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolType(tc.Type),
				Function: openai.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
			})
		}
		out = append(out, cm)
	}
	return out
}

// newExchange is the recorder of attempt in on m (httpclient.go), for the
// call's workflow: the request ID it sends (<workflow id>/<n>, "h" for a
// hedge), the resends it may make, the continuation style and passthrough
// fields it adds to the body.
func (a *Activities) newExchange(in CallInput, m config.ModelConfig, workflowID string) *exchange {
	ex := &exchange{requestID: fmt.Sprintf("%s/%d", workflowID, in.Attempt)}
	if in.Hedge {
		ex.requestID += "h"
	}
	budget := a.budgets.For(m.Capacity())
	ex.mayResend = func(n int) bool {
		// A resend is a request like any other: within the call's cap and
		// paid from the endpoint's budget, within the tenant's share.
		if n >= in.Resends {
			return false
		}
		ok, _ := budget.TryRetryFor(a.now(), in.Request.Tenant) // within the tenant's share
		return ok
	}
	if in.Continue != "" {
		ex.continuation = m.ContinuationStyle()
	}
	ex.extra = passthrough(m, in.Request)
	return ex
}

// passthrough are the request's passthrough fields that model m forwards.
func passthrough(m config.ModelConfig, r request.Request) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for _, f := range m.Passthrough {
		if v, ok := r.Passthrough[f]; ok {
			if out == nil {
				out = map[string]json.RawMessage{}
			}
			out[f] = v
		}
	}
	return out
}
