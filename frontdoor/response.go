package frontdoor

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/workflows"
)

// Resilience is the x_resilience object the front door adds to every
// completion, final stream chunk, call status and call error: how the
// durable call went. Go callers decode it from the raw JSON of a response.
type Resilience struct {
	// WorkflowID is the call's workflow ID (its idempotency key), also sent
	// as the X-Workflow-Id header.
	WorkflowID string `json:"workflow_id"`
	// Status is running, completed or failed.
	Status string `json:"status"`
	// Source says who answered: model, fallback_model, faq, rule,
	// placeholder or handoff (also the X-Resilience-Source header).
	Source string `json:"source,omitempty"`
	// Degraded is true when the preferred model did not answer.
	Degraded bool `json:"degraded"`
	// AttemptCount is len(Attempts).
	AttemptCount int `json:"attempt_count"`
	// Attempts lists every upstream attempt and the decision after it.
	Attempts []workflows.Attempt `json:"attempts"`
	// Classes are the failure classes met, in order, each once.
	Classes []string `json:"classes"`
	// Reason says why the answer is degraded, or why the call failed.
	Reason string `json:"reason,omitempty"`
	FAQID  string `json:"faq_id,omitempty"`
	RuleID string `json:"rule_id,omitempty"`
	Flag   string `json:"flag,omitempty"`
	// FailedAttemptTokens are the prompt tokens spent on failed attempts.
	FailedAttemptTokens int `json:"failed_attempt_tokens"`
	// DuplicatePromptTokens are the prompt tokens of requests sent again
	// within the hour (CallResult.Usage.DuplicatePromptTokens).
	DuplicatePromptTokens int `json:"duplicate_prompt_tokens,omitempty"`
	// Replaceable: a hedge's quick answer under hedge.replace; the first
	// model is still answering and GET /v1/calls/{id} gives the final
	// answer when the call completes. Replaced is the quick answer a final
	// answer replaced.
	Replaceable bool                   `json:"replaceable,omitempty"`
	Replaced    *workflows.QuickAnswer `json:"replaced,omitempty"`
	// Content, in a stream's last chunk only when Replaced is set, is the
	// whole answer that replaces the text streamed before it.
	Content string `json:"content,omitempty"`
	// Idempotency says which idempotency window applied to the request
	// this answers, and whether the answer is a replay; only on the
	// answer to a request that starts calls (not on a retrieve).
	Idempotency *Idempotency `json:"idempotency,omitempty"`
}

// Idempotency is the idempotency window that applied to a request (SPEC
// §6, docs/calling.md "Idempotency"): a duplicate of an earlier request,
// within the window of its key, gets the earlier call's answer.
type Idempotency struct {
	// Key is "derived" (from the tenant, user, session and request) or
	// "explicit" (the Idempotency-Key header).
	Key string `json:"key"`
	// Window is the policy field of the window that applied:
	// idempotency.replay_window for a derived key,
	// idempotency.key_window for an explicit one.
	Window string `json:"window"`
	// WindowMS is its length: how long after the call completed the same
	// request gets this answer again.
	WindowMS int64 `json:"window_ms"`
	// Replayed is true when the answer is a call's that an earlier
	// request started (still running, or completed within the window),
	// so this request sent nothing upstream; false when this request
	// started the call.
	Replayed bool `json:"replayed"`
}

// Key values of Idempotency.
const (
	KeyDerived  = "derived"
	KeyExplicit = "explicit"
)

// Status values of Resilience.
const (
	StatusRunning = "running"
	// StatusCanceling: DELETE /v1/calls/{id} asked the call to cancel.
	StatusCanceling = "canceling"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// answerStatus is the status of a call that gave res: running while a
// quick answer may still be replaced, else completed.
func answerStatus(res workflows.CallResult) string {
	if res.Replaceable {
		return StatusRunning
	}
	return StatusCompleted
}

// resilienceOf summarises a CallResult (final or so far).
func resilienceOf(id, status string, res workflows.CallResult) Resilience {
	r := Resilience{
		WorkflowID: id, Status: status, Source: string(res.Source), Degraded: res.Degraded,
		AttemptCount: len(res.Attempts), Attempts: res.Attempts, Classes: []string{},
		Reason: res.Reason, FAQID: res.FAQID, RuleID: res.RuleID, Flag: res.Flag,
		FailedAttemptTokens: res.Usage.FailedAttemptTokens, DuplicatePromptTokens: res.Usage.DuplicatePromptTokens,
		Replaceable: res.Replaceable, Replaced: res.Replaced,
	}
	if r.Attempts == nil {
		r.Attempts = []workflows.Attempt{}
	}
	for _, a := range res.Attempts {
		if a.Class == "" {
			continue
		}
		seen := false
		for _, c := range r.Classes {
			seen = seen || c == a.Class
		}
		if !seen {
			r.Classes = append(r.Classes, a.Class)
		}
	}
	return r
}

// completion is OpenAI's chat.completion object plus x_resilience.
type completion struct {
	ID         string     `json:"id"`
	Object     string     `json:"object"`
	Created    int64      `json:"created"`
	Model      string     `json:"model"`
	Choices    []choice   `json:"choices"`
	Usage      usage      `json:"usage"`
	Resilience Resilience `json:"x_resilience"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      message         `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type message struct {
	Role string `json:"role"`
	// Content is null for an answer that only calls tools.
	Content   *string          `json:"content"`
	Refusal   json.RawMessage  `json:"refusal"`
	ToolCalls []toolCallObject `json:"tool_calls,omitempty"`
}

// toolCallObject is a tool call of an answer; Index is set in a chunk's
// delta only.
type toolCallObject struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallsOf is the tool calls of res, with their index when indexed.
func toolCallsOf(res workflows.CallResult, indexed bool) []toolCallObject {
	var out []toolCallObject
	for i, c := range res.ToolCalls {
		o := toolCallObject{ID: c.ID, Type: c.Type}
		if o.Type == "" {
			o.Type = "function"
		}
		o.Function.Name, o.Function.Arguments = c.Function.Name, c.Function.Arguments
		if indexed {
			o.Index = &i
		}
		out = append(out, o)
	}
	return out
}

// logprobsOf is the answer's logprobs as the model sent them, else null.
func logprobsOf(res workflows.CallResult) json.RawMessage {
	if len(res.Logprobs) > 0 {
		return res.Logprobs
	}
	return jsonNull
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

var jsonNull = json.RawMessage("null")

// completionID is the OpenAI-style ID of a call's completion: the same for
// every request that reaches the same call.
func completionID(workflowID string) string { return "chatcmpl-" + workflowID }

// modelOf names who answered: the model, or for a fallback answer
// "durable-llm/<source>" so it is never taken for a model of the ladder.
func modelOf(res workflows.CallResult) string {
	if res.Model != "" {
		return res.Model
	}
	return "durable-llm/" + string(res.Source)
}

// finishReasonOf keeps OpenAI's finish reasons; a fallback answer stops.
func finishReasonOf(res workflows.CallResult) string {
	switch res.FinishReason {
	case "stop", "length", "content_filter", "tool_calls", "function_call":
		return res.FinishReason
	}
	return "stop"
}

func usageOf(res workflows.CallResult) usage {
	return usage{
		PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens,
		TotalTokens: res.Usage.PromptTokens + res.Usage.CompletionTokens,
	}
}

func newCompletion(id string, created time.Time, res workflows.CallResult) completion {
	return completion{
		ID: completionID(id), Object: "chat.completion", Created: created.Unix(), Model: modelOf(res),
		Choices: []choice{{
			Message:  messageOf(res),
			Logprobs: logprobsOf(res), FinishReason: finishReasonOf(res),
		}},
		Usage:      usageOf(res),
		Resilience: resilienceOf(id, answerStatus(res), res),
	}
}

// idempotencyOf is the window that applied to req, whose start found its
// call a duplicate's (replayed) or started it.
func (h *Handler) idempotencyOf(req workflows.CallRequest, replayed bool) *Idempotency {
	i := &Idempotency{Key: KeyDerived, Window: "idempotency.replay_window", Replayed: replayed}
	if req.IdempotencyKey != "" {
		i.Key, i.Window = KeyExplicit, "idempotency.key_window"
	}
	i.WindowMS = h.o.Client.Window(req).Milliseconds()
	return i
}

// messageOf is the assistant message of res: its content (null when it
// only calls tools) and tool calls.
func messageOf(res workflows.CallResult) message {
	m := message{Role: "assistant", Refusal: jsonNull, ToolCalls: toolCallsOf(res, false)}
	if res.Content != "" || len(m.ToolCalls) == 0 {
		content := res.Content
		m.Content = &content
	}
	return m
}

// chunk is OpenAI's chat.completion.chunk object.
type chunk struct {
	ID         string        `json:"id"`
	Object     string        `json:"object"`
	Created    int64         `json:"created"`
	Model      string        `json:"model"`
	Choices    []chunkChoice `json:"choices"`
	Usage      *usage        `json:"usage,omitempty"`
	Resilience *Resilience   `json:"x_resilience,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type delta struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	ToolCalls []toolCallObject `json:"tool_calls,omitempty"`
}

// chunkSize is the most bytes of answer text in one content chunk.
const chunkSize = 64

// splitContent cuts s into pieces of at most chunkSize bytes, at a space
// when one is near, never inside a UTF-8 sequence.
func splitContent(s string) []string {
	var out []string
	for len(s) > chunkSize {
		cut := chunkSize
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		for i := cut; i > chunkSize/2; i-- {
			if s[i-1] == ' ' || s[i-1] == '\n' {
				cut = i
				break
			}
		}
		if cut == 0 {
			cut = chunkSize
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// CallStatus is the body of a 202 answer: the call was accepted (POST with
// Prefer: respond-async) or is still running (GET /v1/calls/{id}). Poll URL
// until it answers 200 with the chat.completion.
type CallStatus struct {
	// ID is the workflow ID of the call.
	ID string `json:"id"`
	// Object is "chat.completion.call".
	Object string `json:"object"`
	// Status is "running" (or "canceling", the answer to DELETE).
	Status string `json:"status"`
	// URL to GET for the result, relative to the front door's root.
	URL string `json:"url"`
	// Resilience is the state of the call so far (its attempts and
	// failure classes, from its search attributes), when known.
	Resilience *Resilience `json:"x_resilience,omitempty"`
}

// callURL is the path that returns a call's result.
func callURL(id string) string { return "/v1/calls/" + id }

// apiError is an error answer in OpenAI's shape.
type apiError struct {
	status     int
	message    string
	typ        string
	param      string
	code       string
	retryAfter time.Duration
	resilience *Resilience
}

// Error types of OpenAI's error bodies.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuth           = "authentication_error"
	typeNotFound       = "not_found_error"
	typeServer         = "server_error"
	typeUnavailable    = "service_unavailable_error"
)

type errorBody struct {
	Error      errorObject `json:"error"`
	Resilience *Resilience `json:"x_resilience,omitempty"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.message, Type: e.typ}, Resilience: e.resilience}
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

func (e *apiError) write(w http.ResponseWriter) {
	noteCode(w, e.code)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="durable-llm"`)
	}
	writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"cannot encode the answer","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
