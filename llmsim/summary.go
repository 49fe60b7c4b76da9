package llmsim

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Summary requests and recall checks: how the simulator serves and
// measures a context refiner (docs/how-it-works.md "Context refiner").
//
// A request whose first message is a system (or developer) message that
// asks to summarize ("summarize", "summarise", "总结", "摘要") is answered with
// Summarize of its last user message: the sentences that carry facts,
// as a small model told to keep names and numbers would, deterministically
// and within max_tokens. Faults other than directives' do not apply to it.
//
// [[sim recall=FACT]] in the question asks the model about a fact told
// earlier in the conversation: the answer starts "Recalled: FACT." when
// some other message of the request (a kept round, a summary) contains
// FACT, else "Not in context: FACT." — as a model answers from the context
// it was given. Generation.Recall and Recalled record it, so a test can
// assert that a fact planted in a dropped round still reached the model.

// summaryAskRE matches an instruction to summarize the conversation (the
// context refiner's opens "Summarize the conversation below"), not any
// system prompt that mentions summaries ("You summarize documents" is an
// ordinary call).
var summaryAskRE = regexp.MustCompile(`(?i)^\s*summari[sz]e the (?:conversation|dialog(?:ue)?|chat)\b|^\s*(?:请)?(?:总结|概括)(?:以下|下面的?)?(?:对话|会话)`)

// isSummaryRequest reports whether req's first message is a system or
// developer message that asks for a summary.
func isSummaryRequest(req *chatRequest) bool {
	if len(req.Messages) == 0 {
		return false
	}
	m := req.Messages[0]
	return (m.Role == "system" || m.Role == "developer") && summaryAskRE.MatchString(m.Content)
}

var (
	sentenceRE  = regexp.MustCompile(`[^.!?。！？\n]+[.!?。！？]*`)
	roleLabelRE = regexp.MustCompile(`^(?:user|assistant|tool|system|developer)(?: calls)?:\s*`)
)

// Summarize is the simulator's summary of text: its sentences that carry a
// fact — a digit, or a capitalised word after a sentence's first word (a
// name) — in order, each once, without the "role:" labels of a
// transcript, as many as fit in maxTokens (0: all). A text with no such
// sentence is summarised by its first sentence.
func Summarize(text string, maxTokens int) string {
	var facts, all []string
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = roleLabelRE.ReplaceAllString(strings.TrimSpace(line), "")
		for _, s := range sentenceRE.FindAllString(line, -1) {
			s = strings.TrimSpace(s)
			if s == "" || seen[s] {
				continue
			}
			seen[s] = true
			all = append(all, s)
			if factual(s) {
				facts = append(facts, s)
			}
		}
	}
	if len(facts) == 0 && len(all) > 0 {
		facts = all[:1]
	}
	var b strings.Builder
	for _, s := range facts {
		next := s
		if b.Len() > 0 {
			next = " " + s
		}
		if maxTokens > 0 && EstimateTokens(b.String()+next) > maxTokens {
			if b.Len() == 0 {
				b.WriteString(truncateTokens(s, maxTokens))
			}
			break
		}
		b.WriteString(next)
	}
	return b.String()
}

// factual reports whether a sentence carries a number or a name.
func factual(s string) bool {
	first := true
	for _, w := range strings.Fields(s) {
		if strings.ContainsFunc(w, unicode.IsDigit) {
			return true
		}
		r, _ := utf8.DecodeRuneInString(strings.TrimLeft(w, `"'(“‘`))
		if !first && unicode.IsUpper(r) {
			return true
		}
		first = false
	}
	return false
}

// recallDirective returns the fact of the first [[sim recall=…]], or "".
func recallDirective(dirs []Directive) string {
	for _, d := range dirs {
		if d.Recall != "" {
			return d.Recall
		}
	}
	return ""
}

// recalled reports whether a message of msgs other than the question (the
// last user message) contains fact.
func recalled(msgs []Message, fact string) bool {
	q := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			q = i
			break
		}
	}
	for i, m := range msgs {
		if i != q && strings.Contains(m.Content, fact) {
			return true
		}
	}
	return false
}

// recallNote is how an answer starts when the question asked to recall
// fact.
func recallNote(fact string, found bool) string {
	if found {
		return "Recalled: " + fact + ". "
	}
	return "Not in context: " + fact + ". "
}
