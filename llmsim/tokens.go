package llmsim

import "unicode"

// Token estimate constants (an approximation of the OpenAI chat format:
// each message costs its content plus a few tokens of framing, and the
// reply is primed with a few more).
const (
	// TokensPerMessage is the framing cost of one chat message.
	TokensPerMessage = 4
	// TokensReplyPriming is added once per request.
	TokensReplyPriming = 3
)

// EstimateTokens estimates the tokens of s: one per CJK character (Han,
// kana, Hangul, CJK punctuation and full-width forms) plus one per four
// other runes, rounded up. It is the simulator's only tokenizer: usage,
// max_tokens and the context-window check all use it.
func EstimateTokens(s string) int {
	cjk, other := 0, 0
	for _, r := range s {
		if isCJK(r) {
			cjk++
		} else {
			other++
		}
	}
	return cjk + (other+3)/4
}

func isCJK(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		(r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

// EstimatePromptTokens estimates the prompt tokens of a chat request:
// the sum over messages of EstimateTokens(content, name and tool-call
// arguments) + TokensPerMessage, plus TokensReplyPriming.
func EstimatePromptTokens(msgs []Message) int {
	n := TokensReplyPriming
	for _, m := range msgs {
		n += TokensPerMessage + EstimateTokens(m.Text()) + EstimateTokens(m.Name)
		for _, tc := range m.ToolCalls {
			n += EstimateTokens(tc.Function.Name) + EstimateTokens(tc.Function.Arguments)
		}
	}
	return n
}

// truncateTokens returns the longest prefix of s whose estimate is at most
// n tokens.
func truncateTokens(s string, n int) string {
	if n <= 0 {
		return ""
	}
	cjk, other := 0, 0
	for i, r := range s {
		c, o := cjk, other
		if isCJK(r) {
			c++
		} else {
			o++
		}
		if c+(o+3)/4 > n {
			return s[:i]
		}
		cjk, other = c, o
	}
	return s
}
