package prompt

import (
	"slices"
	"strings"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// AdaptMessages adapts a conversation to a model's system-prompt support
// (a smaller model may silently ignore the system role). It
// returns a new slice and never mutates msgs.
//
//   - full (and any unknown value, including ""): unchanged.
//   - partial: every system and developer message is removed and their
//     texts, joined by a blank line, are folded into the first user
//     message as "<system text>\n\n<user text>".
//   - none: the same, folded into the current question (the last user
//     message) instead.
//
// If there is no user message, the system text becomes a user message at
// the start. Apply it after pruning: with partial support the system text
// lives in the first user turn, which pruning would otherwise remove.
func AdaptMessages(msgs []request.Message, support config.SystemPromptSupport) []request.Message {
	return adaptOwned(pruneAppendCopies(make([]request.Message, 0, len(msgs)), msgs), support)
}

// adaptOwned is AdaptMessages on a slice the caller owns: it filters and
// changes msgs in place.
func adaptOwned(msgs []request.Message, support config.SystemPromptSupport) []request.Message {
	if support != config.SystemPromptPartial && support != config.SystemPromptNone {
		return msgs
	}
	var texts []string
	out := msgs[:0]
	for _, m := range msgs {
		if pruneIsSystem(m.Role) {
			if t := m.Text(); strings.TrimSpace(t) != "" {
				texts = append(texts, t)
			}
			continue
		}
		out = append(out, m)
	}
	clear(msgs[len(out):])
	if len(texts) == 0 {
		return out
	}
	system := strings.Join(texts, "\n\n")

	isUser := func(m request.Message) bool { return m.Role == request.RoleUser }
	target := slices.IndexFunc(out, isUser)
	if support == config.SystemPromptNone {
		for i := len(out) - 1; i >= 0; i-- {
			if isUser(out[i]) {
				target = i
				break
			}
		}
	}
	if target < 0 {
		return slices.Insert(out, 0, request.Message{Role: request.RoleUser, Content: system})
	}
	if len(out[target].Parts) > 0 {
		// An image message: the system text goes first, as a text part.
		out[target].Parts = slices.Insert(slices.Clone(out[target].Parts), 0, request.Part{Type: request.PartText, Text: system})
	} else if out[target].Content == "" {
		out[target].Content = system
	} else {
		out[target].Content = system + "\n\n" + out[target].Content
	}
	return out
}
