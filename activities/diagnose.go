package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// DiagnoseInput is an attempt's failure that no classifier rule
// recognised: the class its status gave, and what the error body said.
type DiagnoseInput struct {
	Attempt int           `json:"attempt"`
	Class   failure.Class `json:"class"`
	Status  int           `json:"status,omitempty"`
	Code    string        `json:"code,omitempty"`
	Type    string        `json:"type,omitempty"`
	Message string        `json:"message,omitempty"`
}

// Diagnosis is the small model's verdict. Class is empty when it named
// none of the known classes (or was not asked: Reason says why).
type Diagnosis struct {
	Class  failure.Class `json:"class,omitempty"`
	Reason string        `json:"reason"`
	Model  string        `json:"model,omitempty"`
}

// diagnosable are the classes a diagnosis may name: the upstream's
// transient conditions an error body can tell. Never a class that fails
// the call, trips a breaker or leaves the ladder (invalid_request, auth,
// content_filter, model_not_found): a small model's guess must not turn
// a retryable 5xx into a failed call.
var diagnosable = []failure.Class{
	failure.RateLimited, failure.QueueFull, failure.ServiceUnavailable, failure.ServerError,
	failure.Timeout, failure.ContextLengthExceeded,
}

// diagnosisExamples are the few shots: an error body and its class.
var diagnosisExamples = []struct{ body, class, reason string }{
	{`HTTP 500; message: "Too many requests in flight for this deployment, slow down"`, "rate_limited", "asks the client to send fewer requests"},
	{`HTTP 502; code: "E_BACKEND"; message: "all inference replicas are busy, request dropped"`, "queue_full", "no replica had room for the request"},
	{`HTTP 500; code: "prompt_too_large"; message: "input of 40212 tokens is larger than the 32768 this model accepts"`, "context_length_exceeded", "the input is over the model's window"},
	{`HTTP 500; message: "panic: nil pointer dereference in sampler"`, "server_error", "a crash of the server"},
}

// Diagnose asks the policy's diagnosis model to name the class of an
// error body no classifier rule recognised (docs/how-it-works.md "Diagnosis"). The
// answer must be one of the known classes (a JSON schema with their
// names); the request is paid from the model's endpoint budget, and a
// diagnosis that cannot be made leaves the attempt's class as it was.
func (a *Activities) Diagnose(ctx context.Context, in DiagnoseInput) (Diagnosis, error) {
	d := a.cfg.Diagnose
	m, ok := a.cfg.Model(d.Model)
	if !ok {
		return Diagnosis{Reason: fmt.Sprintf("no diagnosis: model %q is not in the ladder", d.Model)}, nil
	}
	now := a.now()
	key, ok := a.pickKey(m, now)
	switch {
	case !ok:
		return a.diagnosed(Diagnosis{Reason: "no diagnosis: every key of " + m.Name + " is parked"}, "refused"), nil
	case !a.breakers.Admit(m.Name, now):
		return a.diagnosed(Diagnosis{Reason: "no diagnosis: the breaker of " + m.Name + " is open"}, "refused"), nil
	case !a.budgets.For(m.WithKey(key).Capacity()).TryRetry(now):
		// The budget of where it goes: the key's deployment, if any.
		return a.diagnosed(Diagnosis{Reason: "no diagnosis: the retry budget of " + m.WithKey(key).EndpointLabel() + " is spent"}, "refused"), nil
	}
	m = m.WithKey(key)

	names := make([]string, len(diagnosable))
	for i, c := range diagnosable {
		names[i] = string(c)
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"class", "reason"},
		"properties": map[string]any{
			"class":  map[string]any{"type": "string", "enum": names},
			"reason": map[string]any{"type": "string"},
		},
	})
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "You read error responses of LLM APIs and name their failure class, one of: " +
		strings.Join(names, ", ") + `. Answer with JSON: {"class": …, "reason": "a few words"}.`}}
	for _, ex := range diagnosisExamples {
		msgs = append(msgs,
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: ex.body},
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: fmt.Sprintf(`{"class":%q,"reason":%q}`, ex.class, ex.reason)})
	}
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: in.describe()})
	req := openai.ChatCompletionRequest{
		Model: m.Name, Messages: msgs, MaxTokens: d.MaxTokens, Temperature: 1e-45,
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "failure_class", Schema: json.RawMessage(schema), Strict: true}},
	}
	info := activity.GetInfo(ctx)
	cctx, cancel := context.WithTimeout(withExchange(ctx, &exchange{requestID: fmt.Sprintf("%s/%dd", info.WorkflowExecution.ID, in.Attempt)}), min(m.Timeout.D(), 30*time.Second))
	defer cancel()
	resp, err := a.client(m).create(cctx, req)
	if err != nil {
		// The error's text (an address, what the upstream said) is for
		// operators: tenants read the reason.
		activity.GetLogger(ctx).Warn("diagnosis request failed", "model", m.Name, "error", redactString(oneLine(err.Error()), a.apiKey(m)))
		return a.diagnosed(Diagnosis{Model: m.Name, Reason: "no diagnosis: the request to " + m.Name + " failed"}, "error"), nil
	}
	var got struct {
		Class  string `json:"class"`
		Reason string `json:"reason"`
	}
	text := ""
	if len(resp.Choices) > 0 {
		text = resp.Choices[0].Message.Content
	}
	if json.Unmarshal([]byte(text), &got) != nil {
		// An answer cut at max_tokens still names its class first.
		if m := classFieldRE.FindStringSubmatch(text); m != nil {
			got.Class, got.Reason = m[1], "(its reason was cut at max_tokens)"
		}
	}
	if !slices.Contains(diagnosable, failure.Class(got.Class)) {
		return a.diagnosed(Diagnosis{Model: m.Name, Reason: fmt.Sprintf("no diagnosis: %s named none of the known classes", m.Name)}, "invalid"), nil
	}
	return a.diagnosed(Diagnosis{Class: failure.Class(got.Class), Model: m.Name, Reason: oneLine(got.Reason)}, "named"), nil
}

func (in DiagnoseInput) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", in.Status)
	if in.Code != "" {
		fmt.Fprintf(&b, "; code: %q", in.Code)
	}
	if in.Type != "" {
		fmt.Fprintf(&b, "; type: %q", in.Type)
	}
	if in.Message != "" {
		fmt.Fprintf(&b, "; message: %q", in.Message)
	}
	return b.String()
}

// classFieldRE finds the class in a JSON answer cut short.
var classFieldRE = regexp.MustCompile(`^\s*\{\s*"class"\s*:\s*"([a-z_]+)"`)

// oneLine bounds a model's or an error's text for a reason.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// DiagnosisMetrics is implemented by a Metrics that counts diagnoses by
// the class named (or "") and outcome: named, invalid, error, refused.
type DiagnosisMetrics interface {
	Diagnosis(class, outcome string)
}

func (a *Activities) diagnosed(d Diagnosis, outcome string) Diagnosis {
	if dm, ok := a.metrics.(DiagnosisMetrics); ok {
		dm.Diagnosis(string(d.Class), outcome)
	}
	return d
}
