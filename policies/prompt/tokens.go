package prompt

import (
	"fmt"

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
	// TokensPerImage is what one image part is counted as: OpenAI's cost
	// of a 512×512 tile at high detail plus the base (85 + 170·4 = 765),
	// an upper bound for most images a chat sends; low detail costs 85.
	TokensPerImage    = 765
	TokensPerLowImage = 85
)

// imageTokens counts the image parts of m.
func imageTokens(m request.Message) int {
	n := 0
	for _, p := range m.Parts {
		if p.Type == request.PartImageURL {
			if p.ImageURL != nil && p.ImageURL.Detail == "low" {
				n += TokensPerLowImage
			} else {
				n += TokensPerImage
			}
		}
	}
	return n
}

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
	// roles holds the token counts of the standard roles; bounded says
	// the estimate bounds (estUpper, estLower) were measured for this
	// encoding, so Fit may decide on estimates.
	roles   [5]int
	bounded bool
	// tight says estLower holds (cl100k_base); o200k_base spends far fewer
	// tokens on Chinese and other scripts, so only estFloor does.
	tight bool
}

var tokRoles = [5]string{request.RoleSystem, request.RoleDeveloper, request.RoleUser, request.RoleAssistant, request.RoleTool}

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
	tc := &TokenCounter{codec: codec, encoding: encoding}
	for i, r := range tokRoles {
		tc.roles[i] = tc.Count(r)
	}
	tc.bounded = encoding == "cl100k_base" || encoding == "o200k_base"
	tc.tight = encoding == "cl100k_base"
	return tc, nil
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

// roleTokens returns the tokens of a role: from the table for the
// standard ones, else counted.
func (tc *TokenCounter) roleTokens(role string) int {
	if tc != nil {
		for i, r := range tokRoles {
			if r == role {
				return tc.roles[i]
			}
		}
	}
	return tc.Count(role)
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

// EstimateTokens is a cheap token estimate that needs no tokenizer (about
// 1–2 ns per byte, a few hundred times cheaper than the tokenizer), for
// code that must not pay for one: Fit, the simulator, quick size checks.
// It follows cl100k_base's pre-tokenizer and charges each piece what
// cl100k_base spends on such pieces, erring high ("Token estimate" in the
// package documentation lists the charges). TestEstimateTokensBounds
// measures it against cl100k_base on a corpus of text classes and checks
// the bounds Fit relies on (EstimateUpper, EstimateLower).
func EstimateTokens(s string) int {
	return (estimateUnits(s) + estUnit - 1) / estUnit
}

// EstimateMessages is CountMessages with EstimateTokens instead of a
// tokenizer.
func EstimateMessages(msgs []request.Message) int {
	return tokMessages(msgs, EstimateTokens)
}

func tokMessage(m request.Message, count func(string) int) int {
	n := TokensPerMessage + count(m.Role) + count(m.Text()) + imageTokens(m)
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
