package llmsim

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"unicode/utf8"
)

var answerWords = [64]string{
	"the", "request", "is", "answered", "by", "a", "stable", "model",
	"retry", "budget", "keeps", "traffic", "calm", "while", "jitter", "spreads",
	"backoff", "over", "time", "and", "every", "attempt", "is", "recorded",
	"in", "history", "so", "operators", "see", "each", "decision", "clearly",
	"durable", "workflows", "survive", "upstream", "failures", "without", "storms", "today",
	"context", "pruning", "shortens", "long", "prompts", "before", "resending", "them",
	"breakers", "open", "when", "errors", "pile", "up", "fallback", "answers",
	"come", "from", "the", "faq", "for", "users", "who", "wait",
}

// Answer returns the simulator's deterministic answer to question from
// model: "[model] Re: <question> — <words chosen by a hash of the
// question>." The question is trimmed, its directives removed and, when
// long, shortened to 60 runes in the echo. Tests in any package can call
// it to predict the content of a healthy answer.
func Answer(model, question string) string {
	q := strings.Join(strings.Fields(StripDirectives(question)), " ")
	h := sha256.Sum256([]byte(q))
	n := 8 + int(h[0]%8)
	words := make([]string, n)
	for i := range n {
		words[i] = answerWords[h[1+i]%64]
	}
	words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
	echo := q
	if utf8.RuneCountInString(echo) > 60 {
		echo = string([]rune(echo)[:60]) + "…"
	}
	return fmt.Sprintf("[%s] Re: %s — %s.", model, echo, strings.Join(words, " "))
}

func reasoningText(question string) string {
	return "Let me think step by step about: " + strings.Join(strings.Fields(StripDirectives(question)), " ") +
		". First I need to consider the constraints, then the context, then"
}
