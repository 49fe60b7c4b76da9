package frontdoor

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/workflows"
)

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

// writeCompletion answers a finished call with its chat.completion.
func writeCompletion(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	w.Header().Set(HeaderWorkflowID, id)
	w.Header().Set(HeaderSource, string(res.Source))
	w.Header().Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
	c := newCompletion(id, created, res)
	c.Resilience.Idempotency = idem
	writeJSON(w, http.StatusOK, c)
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

// chatFormat streams chat.completion.chunk events.
type chatFormat struct {
	sw           *sseWriter
	includeUsage bool
}

func (f chatFormat) chunk(model string, d delta, finish *string) chunk {
	return chunk{ID: f.sw.id, Object: "chat.completion.chunk", Created: f.sw.created, Model: model,
		Choices: []chunkChoice{{Delta: d, Logprobs: jsonNull, FinishReason: finish}}}
}

// start sends the first chunk: the assistant role and empty content.
func (f chatFormat) start(model string) {
	empty := ""
	_ = f.sw.data(f.chunk(model, delta{Role: "assistant", Content: &empty}, nil))
}

func (f chatFormat) text(at resumePoint, model, piece string) {
	_ = f.sw.dataID(at.id(), f.chunk(model, delta{Content: &piece}, nil))
}

// end sends the tool calls, the final chunk (finish_reason and
// x_resilience), the usage chunk when asked for, and [DONE].
func (f chatFormat) end(id string, res workflows.CallResult) {
	model := modelOf(res)
	if calls := toolCallsOf(res, true); len(calls) > 0 {
		// Tool calls come whole, once checked: one chunk.
		_ = f.sw.data(f.chunk(model, delta{ToolCalls: calls}, nil))
	}
	finish := finishReasonOf(res)
	last := f.chunk(model, delta{}, &finish)
	rs := resilienceOf(id, answerStatus(res), res)
	if res.Replaced != nil {
		rs.Content = res.Content
	}
	rs.Idempotency = f.sw.idem
	last.Resilience = &rs
	_ = f.sw.data(last)
	if f.includeUsage {
		u := usageOf(res)
		_ = f.sw.data(chunk{ID: f.sw.id, Object: "chat.completion.chunk", Created: f.sw.created, Model: model,
			Choices: []chunkChoice{}, Usage: &u})
	}
	_ = f.sw.raw("data: [DONE]\n\n")
}

// fail sends a failure after the 200 was committed, as OpenAI does: an
// event whose data is the error body, and no [DONE].
func (f chatFormat) fail(e *apiError) { _ = f.sw.data(e.body()) }
