package llmsim

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Split requests: a request whose first message is a system (or
// developer) message that asks to split a question into three smaller
// questions (the step-by-step mode's fixed prompt, docs/rules.md) is answered as a small model would, deterministically: JSON
// {"steps": [three questions]} made of the question's sentences in three
// groups, or, for a question of fewer sentences, three questions about it
// (what is asked, the method, the result). Faults other than directives'
// do not apply to it.

var splitAskRE = regexp.MustCompile(`(?i)\bsplit\b.*\bthree smaller questions\b|拆分成三个`)

// isSplitRequest reports whether req's first message asks for a split.
func isSplitRequest(req *chatRequest) bool {
	if len(req.Messages) == 0 {
		return false
	}
	m := req.Messages[0]
	return (m.Role == "system" || m.Role == "developer") && splitAskRE.MatchString(m.Content)
}

// SplitQuestion is the simulator's split of question into three smaller
// questions, as the JSON content of its answer.
func SplitQuestion(question string) string {
	q := strings.Join(strings.Fields(question), " ")
	var parts []string
	for _, s := range sentenceRE.FindAllString(q, -1) {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	var steps []string
	if len(parts) >= 3 {
		n := len(parts)
		steps = []string{
			strings.Join(parts[:n/3], " "),
			strings.Join(parts[n/3:2*n/3], " "),
			strings.Join(parts[2*n/3:], " "),
		}
	} else {
		steps = []string{"What is asked in: " + q, "Which method answers: " + q, "What is the result of: " + q}
	}
	b, _ := json.Marshal(map[string][]string{"steps": steps})
	return string(b)
}
