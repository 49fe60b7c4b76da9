package frontdoor

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Anthropic's Messages API (POST /v1/messages), for Anthropic's SDKs, the
// Claude Agent SDK and any tool pointed at the door with
// ANTHROPIC_BASE_URL: the same durable call as chat completions
// (serveCall), its request read from Anthropic's shape and its answer,
// stream and errors written in it (docs/calling.md "Calling from
// Anthropic's SDKs"). A message is its call, msg_<workflow ID>.

// messagesAPI is POST /v1/messages.
type messagesAPI struct{}

func (messagesAPI) decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	return decodeMessagesRequest(body, passthrough)
}

func (a messagesAPI) decodeCall(h *Handler, r *http.Request, tenant string, body []byte) (call, *apiError) {
	cr, ferr := decodeText(body, h.passthrough, a.decode)
	if ferr != nil {
		return call{}, invalidBody(ferr)
	}
	return h.newCall(r, tenant, cr, nil)
}

func (messagesAPI) write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	m := newMessageObject(id, res)
	rs := resilienceOf(id, answerStatus(res), res)
	rs.Idempotency = idem
	m.Resilience = &rs
	writeJSON(w, http.StatusOK, m)
}

func (messagesAPI) stream(sw *sseWriter, c call) streamFormat {
	return &messagesFormat{sw: sw, wid: strings.TrimPrefix(sw.id, messageIDPrefix), resumed: c.resume.set}
}

func (messagesAPI) objectID(id string) string { return messageID(id) }

// createMessage serves POST /v1/messages.
func (h *Handler) createMessage(w http.ResponseWriter, r *http.Request, tenant string) {
	h.serveCall(w, r, tenant, messagesAPI{})
}

// countTokens serves POST /v1/messages/count_tokens: the prompt tokens of
// a Messages API body (max_tokens not required), counted as the worker
// counts them when it fits a prompt to a model's window (the policy's
// pruning.encoding) plus the tools' definitions. It starts no call; it
// takes one of the tenant's requests and its validation time.
func (h *Handler) countTokens(w http.ResponseWriter, r *http.Request, tenant string) {
	adm, apiErr := h.admit(w, tenant)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	defer h.leave(adm, r)
	body, apiErr := h.readBody(w, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	// Counting is validation work: in the tenant's turn and on its
	// validation budget, as a call's decoding is (Handler.decode).
	end, ref, err := adm.slot.Validate(r.Context(), h.o.Now)
	if err != nil {
		return // the client left
	}
	defer end()
	if ref != nil {
		closeEarly(w)
		rateLimited(ref).write(w)
		return
	}
	cr, ferr := decodeText(body, h.passthrough, func(b []byte, pt map[string]bool) (chatRequest, *fieldError) {
		return decodeMessages(b, pt, false) // max_tokens is not required here
	})
	if ferr != nil {
		invalidBody(ferr).write(w)
		return
	}
	if cr.Model != AutoModel && !slices.Contains(h.models, cr.Model) {
		unknownModel(cr.Model, h.models).write(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": h.countPrompt(cr)})
}

// countPrompt is the tokens of cr's messages and tool definitions by the
// policy's encoding (an estimate when the encoding cannot be loaded).
func (h *Handler) countPrompt(cr chatRequest) int {
	tc := h.tokens() // nil (an encoding that cannot be loaded): Count estimates
	n := tc.CountMessages(cr.Messages)
	for _, t := range cr.Agent.Tools {
		n += tc.Count(t.Function.Name) + tc.Count(t.Function.Description) + tc.Count(string(t.Function.Parameters))
	}
	return n
}

// messageIDPrefix starts every message ID: msg_<workflow ID>.
const messageIDPrefix = "msg_"

// messageID is the id of a call's message object.
func messageID(workflowID string) string { return messageIDPrefix + workflowID }

// messageObject is the Messages API's message object plus x_resilience.
type messageObject struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []contentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        messageUsage   `json:"usage"`
	Resilience   *Resilience    `json:"x_resilience,omitempty"`
}

// contentBlock is a text or tool_use block of an answer.
type contentBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type messageUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// newMessageObject is the message of a finished call id.
func newMessageObject(id string, res workflows.CallResult) messageObject {
	stop := stopReasonOf(res)
	m := messageObject{ID: messageID(id), Type: "message", Role: request.RoleAssistant, Model: modelOf(res),
		Content: []contentBlock{}, StopReason: &stop,
		Usage: messageUsage{InputTokens: res.Usage.PromptTokens, OutputTokens: res.Usage.CompletionTokens}}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		text := res.Content
		m.Content = append(m.Content, contentBlock{Type: "text", Text: &text})
	}
	for _, c := range res.ToolCalls {
		m.Content = append(m.Content, toolUseBlock(c, true))
	}
	return m
}

// toolUseBlock is a tool call as a tool_use block: with its input, or
// with an empty one (withInput false: a stream sends it as deltas).
func toolUseBlock(c request.ToolCall, withInput bool) contentBlock {
	b := contentBlock{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: json.RawMessage("{}")}
	if withInput && json.Valid([]byte(c.Function.Arguments)) && strings.HasPrefix(strings.TrimSpace(c.Function.Arguments), "{") {
		b.Input = json.RawMessage(c.Function.Arguments)
	}
	return b
}

// stopReasonOf is the Messages API's stop_reason of a finished call. An
// OpenAI-compatible upstream does not say whether it stopped at the end
// of its turn or at a stop sequence: both read end_turn.
func stopReasonOf(res workflows.CallResult) string {
	switch finishReasonOf(res) {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// messagesFormat streams a message in Anthropic's events: message_start
// and a ping, the text block (content_block_start, text_delta deltas, each
// with the SSE id a reconnect resumes from, content_block_stop), one
// tool_use block per tool call (its input as one input_json_delta),
// message_delta (stop_reason, usage) and message_stop; after the 200 was
// committed, a failure is an error event.
type messagesFormat struct {
	sw       *sseWriter
	wid      string
	resumed  bool // a reconnect (Last-Event-ID): the client has the text up to its point
	textOpen bool
	received bool // a text delta was sent
	blocks   int  // content blocks opened
}

func (f *messagesFormat) event(id, typ string, fields map[string]any) {
	_ = f.sw.typed(id, typ, fields)
}

func (f *messagesFormat) start(model string) {
	m := messageObject{ID: messageID(f.wid), Type: "message", Role: request.RoleAssistant, Model: model, Content: []contentBlock{}}
	f.event("", "message_start", map[string]any{"message": m})
	f.event("", "ping", map[string]any{})
}

// openText starts the text block, once.
func (f *messagesFormat) openText() {
	if f.textOpen {
		return
	}
	f.textOpen = true
	empty := ""
	f.event("", "content_block_start", map[string]any{"index": f.blocks, "content_block": contentBlock{Type: "text", Text: &empty}})
	f.blocks++
}

func (f *messagesFormat) text(at resumePoint, _, piece string) {
	f.openText()
	f.received = true
	f.event(at.id(), "content_block_delta", map[string]any{"index": 0, "delta": map[string]string{"type": "text_delta", "text": piece}})
}

func (f *messagesFormat) end(id string, res workflows.CallResult) {
	if !f.received && !f.resumed && (res.Content != "" || len(res.ToolCalls) == 0) {
		f.openText() // no delta came: the answer is the result's
		if res.Content != "" {
			f.event("", "content_block_delta", map[string]any{"index": 0, "delta": map[string]string{"type": "text_delta", "text": res.Content}})
		}
	}
	if f.textOpen || (f.resumed && (res.Content != "" || len(res.ToolCalls) == 0)) {
		f.event("", "content_block_stop", map[string]any{"index": 0})
		f.blocks = max(f.blocks, 1)
	}
	for _, c := range res.ToolCalls {
		i := f.blocks
		f.blocks++
		f.event("", "content_block_start", map[string]any{"index": i, "content_block": toolUseBlock(c, false)})
		f.event("", "content_block_delta", map[string]any{"index": i, "delta": map[string]string{"type": "input_json_delta", "partial_json": c.Function.Arguments}})
		f.event("", "content_block_stop", map[string]any{"index": i})
	}
	rs := resilienceOf(id, answerStatus(res), res)
	if res.Replaced != nil {
		rs.Content = res.Content
	}
	rs.Idempotency = f.sw.idem
	f.event("", "message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stopReasonOf(res), "stop_sequence": nil},
		"usage": messageUsage{InputTokens: res.Usage.PromptTokens, OutputTokens: res.Usage.CompletionTokens}, "x_resilience": rs})
	f.event("", "message_stop", map[string]any{})
}

func (f *messagesFormat) fail(e *apiError) {
	_, typ := e.anthropicType()
	f.event("", "error", map[string]any{"error": map[string]string{"type": typ, "message": e.message}})
}
