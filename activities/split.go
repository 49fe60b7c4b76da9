package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	promptpkg "github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
)

// SplitInput asks for the three smaller questions of a step-by-step
// answer (docs/rules.md): the call's question and its tenant,
// whose share of the retry budget pays for the model's request.
type SplitInput struct {
	Question string `json:"question"`
	Tenant   string `json:"tenant,omitempty"`
	// RuleID is the rule that chose step-by-step mode: not read here, it
	// names the rule in the activity's input in history, for the operator.
	RuleID string `json:"rule_id"`
}

// Split is the three smaller questions, who wrote them (a model's name,
// or "rule") and, when the rule did, why the model did not.
type Split struct {
	Questions []string `json:"questions"`
	By        string   `json:"by"`
	Reason    string   `json:"reason,omitempty"`
	// Model is the model asked (also when its answer was not used), and
	// PromptTokens and CompletionTokens what its request billed.
	Model            string `json:"model,omitempty"`
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
}

// SplitRule is Split.By when the questions were cut by rule, not a model.
const SplitRule = "rule"

// splitSteps is how many smaller questions a step-by-step answer has.
const splitSteps = 3

// maxSplitQuestion bounds the question a step carries (runes): the steps
// must fit where the whole call did not.
const maxSplitQuestion = 2000

// splitPrompt is the fixed instruction of the model that splits.
const splitPrompt = "You help a student. Split the question into exactly three smaller questions that, answered in order, " +
	"answer it: first what is asked and given, then the method, then the working to the final answer. " +
	`Write each so it can be answered alone, in the question's language. Answer with JSON: {"steps": ["…", "…", "…"]}.`

// SplitQuestion asks the smallest rung of the ladder (its last model) to
// split a question into three smaller ones with a fixed prompt, bounded
// to 256 tokens and paid from its endpoint's retry budget within the
// tenant's share. When no model can (breaker open, budget spent, an error,
// an answer that is not three distinct questions) the question is cut by
// rule: its sentences in three groups, else three questions about it
// (what is asked, the method, the working), in its language.
func (a *Activities) SplitQuestion(ctx context.Context, in SplitInput) (Split, error) {
	q := boundQuestion(in.Question)
	sp := a.splitByModel(ctx, q, in.Tenant)
	if sp.Questions == nil {
		sp.Questions, sp.By = SplitByRule(q), SplitRule
	}
	return sp, nil
}

// boundQuestion is q trimmed and cut to maxSplitQuestion runes.
func boundQuestion(q string) string {
	q = strings.TrimSpace(q)
	if utf8.RuneCountInString(q) > maxSplitQuestion {
		q = string([]rune(q)[:maxSplitQuestion]) + "…"
	}
	return q
}

// splitByModel returns the model's three questions and its name, or no
// questions and why not; with the tokens its request billed.
func (a *Activities) splitByModel(ctx context.Context, q, tenant string) Split {
	schema, _ := json.Marshal(map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"steps"},
		"properties": map[string]any{"steps": map[string]any{
			"type": "array", "minItems": splitSteps, "maxItems": splitSteps, "items": map[string]any{"type": "string"},
		}},
	})
	m := a.cfg.Models[len(a.cfg.Models)-1]
	resp, m, why := a.sideRequest(ctx, m, tenant, "split", min(m.Timeout.D(), 20*time.Second), openai.ChatCompletionRequest{
		MaxTokens: 256, Temperature: 1e-45,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: splitPrompt},
			{Role: openai.ChatMessageRoleUser, Content: q},
		},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "steps", Schema: json.RawMessage(schema), Strict: true}},
	})
	if why != "" {
		return Split{Reason: why}
	}
	billed := Split{Model: m.Name, PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
	text := answerText(resp)
	var got struct {
		Steps []string `json:"steps"`
	}
	_ = json.Unmarshal([]byte(text), &got)
	seen := map[string]bool{}
	var qs []string
	for _, s := range got.Steps {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		qs = append(qs, s)
	}
	if len(qs) != splitSteps {
		billed.Reason = fmt.Sprintf("%s did not answer %d distinct questions (it gave %d)", m.Name, splitSteps, len(qs))
		return billed
	}
	billed.Questions, billed.By = qs, m.Name
	return billed
}

// sentenceEnd finds the sentences of a question: each ends at 。？！；?!;
// or a line break, or at a full stop followed by a space (not 3.5).
var sentenceEnd = regexp.MustCompile(`[^。？！；?!;\n]+?(?:[。？！；?!;\n]+|\.\s+|\.$|$)`)

// SplitByRule cuts q into three questions: its sentences in three groups
// of about equal length when it has three or more, else three questions
// about the whole of it.
func SplitByRule(q string) []string {
	var parts []string
	for _, s := range sentenceEnd.FindAllString(q, -1) {
		if s = strings.TrimSpace(s); utf8.RuneCountInString(s) >= 4 {
			parts = append(parts, s)
		}
	}
	if len(parts) >= splitSteps {
		total := 0
		for _, p := range parts {
			total += utf8.RuneCountInString(p)
		}
		out := make([]string, 0, splitSteps)
		var cur []string
		acc := 0
		for i, p := range parts {
			cur = append(cur, p)
			acc += utf8.RuneCountInString(p)
			left := len(parts) - i - 1
			need := splitSteps - len(out) - 1 // groups still to fill after this one
			if need > 0 && (acc*splitSteps >= total*(len(out)+1) || left == need) {
				out = append(out, strings.Join(cur, " "))
				cur = nil
			}
		}
		return append(out, strings.Join(cur, " "))
	}
	if promptpkg.MostlyChinese(q) {
		return []string{
			"这道题问的是什么？已知条件有哪些？题目：" + q,
			"解这道题要用什么方法、规则或公式？题目：" + q,
			"请一步一步算出最终答案。题目：" + q,
		}
	}
	return []string{
		"What does this question ask, and what is given? Question: " + q,
		"Which method, rule or formula solves it? Question: " + q,
		"Work it through to the final answer, step by step. Question: " + q,
	}
}

// StepMessages are the messages of a step's child call: the request's
// system messages, then the step's question; a step cut from the question
// (its sentences, which may not stand alone) carries the whole question
// after it, bounded, for context.
func StepMessages(req request.Request, whole, step string) []request.Message {
	var out []request.Message
	for _, m := range req.Messages {
		if m.Instructs() {
			out = append(out, m)
		}
	}
	content := step
	if whole = boundQuestion(whole); whole != "" && !strings.Contains(step, whole) {
		if promptpkg.MostlyChinese(whole) {
			content = step + "\n\n（完整题目，供参考：" + whole + "）"
		} else {
			content = step + "\n\n(The whole question, for context: " + whole + ")"
		}
	}
	return append(out, request.Message{Role: request.RoleUser, Content: content})
}
