package activities

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	openai "github.com/sashabaranov/go-openai"
)

// anthropicMaxTokens is the max_tokens sent when the attempt sets none:
// the Messages API requires one (the policy's limits.default_max_tokens
// normally sets it before this).
const anthropicMaxTokens = 4096

// messageParams is a chat completions request said in the Messages API's
// words: system messages as the system prompt, tool calls and results as
// tool_use and tool_result blocks, turns of one role merged (Anthropic
// wants them alternating), a final assistant message left last for the
// model to continue (a prefill), a JSON response format as an instruction.
// Sampling (temperature, top_p) is not sent: the Messages API of
// Anthropic's SDK has none (a model's passthrough can still send a field).
// With the params it returns the whitespace cut from the end of a final
// assistant message (prefillTrimmed).
func messageParams(req openai.ChatCompletionRequest) (anthropic.MessageNewParams, string, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: int64(max(req.MaxTokens, req.MaxCompletionTokens))}
	if p.MaxTokens <= 0 {
		p.MaxTokens = anthropicMaxTokens
	}
	p.StopSequences = req.Stop
	if req.User != "" {
		p.Metadata.UserID = anthropic.String(req.User)
	}
	system, msgs, err := anthropicMessages(req.Messages)
	if err != nil {
		return p, "", err
	}
	if note := formatInstruction(req.ResponseFormat); note != "" {
		system = append(system, anthropic.TextBlockParam{Text: note})
	}
	p.System, p.Messages = system, msgs
	if p.Tools, err = anthropicTools(req.Tools); err != nil {
		return p, "", err
	}
	p.ToolChoice, err = anthropicToolChoice(req.ToolChoice, req.ParallelToolCalls == false)
	return p, prefillTrimmed(req.Messages), err
}

// prefillTrimmed is the whitespace at the end of msgs' final assistant
// message, which Anthropic refuses in a prefill: the model continues the
// text without it and writes it again, and the caller already has it.
func prefillTrimmed(msgs []openai.ChatCompletionMessage) string {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != openai.ChatMessageRoleAssistant {
		return ""
	}
	text := messageText(msgs[len(msgs)-1])
	return text[len(strings.TrimRight(text, prefillSpace)):]
}

// prefillSpace is the whitespace cut from the end of a prefill.
const prefillSpace = " \t\r\n"

// dropRewritten takes from the start of text the whitespace the prefill
// lost that the model wrote again (pending), and returns what is left of
// each: the caller has that whitespace already.
func dropRewritten(text, pending string) (string, string) {
	for pending != "" && text != "" {
		if text[0] != pending[0] {
			return text, ""
		}
		text, pending = text[1:], pending[1:]
	}
	return text, pending
}

// anthropicMessages splits msgs into the system prompt and the turns.
func anthropicMessages(msgs []openai.ChatCompletionMessage) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	var system []anthropic.TextBlockParam
	var turns []anthropic.MessageParam
	for i, m := range msgs {
		var blocks []anthropic.ContentBlockParamUnion
		var err error
		user := true
		switch m.Role {
		case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
			if text := messageText(m); text != "" {
				system = append(system, anthropic.TextBlockParam{Text: text})
			}
			continue
		case openai.ChatMessageRoleUser:
			blocks, err = userBlocks(i, m)
		case openai.ChatMessageRoleTool:
			blocks = []anthropic.ContentBlockParamUnion{toolResult(m)}
		case openai.ChatMessageRoleAssistant:
			user = false
			blocks, err = assistantBlocks(i, m, i == len(msgs)-1)
		default:
			return nil, nil, errNotSaid("message %d has role %q, which the Messages API has no turn for", i, m.Role)
		}
		if err != nil {
			return nil, nil, err
		}
		if len(blocks) > 0 {
			turns = appendTurn(turns, user, blocks)
		}
	}
	return system, turns, nil
}

// appendTurn adds blocks to the last turn when it is of the same role,
// else as a new turn.
func appendTurn(turns []anthropic.MessageParam, user bool, blocks []anthropic.ContentBlockParamUnion) []anthropic.MessageParam {
	if n := len(turns); n > 0 {
		last := &turns[n-1]
		switch {
		case user && last.OfUser != nil:
			last.OfUser.Content = append(last.OfUser.Content, blocks...)
			return turns
		case !user && last.OfAssistant != nil:
			last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
			return turns
		}
	}
	if user {
		return append(turns, anthropic.NewUserMessage(blocks...))
	}
	return append(turns, anthropic.NewAssistantMessage(blocks...))
}

// toolResult is a tool message as a tool_result block; an empty result
// has no content (Anthropic refuses an empty text block).
func toolResult(m openai.ChatCompletionMessage) anthropic.ContentBlockParamUnion {
	if text := messageText(m); text != "" {
		return anthropic.NewToolResultBlock(m.ToolCallID, text, false)
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}}
}

// messageText is a message's text: its content, or its text parts joined.
func messageText(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// userBlocks are a user message's text and images (an empty text block is
// refused by Anthropic, so none is sent).
func userBlocks(i int, m openai.ChatCompletionMessage) ([]anthropic.ContentBlockParamUnion, error) {
	if len(m.MultiContent) == 0 {
		if m.Content == "" {
			return nil, nil
		}
		return []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(m.Content)}, nil
	}
	var blocks []anthropic.ContentBlockParamUnion
	for _, part := range m.MultiContent {
		switch {
		case part.Type == openai.ChatMessagePartTypeText && part.Text != "":
			blocks = append(blocks, anthropic.NewTextBlock(part.Text))
		case part.Type == openai.ChatMessagePartTypeImageURL && part.ImageURL != nil:
			b, err := imageBlock(i, part.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

// imageBlock is an image by URL, or by its bytes for a data: URL.
func imageBlock(i int, url string) (anthropic.ContentBlockParamUnion, error) {
	rest, isData := strings.CutPrefix(url, "data:")
	if !isData {
		return anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: url}), nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, b64 := strings.CutSuffix(meta, ";base64")
	if !ok || !b64 {
		return anthropic.ContentBlockParamUnion{}, errNotSaid("message %d: an image's data URL is not base64 (data:<type>;base64,…)", i)
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return anthropic.ContentBlockParamUnion{}, errNotSaid("message %d: an image's data URL is not valid base64", i)
	}
	return anthropic.NewImageBlockBase64(mediaType, data), nil
}

// assistantBlocks are an assistant message's text and tool calls. The
// last message's text is a prefill the model continues, which Anthropic
// refuses with trailing whitespace.
func assistantBlocks(i int, m openai.ChatCompletionMessage, last bool) ([]anthropic.ContentBlockParamUnion, error) {
	var blocks []anthropic.ContentBlockParamUnion
	text := messageText(m)
	if last {
		text = strings.TrimRight(text, prefillSpace)
	}
	if text != "" {
		blocks = append(blocks, anthropic.NewTextBlock(text))
	}
	for _, tc := range m.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			args = json.RawMessage("{}")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(args, &obj) != nil {
			return nil, errNotSaid("message %d: tool call %q's arguments are not a JSON object, which a tool_use input must be", i, tc.ID)
		}
		blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, args, tc.Function.Name))
	}
	return blocks, nil
}

// anthropicTools are function tools with their parameters as input_schema.
func anthropicTools(tools []openai.Tool) ([]anthropic.ToolUnionParam, error) {
	var out []anthropic.ToolUnionParam
	for _, t := range tools {
		if t.Function == nil {
			continue
		}
		schema := anthropic.ToolInputSchemaParam{}
		if t.Function.Parameters != nil {
			raw, err := json.Marshal(t.Function.Parameters)
			if err != nil {
				return nil, errNotSaid("tool %q: parameters: %v", t.Function.Name, err)
			}
			var fields map[string]any
			if json.Unmarshal(raw, &fields) != nil {
				return nil, errNotSaid("tool %q: parameters are not a JSON object", t.Function.Name)
			}
			schema.Properties = fields["properties"]
			if req, ok := fields["required"].([]any); ok {
				for _, r := range req {
					if s, ok := r.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
			delete(fields, "properties")
			delete(fields, "required")
			delete(fields, "type")
			schema.ExtraFields = fields
		}
		tool := anthropic.ToolParam{Name: t.Function.Name, InputSchema: schema}
		if t.Function.Description != "" {
			tool.Description = anthropic.String(t.Function.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return out, nil
}

// anthropicToolChoice is tool_choice in Anthropic's words: auto, any (for
// required), none, or one tool by name; serial asks for one call at a time.
func anthropicToolChoice(choice any, serial bool) (anthropic.ToolChoiceUnionParam, error) {
	var tc anthropic.ToolChoiceUnionParam
	switch c := choice.(type) {
	case nil:
		if serial {
			tc.OfAuto = &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}
		}
	case string:
		switch c {
		case "auto", "":
			tc.OfAuto = &anthropic.ToolChoiceAutoParam{}
		case "required":
			tc.OfAny = &anthropic.ToolChoiceAnyParam{}
		case "none":
			tc.OfNone = &anthropic.ToolChoiceNoneParam{}
		default:
			return tc, errNotSaid("tool_choice %q has no Messages API equivalent", c)
		}
		if serial && tc.OfAuto != nil {
			tc.OfAuto.DisableParallelToolUse = anthropic.Bool(true)
		}
		if serial && tc.OfAny != nil {
			tc.OfAny.DisableParallelToolUse = anthropic.Bool(true)
		}
	case openai.ToolChoice:
		tc = anthropic.ToolChoiceParamOfTool(c.Function.Name)
		if serial {
			tc.OfTool.DisableParallelToolUse = anthropic.Bool(true)
		}
	default:
		return tc, errNotSaid("tool_choice of type %T has no Messages API equivalent", choice)
	}
	return tc, nil
}

// formatInstruction says a JSON response format in words: the Messages
// API has no response_format, and the call's answer check holds the
// answer to it all the same.
func formatInstruction(f *openai.ChatCompletionResponseFormat) string {
	switch {
	case f == nil || f.Type == openai.ChatCompletionResponseFormatTypeText || f.Type == "":
		return ""
	case f.JSONSchema != nil && f.JSONSchema.Schema != nil:
		schema, err := json.Marshal(f.JSONSchema.Schema)
		if err == nil {
			return "Answer with one JSON value only, no prose and no code fence, that matches this JSON Schema: " + string(schema)
		}
	}
	return "Answer with one JSON object only, no prose and no code fence."
}
