package llmsim

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
)

// AnswerTokens returns the simulator's answer of exactly tokens completion
// tokens (by EstimateTokens) to question from model: Answer(model,
// question) cut or continued with deterministic sentences whose words come
// from a hash of the question. tokens <= 0 returns Answer(model, question).
//
// Answers of one question are prefixes of each other: AnswerTokens(m, q, n)
// is a prefix of AnswerTokens(m, q, n+k), and Answer(m, q) is a prefix of
// every answer of at least its own length. This is what makes a
// continuation (see the package documentation) seamless.
func AnswerTokens(model, question string, tokens int) string {
	a := Answer(model, question)
	if tokens <= 0 {
		return a
	}
	short := EstimateTokens(a)
	if tokens <= short {
		if tokens == short {
			return a
		}
		return truncateTokens(a, tokens)
	}
	q := normalizeQuestion(question)
	return truncateTokens(extend(a, "answer\x00"+q, tokens), tokens)
}

// ReasoningTokens returns the reasoning of a reasoning model before it
// answers question: exactly tokens tokens ("Let me think step by step
// about: …" followed by deterministic sentences); tokens <= 0 returns "".
func ReasoningTokens(question string, tokens int) string {
	if tokens <= 0 {
		return ""
	}
	q := normalizeQuestion(question)
	head := "Let me think step by step about: " + q + "."
	return truncateTokens(extend(head, "reasoning\x00"+q, tokens), tokens)
}

func normalizeQuestion(q string) string {
	return strings.Join(strings.Fields(StripDirectives(q)), " ")
}

// extend appends sentences of hash-chosen words to head until the text
// holds at least tokens tokens. Sentences are separated by a space, and
// every fifth one starts a new paragraph.
func extend(head, seed string, tokens int) string {
	var b strings.Builder
	b.WriteString(head)
	cjk, other := 0, 0
	for _, r := range head {
		if isCJK(r) {
			cjk++
		} else {
			other++
		}
	}
	for i := uint64(1); cjk+(other+3)/4 < tokens; i++ {
		s := sentence(seed, i)
		sep := " "
		if i%5 == 0 {
			sep = "\n\n"
		}
		b.WriteString(sep)
		b.WriteString(s)
		other += len(sep) + len(s) // sentences are ASCII
	}
	return b.String()
}

// sentence returns the i-th generated sentence of seed: 6 to 15 words of
// answerWords, capitalised, ending with a full stop.
func sentence(seed string, i uint64) string {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], i)
	h := sha256.Sum256(append([]byte(seed+"\x00"), buf[:]...))
	n := 6 + int(h[0]%10)
	words := make([]string, n)
	for j := range n {
		words[j] = answerWords[h[1+j]%64]
	}
	words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
	return strings.Join(words, " ") + "."
}
