package llmsim

import "encoding/json"

// The events of a streamed Messages answer: message_start, ping, each
// content block (content_block_start, its deltas token by token,
// content_block_stop), message_delta and message_stop. Their tok, step,
// content and bytes follow the OpenAI chunks of the same answer (see
// event), so that both wires send each token at the same time.

// sseBuilder collects the events, stamping each with the generation's
// progress so far.
type sseBuilder struct {
	out                       []event
	step, tok, content, bytes int
}

// add appends an event; next starts a new step (an OpenAI chunk of its
// own), else the event goes out with the one before.
func (b *sseBuilder) add(name string, v any, next, finish bool) {
	if next && len(b.out) > 0 {
		b.step++
	}
	data, _ := json.Marshal(v)
	b.out = append(b.out, event{name: name, data: data, tok: b.tok, content: b.content, bytes: b.bytes,
		finish: finish, step: b.step})
}

type typeOnly struct {
	Type string `json:"type"`
}

// blockEvent is content_block_start (ContentBlock), content_block_delta
// (Delta) or content_block_stop (neither).
type blockEvent struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	ContentBlock *contentBlock `json:"content_block,omitempty"`
	Delta        *blockDelta   `json:"delta,omitempty"`
}

type blockDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
	Thinking    string `json:"thinking,omitempty"`
	Signature   string `json:"signature,omitempty"`
}

// anthropicEvents builds the SSE events of a streamed Messages answer.
func (x *exchange) anthropicEvents(rd rendered) []event {
	var b sseBuilder
	start := x.anthropicMessage(rd)
	start.Content, start.StopReason, start.StopSequence = []contentBlock{}, nil, nil
	start.Usage.OutputTokens = 0
	b.add("message_start", struct {
		Type    string       `json:"type"`
		Message anthropicMsg `json:"message"`
	}{"message_start", start}, false, false)
	b.add("ping", typeOnly{"ping"}, false, false)
	for i, blk := range x.blocks(rd) {
		b.block(i, blk)
	}
	b.tok++ // the end of the generation
	md := struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}{Type: "message_delta"}
	full := x.anthropicMessage(rd)
	md.Delta.StopReason, md.Delta.StopSequence = full.StopReason, full.StopSequence
	md.Usage.OutputTokens = rd.completion
	b.add("message_delta", md, true, true)
	b.add("message_stop", typeOnly{"message_stop"}, false, true)
	return b.out
}

// block adds content block i: its start, a delta per token and its stop.
// A tool_use's start is a token of its own (OpenAI's call head chunk);
// the text block's stop counts as the end of the answer for the stream
// faults, which strike before it.
func (b *sseBuilder) block(i int, blk contentBlock) {
	delta := func(d blockDelta) {
		b.tok++
		b.add("content_block_delta", blockEvent{Type: "content_block_delta", Index: i, Delta: &d}, true, false)
	}
	switch blk.Type {
	case "thinking":
		b.add("content_block_start", blockEvent{Type: "content_block_start", Index: i,
			ContentBlock: &contentBlock{Type: "thinking", Thinking: strp("")}}, false, false)
		for _, piece := range tokenPieces(*blk.Thinking) {
			delta(blockDelta{Type: "thinking_delta", Thinking: piece})
		}
		d := blockDelta{Type: "signature_delta", Signature: *blk.Signature}
		b.add("content_block_delta", blockEvent{Type: "content_block_delta", Index: i, Delta: &d}, false, false)
	case "tool_use":
		b.tok++
		b.add("content_block_start", blockEvent{Type: "content_block_start", Index: i,
			ContentBlock: &contentBlock{Type: "tool_use", ID: blk.ID, Name: blk.Name, Input: json.RawMessage("{}")}}, true, false)
		for _, piece := range tokenPieces(blk.args) {
			delta(blockDelta{Type: "input_json_delta", PartialJSON: piece})
		}
	case "text":
		b.add("content_block_start", blockEvent{Type: "content_block_start", Index: i,
			ContentBlock: &contentBlock{Type: "text", Text: strp("")}}, false, false)
		for _, piece := range tokenPieces(*blk.Text) {
			b.content++
			b.bytes += len(piece)
			delta(blockDelta{Type: "text_delta", Text: piece})
		}
	}
	b.add("content_block_stop", blockEvent{Type: "content_block_stop", Index: i}, false, blk.Type == "text")
}
