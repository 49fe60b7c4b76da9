package prompt

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/tiktoken-go/tokenizer"
)

// DefaultEncoding is the tokenizer encoding used when none is configured.
// cl100k_base is the encoding of gpt-4 and gpt-3.5-turbo; for the
// open-weight models behind OpenAI-compatible servers it is a good, slightly
// pessimistic stand-in (it spends about one token per Chinese character).
const DefaultEncoding = "cl100k_base"

// Chat framing overheads, from OpenAI's token-counting recipe for chat
// models: every message costs TokensPerMessage on top of its role and
// content, a name costs TokensPerName more, and the reply is primed with
// TokensReplyPriming tokens. Tool calls are not covered by the recipe;
// each costs TokensPerToolCall on top of its function name and arguments,
// which errs on the side of counting too many.
const (
	TokensPerMessage   = 3
	TokensPerName      = 1
	TokensReplyPriming = 3
	TokensPerToolCall  = 3
)

// TokenCounter counts tokens with an offline BPE tokenizer whose
// vocabularies are embedded in the binary; nothing is downloaded. Build it
// once per process with NewTokenCounter: the first counter of an encoding
// builds its vocabulary table (tens of milliseconds).
//
// A TokenCounter is safe for concurrent use. A nil *TokenCounter is valid
// and counts with EstimateTokens.
type TokenCounter struct {
	codec    tokenizer.Codec
	encoding string
}

// NewTokenCounter returns a counter for the named encoding: cl100k_base
// (the default, for ""), o200k_base, p50k_base, p50k_edit or r50k_base.
func NewTokenCounter(encoding string) (*TokenCounter, error) {
	if encoding == "" {
		encoding = DefaultEncoding
	}
	codec, err := tokenizer.Get(tokenizer.Encoding(encoding))
	if err != nil {
		return nil, fmt.Errorf("token encoding %q: %w (expected cl100k_base, o200k_base, p50k_base, p50k_edit or r50k_base)", encoding, err)
	}
	// The default error mode tokenizes invalid UTF-8 as raw bytes instead
	// of failing; the counter is never switched to another mode, so reads
	// of the codec are race-free.
	return &TokenCounter{codec: codec, encoding: encoding}, nil
}

// Encoding returns the counter's encoding name, or "estimate" for a nil
// counter.
func (tc *TokenCounter) Encoding() string {
	if tc == nil {
		return "estimate"
	}
	return tc.encoding
}

// Count returns the number of tokens of s. It falls back to EstimateTokens
// if the tokenizer fails, so it never returns an error.
func (tc *TokenCounter) Count(s string) int {
	if s == "" {
		return 0
	}
	if tc == nil {
		return EstimateTokens(s)
	}
	n, err := tc.codec.Count(s)
	if err != nil {
		return EstimateTokens(s)
	}
	return n
}

// CountMessage returns the tokens one message costs in a chat request:
// TokensPerMessage, its role, content and name (plus TokensPerName), and
// for each tool call TokensPerToolCall plus the function name and
// arguments. The reply priming is not included (see CountMessages).
func (tc *TokenCounter) CountMessage(m request.Message) int {
	return tokMessage(m, tc.Count)
}

// CountMessages returns the prompt tokens of a chat request made of msgs:
// the sum of CountMessage plus TokensReplyPriming. An empty list costs 0.
func (tc *TokenCounter) CountMessages(msgs []request.Message) int {
	return tokMessages(msgs, tc.Count)
}

// EstimateTokens is a cheap token estimate that needs no tokenizer, for
// code that must not pay for one (the simulator, quick size checks). It
// counts 1.2 tokens per CJK character (rounded up over the text), one per
// other non-ASCII character, one per five letters or digits of an ASCII
// word (rounded up per word) and one per two characters of a run of ASCII
// punctuation. On English prose, JSON, code and Chinese text it stays
// within about -10 % … +30 % of cl100k_base, erring high.
func EstimateTokens(s string) int {
	n, cjk, word, punct := 0, 0, 0, 0
	flush := func() {
		n += (word+4)/5 + (punct+1)/2
		word, punct = 0, 0
	}
	for _, r := range s {
		switch {
		case r >= utf8.RuneSelf:
			flush()
			switch {
			case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
				cjk++
			case !unicode.IsSpace(r):
				n++
			}
		case tokIsASCIIAlnum(r):
			if punct > 0 {
				flush()
			}
			word++
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f':
			flush()
		default:
			if word > 0 {
				flush()
			}
			punct++
		}
	}
	flush()
	return n + (cjk*6+4)/5
}

// EstimateMessages is CountMessages with EstimateTokens instead of a
// tokenizer.
func EstimateMessages(msgs []request.Message) int {
	return tokMessages(msgs, EstimateTokens)
}

func tokIsASCIIAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func tokMessage(m request.Message, count func(string) int) int {
	n := TokensPerMessage + count(m.Role) + count(m.Content)
	if m.Name != "" {
		n += TokensPerName + count(m.Name)
	}
	for _, call := range m.ToolCalls {
		n += TokensPerToolCall + count(call.Function.Name) + count(call.Function.Arguments)
	}
	return n
}

func tokMessages(msgs []request.Message, count func(string) int) int {
	if len(msgs) == 0 {
		return 0
	}
	n := TokensReplyPriming
	for _, m := range msgs {
		n += tokMessage(m, count)
	}
	return n
}
