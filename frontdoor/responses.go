package frontdoor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// The Responses API (POST /v1/responses), the default API of OpenAI's
// Agents SDK, for its stateless subset: input items (messages with text
// and images, function calls and their outputs), instructions, function
// tools, structured outputs (text.format), streaming events. It maps onto
// the same LLMCall as chat completions. previous_response_id continues a
// stored response (stored.go).

// responsesHandled are the request fields decodeResponsesRequest reads.
var responsesHandled = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
	"text", "max_output_tokens", "temperature", "top_p", "stream", "user", "reasoning", "top_logprobs",
	"previous_response_id", "truncation", "stream_options", "background", "store"}

// responsesIgnored are Responses API fields that do not change the answer.
var responsesIgnored = []string{"metadata", "service_tier", "prompt_cache_key", "safety_identifier", "include"}

// responsesUnsupported explains Responses API fields the front door refuses.
var responsesUnsupported = map[string]string{
	"conversation":   "stored conversations are not supported: send the conversation as input",
	"prompt":         "stored prompts are not supported: send instructions and input",
	"max_tool_calls": "not supported",
}

// responsesAPI is POST /v1/responses. When bg is set, decode reports
// there whether the request asked for a background response.
type responsesAPI struct {
	bg *bool
}

func (a responsesAPI) decode(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	cr, bg, err := decodeResponsesBody(body, passthrough)
	if a.bg != nil {
		*a.bg = bg
	}
	return cr, err
}
func (responsesAPI) write(w http.ResponseWriter, id string, created time.Time, res workflows.CallResult, idem *Idempotency) {
	o := newResponseObject(id, created, res, "completed")
	o.Resilience.Idempotency = idem
	writeJSON(w, http.StatusOK, o)
}
func (a responsesAPI) stream(sw *sseWriter, cr chatRequest, resume resumePoint) streamFormat {
	// A client that reconnects (Last-Event-ID) has the two events that
	// open the stream, and the text up to the byte its id names.
	after := -1
	if resume.set {
		after = seqInProgress
	}
	return newResponsesFormat(sw, a.bg != nil && *a.bg, after, resume.bytes)
}
func (responsesAPI) objectID(id string) string { return responseID(id) }

// responses serves POST /v1/responses (background.go).
func (h *Handler) responses(w http.ResponseWriter, r *http.Request, tenant string) {
	h.serveResponses(w, r, tenant)
}

// responseIDPrefix starts every response ID: resp_<workflow ID>.
const responseIDPrefix = "resp_"

// responseID is the id of a call's response object.
func responseID(workflowID string) string { return responseIDPrefix + workflowID }

// decodeResponsesRequest decodes a Responses API body into the chat
// request it asks for, naming the field of every problem as the client
// sent it (input[2].content[0].image_url, text.format, …).
func decodeResponsesRequest(body []byte, passthrough map[string]bool) (chatRequest, *fieldError) {
	cr, _, err := decodeResponsesBody(body, passthrough)
	return cr, err
}

// decodeResponsesBody is decodeResponsesRequest, which also says whether
// the request asks for a background response.
func decodeResponsesBody(body []byte, passthrough map[string]bool) (chatRequest, bool, *fieldError) {
	var req chatRequest
	top, ferr := decodeTop(body)
	if ferr != nil {
		return req, false, ferr
	}
	if err := sortFields(top, fieldSet{responsesHandled, responsesIgnored, responsesUnsupported}, passthrough, &req.Agent); err != nil {
		return req, false, err
	}
	var background, store *bool
	if err := decodeField(top, "background", &background, "a boolean"); err != nil {
		return req, false, err
	}
	if err := decodeField(top, "store", &store, "a boolean"); err != nil {
		return req, false, err
	}
	bg := background != nil && *background
	if bg && store != nil && !*store {
		// As OpenAI answers it: a background response is retrieved later.
		return req, false, &fieldError{"store", "background responses must be stored (want store: true or no store with background: true)"}
	}
	req.Agent.NoStore = store != nil && !*store
	req, err := decodeResponsesFields(top, req)
	return req, bg, err
}

// decodeResponsesFields decodes the fields of a Responses API body but
// background and store into req.
func decodeResponsesFields(top map[string]json.RawMessage, req chatRequest) (chatRequest, *fieldError) {
	var prev *string
	if err := decodeField(top, "previous_response_id", &prev, "a string"); err != nil {
		return req, err
	}
	if prev != nil {
		req.prev = *prev
	}
	var truncation *string
	if err := decodeField(top, "truncation", &truncation, "a string"); err != nil {
		return req, err
	}
	if truncation != nil && *truncation != "disabled" {
		return req, &fieldError{"truncation", fmt.Sprintf("%q is not supported (want \"disabled\"; the call prunes the context itself when a model's window is exceeded)", *truncation)}
	}
	for _, f := range []struct {
		name, want string
		dst        any
	}{
		{"model", "a string", &req.Model}, {"user", "a string", &req.User},
		{"temperature", "a number", &req.Temperature}, {"top_p", "a number", &req.Agent.TopP},
		{"parallel_tool_calls", "a boolean", &req.Agent.ParallelToolCalls},
		{"top_logprobs", "an integer", &req.Agent.TopLogprobs},
	} {
		if raw, ok := top[f.name]; ok && isNull(raw) {
			continue
		}
		if err := decodeField(top, f.name, f.dst, f.want); err != nil {
			return req, err
		}
	}
	if req.Agent.TopLogprobs != nil {
		req.Agent.Logprobs = true
	}
	var stream *bool
	if err := decodeField(top, "stream", &stream, "a boolean"); err != nil {
		return req, err
	}
	req.Stream = stream != nil && *stream
	var maxOut *int
	if err := decodeField(top, "max_output_tokens", &maxOut, "an integer"); err != nil {
		return req, err
	}
	if maxOut != nil {
		req.MaxTokens, req.maxTokensBy = *maxOut, "max_output_tokens"
	}
	var reasoning map[string]json.RawMessage
	if err := decodeField(top, "reasoning", &reasoning, "an object {effort}"); err != nil {
		return req, err
	}
	if err := decodeString(reasoning, "effort", &req.Agent.ReasoningEffort); err != nil {
		err.field = "reasoning." + err.field
		return req, err
	}
	if err := decodeResponseTools(top, &req.Agent); err != nil {
		return req, err
	}
	if err := decodeTextFormat(top, &req.Agent); err != nil {
		return req, err
	}

	var paths []string // the input path of each message
	var instructions string
	if err := decodeString(top, "instructions", &instructions); err != nil {
		return req, err
	}
	if instructions != "" {
		req.Messages = append(req.Messages, request.Message{Role: request.RoleSystem, Content: instructions})
		paths = append(paths, "instructions")
	}
	raw, ok := top["input"]
	if !ok || isNull(raw) {
		return req, &fieldError{"input", "missing (want a string or an array of input items)"}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		req.Messages = append(req.Messages, request.Message{Role: request.RoleUser, Content: s})
		paths = append(paths, "input")
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return req, &fieldError{"input", "want a string or an array of input items"}
		}
		for i, it := range items {
			at := fmt.Sprintf("input[%d]", i)
			if err := decodeInputItem(it, at, &req.Messages, &paths); err != nil {
				return req, err
			}
		}
	}
	req.fieldOf = func(field string) string { return responsesField(field, paths) }
	return req, nil
}

// responsesField names a CallRequest field as the Responses API spells it.
func responsesField(field string, paths []string) string {
	if rest, ok := strings.CutPrefix(field, "messages["); ok {
		if n, tail, ok := strings.Cut(rest, "]"); ok {
			if i, err := strconv.Atoi(n); err == nil && i < len(paths) {
				return paths[i] + tail
			}
		}
		return "input"
	}
	switch {
	case field == "messages":
		return "input"
	case field == "max_tokens":
		return "max_output_tokens"
	case field == "reasoning_effort":
		return "reasoning.effort"
	case strings.HasPrefix(field, "response_format"):
		return "text.format"
	case strings.HasPrefix(field, "tools["):
		return strings.Replace(field, ".function.", ".", 1)
	}
	return field
}

// decodeTop decodes a body into its top-level fields.
func decodeTop(body []byte) (map[string]json.RawMessage, *fieldError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, &fieldError{problem: "the request body is empty (want a JSON object)"}
		}
		return nil, &fieldError{problem: "malformed JSON: want a JSON object"}
	}
	return top, nil
}

// decodeResponseTools reads function tools ({type, name, description,
// parameters, strict}) and tool_choice.
func decodeResponseTools(top map[string]json.RawMessage, r *request.Request) *fieldError {
	if raw, ok := top["tools"]; ok && !isNull(raw) {
		var tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		if err := json.Unmarshal(raw, &tools); err != nil {
			return &fieldError{"tools", "want an array of {type: \"function\", name, description, parameters, strict}"}
		}
		r.Tools = []request.Tool{}
		for i, t := range tools {
			if t.Type != "function" {
				return &fieldError{fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("%q tools are not supported (want \"function\")", t.Type)}
			}
			r.Tools = append(r.Tools, request.Tool{Type: "function", Function: request.FunctionTool{
				Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
		}
	}
	if raw, ok := top["tool_choice"]; ok && !isNull(raw) {
		var mode string
		if json.Unmarshal(raw, &mode) == nil {
			r.ToolChoice = &request.ToolChoice{Mode: mode}
			return nil
		}
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
			return &fieldError{"tool_choice", "want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": …}"}
		}
		r.ToolChoice = &request.ToolChoice{Function: named.Name}
	}
	return nil
}

// decodeTextFormat reads text.format into response_format.
func decodeTextFormat(top map[string]json.RawMessage, r *request.Request) *fieldError {
	var text map[string]json.RawMessage
	if err := decodeField(top, "text", &text, "an object {format}"); err != nil {
		return err
	}
	raw, ok := text["format"]
	if !ok || isNull(raw) {
		return nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return &fieldError{"text.format", "want an object {type, name, schema, strict}"}
	}
	r.ResponseFormat = &request.ResponseFormat{Type: f.Type}
	if f.Type == request.FormatJSONSchema {
		r.ResponseFormat.JSONSchema = &request.JSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
	}
	return nil
}

// decodeInputItem appends what one input item says to msgs: a message, a
// function call (joined to the assistant message before it) or a
// function call's output (a tool message). Reasoning items are skipped.
func decodeInputItem(raw json.RawMessage, at string, msgs *[]request.Message, paths *[]string) *fieldError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return &fieldError{at, "want an input item object"}
	}
	var typ, role string
	if err := stringAt(obj, "type", at, &typ); err != nil {
		return err
	}
	if err := stringAt(obj, "role", at, &role); err != nil {
		return err
	}
	switch {
	case typ == "message" || (typ == "" && role != ""):
		parts, err := decodeInputContent(obj["content"], at+".content")
		if err != nil {
			return err
		}
		m := request.Message{Role: role}
		m.SetParts(parts)
		*msgs = append(*msgs, m)
		*paths = append(*paths, at)
	case typ == "function_call":
		var c request.ToolCall
		c.Type = "function"
		for _, f := range []struct {
			name string
			dst  *string
		}{{"call_id", &c.ID}, {"name", &c.Function.Name}, {"arguments", &c.Function.Arguments}} {
			if err := stringAt(obj, f.name, at, f.dst); err != nil {
				return err
			}
		}
		if n := len(*msgs); n > 0 && (*msgs)[n-1].Role == request.RoleAssistant {
			(*msgs)[n-1].ToolCalls = append((*msgs)[n-1].ToolCalls, c)
			return nil
		}
		*msgs = append(*msgs, request.Message{Role: request.RoleAssistant, ToolCalls: []request.ToolCall{c}})
		*paths = append(*paths, at)
	case typ == "function_call_output":
		m := request.Message{Role: request.RoleTool}
		if err := stringAt(obj, "call_id", at, &m.ToolCallID); err != nil {
			return err
		}
		parts, err := decodeInputContent(obj["output"], at+".output")
		if err != nil {
			return err
		}
		m.SetParts(parts)
		if len(m.Parts) > 0 {
			return &fieldError{at + ".output", "images in a function call's output are not supported"}
		}
		*msgs = append(*msgs, m)
		*paths = append(*paths, at)
	case typ == "reasoning":
		// The model's reasoning from an earlier turn: not sent again.
	case typ == "":
		return &fieldError{at + ".type", "missing (want message, function_call or function_call_output)"}
	default:
		return &fieldError{at + ".type", fmt.Sprintf("%q items are not supported (want message, function_call, function_call_output or reasoning)", typ)}
	}
	return nil
}

// decodeInputContent reads a message's content: a string, or an array of
// input_text, output_text, refusal and input_image parts.
func decodeInputContent(raw json.RawMessage, at string) ([]request.Part, *fieldError) {
	return decodeParts(raw, at, func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError) {
		part := request.Part{Type: request.PartText}
		switch typ {
		case "input_text", "output_text":
			return part, stringAt(p, "text", pat, &part.Text)
		case "refusal":
			return part, stringAt(p, "refusal", pat, &part.Text)
		case "input_image":
			img := &request.ImageURL{}
			if err := stringAt(p, "image_url", pat, &img.URL); err != nil {
				return part, err
			}
			if err := stringAt(p, "detail", pat, &img.Detail); err != nil {
				return part, err
			}
			if img.URL == "" {
				return part, &fieldError{pat + ".image_url", "missing (file_id images are not supported: send an image URL or a data URI)"}
			}
			return request.Part{Type: request.PartImageURL, ImageURL: img}, nil
		}
		return part, &fieldError{pat + ".type", fmt.Sprintf("%q parts are not supported (want input_text or input_image)", typ)}
	})
}

// responseObject is the Responses API's response object plus x_resilience.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []any           `json:"output"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Background        bool            `json:"background"`
	Tools             []any           `json:"tools"`
	Usage             *responseUsage  `json:"usage,omitempty"`
	Metadata          map[string]any  `json:"metadata"`
	Resilience        *Resilience     `json:"x_resilience,omitempty"`
}

type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// outputText is an output_text content part.
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// messageItem is an assistant message output item.
type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// functionCallItem is a function call output item.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

func msgItemID(id string) string       { return "msg_" + id }
func fnItemID(id string, i int) string { return fmt.Sprintf("fc_%s_%d", id, i) }
func textPart(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}
func respMessage(id, text, status string) messageItem {
	content := []outputText{}
	if status == "completed" {
		content = []outputText{textPart(text)}
	}
	return messageItem{Type: "message", ID: msgItemID(id), Status: status, Role: "assistant", Content: content}
}

// newResponseObject is the response object of a call (res may be empty
// while in progress).
func newResponseObject(id string, created time.Time, res workflows.CallResult, status string) responseObject {
	o := responseObject{ID: responseID(id), Object: "response", CreatedAt: created.Unix(), Status: status,
		Model: modelOf(res), Output: []any{}, Error: jsonNull, IncompleteDetails: jsonNull, ParallelToolCalls: true,
		Tools: []any{}, Metadata: map[string]any{}}
	if status != "completed" {
		return o
	}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		o.Output = append(o.Output, respMessage(id, res.Content, "completed"))
	}
	for i, c := range res.ToolCalls {
		o.Output = append(o.Output, functionCallItem{Type: "function_call", ID: fnItemID(id, i), CallID: c.ID,
			Name: c.Function.Name, Arguments: c.Function.Arguments, Status: "completed"})
	}
	if res.FinishReason == "length" {
		o.Status, o.IncompleteDetails = "incomplete", json.RawMessage(`{"reason":"max_output_tokens"}`)
	}
	u := res.Usage
	o.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens,
		InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	rs := resilienceOf(id, answerStatus(res), res)
	o.Resilience = &rs
	return o
}

// Sequence numbers of a response's stream events run 0, 1, 2, … without
// a gap, as OpenAI numbers them (clients that check for gaps, or count
// events by them, take a jump for lost events). They are a function of
// the answer, not of the connection, so that every connection that
// streams one response numbers its events alike and a client resumes
// (starting_after, Last-Event-ID) exactly where it stopped:
//
//	0, 1             response.created, response.in_progress
//	2, 3             output_item.added, content_part.added of the message
//	3 + k            the output_text.delta of the text's k-th piece
//	4 + pieces …     output_text.done, content_part.done, output_item.done,
//	                 then 4 per function call, then response.completed
//
// A connection is handed the text in pieces of its own (the stream's
// deltas while the call runs, one piece from the result after it ended,
// from a worker that resent an attempt), so the text is cut again into
// pieces that depend on it alone (nextPiece): a word with the spaces after
// it, or at most maxPiece bytes of text without spaces. A piece goes out
// once the byte after it has arrived, so a delta waits for at most the
// next word.
const (
	seqCreated    = 0
	seqInProgress = 1
	seqItemAdded  = 2
	seqPartAdded  = 3
)

// maxPiece is the most bytes of text without a space in one
// output_text.delta (a few characters of Chinese, a long URL's part).
const maxPiece = 32

// nextPiece is the length of the piece of text that s starts with, or 0
// while it is not known: s ends before the byte after the piece, and more
// text is still to come (last is false). A piece ends where a word
// follows whitespace, or at the first rune that starts maxPiece bytes or
// more into it; the answer's last piece ends with it.
func nextPiece(s string, last bool) int {
	for i := 1; i < len(s); i++ {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if i >= maxPiece || (isSpace(s[i-1]) && !isSpace(s[i])) {
			return i
		}
	}
	if last {
		return len(s)
	}
	return 0
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// responsesFormat streams Responses API events: response.created, the
// message item and its output_text deltas, function call items, and
// response.completed (or an error event). It is handed the answer's text
// from its first byte, also on a resumed stream, since the numbers of
// its events count the pieces of the whole text; the events a client has
// already (up to sequence number after, or up to byte have of the text
// for a Last-Event-ID) are not sent.
type responsesFormat struct {
	sw         *sseWriter
	wid        string
	background bool
	after      int // the client has the events up to this sequence number
	have       int // and the text up to this byte
	last       int // the sequence number of the last event, sent or not
	started    bool
	msgOpen    bool
	received   int    // bytes of text handed over
	pending    string // text handed over and not yet cut into a piece
	sent       int    // bytes of text cut into pieces
	pieces     int    // pieces cut
	offset     int64  // the stream offset of the text handed over last
}

func newResponsesFormat(sw *sseWriter, background bool, after, have int) *responsesFormat {
	if have > 0 {
		after = max(after, seqPartAdded)
	}
	return &responsesFormat{sw: sw, wid: strings.TrimPrefix(sw.id, responseIDPrefix), background: background,
		after: after, have: have, last: -1, offset: -1}
}

// wholeText marks the format that is handed the text from its first byte.
func (*responsesFormat) wholeText() {}

// event sends one typed event with sequence number seq, unless the
// client has it.
func (f *responsesFormat) event(seq int, id, typ string, fields map[string]any) {
	seq = max(seq, f.last+1) // never twice the same number, whatever came before
	f.last = seq
	if seq <= f.after {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = seq
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	text := "event: " + typ + "\ndata: " + string(b) + "\n\n"
	if id != "" {
		text = "id: " + id + "\n" + text
	}
	_ = f.sw.raw(text)
}

func (f *responsesFormat) start(model string) {
	f.started = true
	o := newResponseObject(f.wid, time.Unix(f.sw.created, 0), workflows.CallResult{Model: model}, "in_progress")
	o.Background = f.background
	created := o
	if f.background {
		created.Status = "queued"
	}
	f.event(seqCreated, "", "response.created", map[string]any{"response": created})
	f.event(seqInProgress, "", "response.in_progress", map[string]any{"response": o})
}

// open starts the stream and the message item, once.
func (f *responsesFormat) open(model string) {
	if !f.started {
		f.start(model) // a resumed stream: filtered by after
	}
	if f.msgOpen {
		return
	}
	f.msgOpen = true
	f.event(seqItemAdded, "", "response.output_item.added", map[string]any{"output_index": 0, "item": respMessage(f.wid, "", "in_progress")})
	f.event(seqPartAdded, "", "response.content_part.added", map[string]any{"item_id": msgItemID(f.wid), "output_index": 0, "content_index": 0, "part": textPart("")})
}

// text takes a piece of the text handed over at stream position at, and
// sends the pieces of the text now known.
func (f *responsesFormat) text(at resumePoint, model, piece string) {
	f.open(model)
	f.offset = at.offset
	f.received += len(piece)
	f.pending += piece
	f.flush(false)
}

// flush sends the pieces of the pending text whose end is known (all of
// it once the text is complete), each an output_text.delta whose SSE id
// is where a reconnect resumes after it.
func (f *responsesFormat) flush(complete bool) {
	for {
		n := nextPiece(f.pending, complete)
		if n == 0 {
			return
		}
		piece, start := f.pending[:n], f.sent
		f.pending, f.sent, f.pieces = f.pending[n:], f.sent+n, f.pieces+1
		seq := seqPartAdded + f.pieces
		switch {
		case f.sent <= f.have:
			f.after = max(f.after, seq) // the client has this piece
		case start < f.have:
			piece = piece[runeStart(piece, f.have-start):] // and the start of this one
		}
		f.event(seq, resumePoint{offset: f.offset, bytes: f.sent}.id(), "response.output_text.delta", map[string]any{
			"item_id": msgItemID(f.wid), "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []any{}})
	}
}

func (f *responsesFormat) end(id string, res workflows.CallResult) {
	if !f.started {
		f.start(modelOf(res))
	}
	seq := seqItemAdded
	idx := 0
	if f.msgOpen || res.Content != "" || len(res.ToolCalls) == 0 {
		f.open(modelOf(res))
		if f.received == 0 {
			f.pending = res.Content // no delta came: the answer is the result's
		}
		f.flush(true)
		seq = seqPartAdded + f.pieces + 1
		f.event(seq, "", "response.output_text.done", map[string]any{"item_id": msgItemID(id), "output_index": 0, "content_index": 0,
			"text": res.Content, "logprobs": []any{}})
		f.event(seq+1, "", "response.content_part.done", map[string]any{"item_id": msgItemID(id), "output_index": 0, "content_index": 0,
			"part": textPart(res.Content)})
		f.event(seq+2, "", "response.output_item.done", map[string]any{"output_index": 0, "item": respMessage(id, res.Content, "completed")})
		seq += 3
		idx++
	}
	for i, c := range res.ToolCalls {
		item := functionCallItem{Type: "function_call", ID: fnItemID(id, i), CallID: c.ID, Name: c.Function.Name, Status: "in_progress"}
		f.event(seq, "", "response.output_item.added", map[string]any{"output_index": idx, "item": item})
		f.event(seq+1, "", "response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": idx, "delta": c.Function.Arguments})
		f.event(seq+2, "", "response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": idx,
			"name": c.Function.Name, "arguments": c.Function.Arguments})
		item.Arguments, item.Status = c.Function.Arguments, "completed"
		f.event(seq+3, "", "response.output_item.done", map[string]any{"output_index": idx, "item": item})
		seq += 4
		idx++
	}
	o := newResponseObject(id, time.Unix(f.sw.created, 0), res, "completed")
	o.Background = f.background
	o.Resilience.Idempotency = f.sw.idem
	f.event(seq, "", "response."+o.Status, map[string]any{"response": o}) // completed, or incomplete (max_output_tokens)
}

func (f *responsesFormat) fail(e *apiError) {
	if f.msgOpen {
		f.flush(true) // the text so far, then the error
	}
	b := e.body()
	f.event(f.last+1, "", "error", map[string]any{"code": b.Error.Code, "message": b.Error.Message, "param": b.Error.Param})
}
