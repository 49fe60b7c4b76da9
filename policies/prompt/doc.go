// Package prompt shapes the conversation one attempt sends: it prunes whole
// rounds from the middle of a long history (PruneForAttempt,
// PruneKeepRounds, FitWindow), fits a prompt to a model's context window
// counting tokens exactly only where an estimate cannot decide (Fit,
// TokenCounter, EstimateTokens), adapts the system prompt to what a model
// supports (AdaptMessages) and builds the context refiner's summary
// message (SummaryMessage, DroppedRounds).
//
// Invariants:
//   - No Temporal import; besides the standard library it imports the
//     config and request packages and an offline tokenizer whose
//     vocabularies are embedded: nothing is downloaded.
//   - No clock, no randomness, no logging; its functions never mutate
//     their input. A TokenCounter is built once per process and is safe for
//     concurrent use.
//
// # Pruning
//
// Pruning removes whole rounds from the middle of a conversation so that a
// retry sends a smaller prompt (a prompt whose prefill is too slow
// only times out again when resent unchanged).
//
// A conversation is read as three parts:
//
//	system   the system and developer messages at the very start
//	middle   the history: rounds, oldest first
//	current  the last user message (the current question) and whatever
//	         follows it (normally nothing)
//
// A round is a user message together with the assistant and tool messages
// that answer it, up to the next user message. Messages between the system
// part and the first user message form a round of their own. Rounds that
// share a tool call (an assistant message with tool_calls in one round, a
// tool message with that tool_call_id in a later one, as in malformed
// histories) are one round, so a call and its results are always kept or
// removed together; if such a link reaches into the current question, the
// rounds it spans are kept with the question. A tool message whose call is
// nowhere before it (an orphan) stays in the round it sits in and is
// removed with that round.
//
// The system part and the current question are never removed. Pruning never
// changes a kept message and never mutates its input.
//
// # Fitting
//
// Fit decides which messages one attempt sends:
//
//  1. The stage (or KeepRounds) caps the rounds kept, as PruneForAttempt
//     and PruneKeepRounds do.
//  2. With a known window, the oldest whole rounds are dropped until the
//     prompt fits: Tokens + Reserve ≤ Window, where Tokens is an upper
//     bound (estUpper) until the messages are counted. Fit never sends a
//     prompt whose upper bound exceeds the window, so an estimate never
//     pushes a prompt over it.
//  3. The price is pruning more than needed. Between the newest round
//     count that surely fits (upper bounds) and the one that may fit
//     (lower bounds), Fit counts messages exactly, largest uncertainty
//     first, within 1/fitExactShare of the prompt's estimated tokens;
//     what is still open then is decided by the upper bound.
//  4. If the system part and the current question alone may not fit, they
//     are counted exactly (whatever the budget): Fits is false only when
//     they really do not fit (or their floor already exceeds the window),
//     and then Keep holds just them.
//
// The adapted prompt is what is measured: with partial or none support
// the system messages cost their text and a joiner instead of a message.
// Wrapping the question in the system prompt as a role (WrapQuestion,
// English or Chinese; several system texts joined by "\n\n") adds between
// -2 and 10 tokens beyond the two texts and one token, as measured.
//
// # Token estimate
//
// EstimateTokens follows cl100k_base's pre-tokenizer and charges each
// piece what cl100k_base spends on such pieces, erring high:
//
//   - ASCII letter runs are split into sub-words at case changes
//     (getOrderStatus: get, Order, Status; HTTPServer: HTTP, Server), each
//     charged by its length (1 token up to 4 letters, about length/4 for
//     long ones, length/2.5 for capitals), plus one token for each letter
//     pair that is rare inside cl100k_base's words (random strings, base64,
//     hashes and foreign words split at such pairs);
//   - a run of ASCII digits costs one token per three digits (exact: the
//     pre-tokenizer splits digits into groups of 1–3);
//   - a run of ASCII punctuation costs about one token per two characters;
//     a single one right before a letter joins the word;
//   - whitespace costs one token per newline piece and per indentation,
//     more for long or mixed runs; a space before a word is free;
//   - every other character costs what it costs alone (a generated table of
//     cl100k_base counts for U+0080–U+FFFF: most Chinese characters 1–3,
//     accented letters 1–2), 3 for an emoji, 4 for other characters beyond
//     the BMP (their UTF-8 length, a hard bound).
//
// TestEstimateTokensBounds measures it against cl100k_base on a corpus of
// text classes (English prose, code, JSON, Chinese, mixed, emoji, digit,
// punctuation and whitespace runs, base64, other scripts) and checks the
// bounds Fit relies on (EstimateUpper, EstimateLower).
package prompt
