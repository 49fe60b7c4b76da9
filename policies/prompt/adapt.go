package prompt

import (
	"slices"
	"strings"
	"unicode"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// AdaptMessages adapts a conversation to a model's system-prompt support
// (a smaller model may silently ignore the system role; seed 003 §4.3).
// It returns a new slice and never mutates msgs.
//
//   - full (and any unknown value, including ""): unchanged.
//   - partial: every system and developer message is removed and the
//     current question (the last user message) is wrapped in their text,
//     joined by a blank line, as a role (WrapQuestion).
//   - none: every system and developer message is removed: only the user
//     and assistant turns (and tool results) are sent.
//
// A context summary (IsSummary) is not the role: with partial or none it
// stays where it is, as a user message. With partial and no user message
// the system text becomes a user message at the start. Apply it after
// pruning.
func AdaptMessages(msgs []request.Message, support config.SystemPromptSupport) []request.Message {
	return adaptOwned(pruneAppendCopies(make([]request.Message, 0, len(msgs)), msgs), support)
}

// DropsSystem reports whether a model with support sends none of the
// system prompt of msgs (it has one, and support is none).
func DropsSystem(msgs []request.Message, support config.SystemPromptSupport) bool {
	if support != config.SystemPromptNone {
		return false
	}
	return slices.ContainsFunc(msgs, func(m request.Message) bool {
		return m.Instructs() && !IsSummary(m) && strings.TrimSpace(m.Text()) != ""
	})
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
		if IsSummary(m) {
			m.Role = request.RoleUser
			out = append(out, m)
			continue
		}
		if m.Instructs() {
			if t := m.Text(); strings.TrimSpace(t) != "" {
				texts = append(texts, t)
			}
			continue
		}
		out = append(out, m)
	}
	clear(msgs[len(out):])
	if len(texts) == 0 || support == config.SystemPromptNone {
		return out
	}
	system := strings.Join(texts, "\n\n")
	target := -1
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Role == request.RoleUser && !IsSummary(out[i]) {
			target = i
			break
		}
	}
	if target < 0 {
		return slices.Insert(out, 0, request.Message{Role: request.RoleUser, Content: system})
	}
	q := &out[target]
	head := wrapHead(system, q.Text())
	if len(q.Parts) > 0 {
		// An image message: the role goes first, as a text part.
		q.Parts = slices.Insert(slices.Clone(q.Parts), 0, request.Part{Type: request.PartText, Text: head})
		return out
	}
	q.Content = head + q.Content
	return out
}

// WrapQuestion is the question wrapped in the system prompt as a role, in
// the question's language: "请以{system}的身份回答：{question}" when the
// question is mostly Chinese (more than half of its letters are Han),
// else "Answer as {system}: {question}".
func WrapQuestion(system, question string) string {
	return wrapHead(system, question) + question
}

// wrapHead is the text WrapQuestion puts before the question.
func wrapHead(system, question string) string {
	if MostlyChinese(question) {
		return "请以" + system + "的身份回答："
	}
	return "Answer as " + system + ": "
}

// MostlyChinese reports whether more than half of the letters of s are
// Han characters: the language a reply to s follows.
func MostlyChinese(s string) bool {
	han, letters := 0, 0
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Han, r):
			han++
			letters++
		case unicode.IsLetter(r):
			letters++
		}
	}
	return han*2 > letters
}
