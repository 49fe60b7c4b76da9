package policies

import (
	"slices"
	"strings"
)

// NextModel chooses the model of the next attempt from the ladder: the
// preferred model first (when it is on the ladder), then the ladder in
// order, skipping models already tried in this call and models that
// allowed refuses (typically BreakerRegistry.AllowFunc: an open breaker, or
// a half-open one that did not pick this call as a probe). allowed is asked
// at most once per model, in that order, and not after a model is chosen,
// so its answer for the chosen model is the admission of the attempt;
// nil allows every model. It reports false when no model is left.
func NextModel(ladder []ModelConfig, preferred string, tried []string, allowed func(model string) bool) (ModelConfig, bool) {
	ok := func(m ModelConfig) bool {
		return !slices.Contains(tried, m.Name) && (allowed == nil || allowed(m.Name))
	}
	if preferred != "" {
		if i := slices.IndexFunc(ladder, func(m ModelConfig) bool { return m.Name == preferred }); i >= 0 && ok(ladder[i]) {
			return ladder[i], true
		}
	}
	for _, m := range ladder {
		if m.Name != preferred && ok(m) {
			return m, true
		}
	}
	return ModelConfig{}, false
}

// AdaptMessages adapts a conversation to a model's system-prompt support
// (seed 003 §4.3: a smaller model may silently ignore the system role). It
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
func AdaptMessages(msgs []Message, support SystemPromptSupport) []Message {
	if support != SystemPromptPartial && support != SystemPromptNone {
		return pruneAppendCopies(make([]Message, 0, len(msgs)), msgs)
	}
	var texts []string
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if pruneIsSystem(m.Role) {
			if strings.TrimSpace(m.Content) != "" {
				texts = append(texts, m.Content)
			}
			continue
		}
		out = append(out, pruneCopy(m))
	}
	if len(texts) == 0 {
		return out
	}
	system := strings.Join(texts, "\n\n")

	isUser := func(m Message) bool { return m.Role == RoleUser }
	target := slices.IndexFunc(out, isUser)
	if support == SystemPromptNone {
		for i := len(out) - 1; i >= 0; i-- {
			if isUser(out[i]) {
				target = i
				break
			}
		}
	}
	if target < 0 {
		return slices.Insert(out, 0, Message{Role: RoleUser, Content: system})
	}
	if out[target].Content == "" {
		out[target].Content = system
	} else {
		out[target].Content = system + "\n\n" + out[target].Content
	}
	return out
}
