package prompt

import (
	"math"

	"github.com/durable-llm/durable-llm/policies/request"
)

// DefaultPruneFactor is the share of the middle history each pruning stage
// keeps of the previous one (docs/how-it-works.md "Failure classes": attempt n keeps 0.5^n).
const DefaultPruneFactor = 0.5

// LastPruneStage is the stage from which PruneForAttempt keeps only the
// system part and the current question: with the default factor the
// stages are full history, 1/2, 1/4, none.
const LastPruneStage = 3

// PruneResult is a pruned conversation and what was taken out of it.
type PruneResult struct {
	// Messages is the prompt to send: copies of the kept messages, in order.
	Messages []request.Message
	// Removed are copies of the removed messages, in order.
	Removed []request.Message
	// Rounds is the number of rounds in the middle history before pruning;
	// RemovedRounds how many of them were removed (the oldest ones).
	Rounds        int
	RemovedRounds int
	// Before and After are message counts of the input and of Messages.
	Before, After int
	// Tokens is the prompt token count of Messages (set by FitWindow only).
	Tokens int
	// Fits reports whether Messages plus the reserve fit the window. Only
	// FitWindow knows a window; the other functions always set it to true.
	Fits bool
}

// Changed reports whether any message was removed.
func (r PruneResult) Changed() bool { return len(r.Removed) > 0 }

// PruneForAttempt prunes the history for the given pruning stage. Stage 0
// (or less) sends the full history. Stage n keeps the newest
// ceil(factor^n · rounds) whole rounds of the middle history; when
// factor^n · rounds rounds to 0 (is below 0.5), or stage ≥ LastPruneStage,
// only the system part and the current question are kept. factor outside
// (0, 1] means DefaultPruneFactor.
func PruneForAttempt(msgs []request.Message, stage int, factor float64) PruneResult {
	l := pruneParse(msgs)
	n := len(l.starts)
	switch {
	case stage <= 0:
		return l.keepNewest(n)
	case stage >= LastPruneStage:
		return l.keepNewest(0)
	}
	if !(factor > 0 && factor <= 1) {
		factor = DefaultPruneFactor
	}
	x := math.Pow(factor, float64(stage)) * float64(n)
	keep := 0
	if x >= 0.5 {
		// The epsilon keeps float noise (5.000000001) from keeping a round more.
		keep = int(math.Ceil(x - 1e-9))
	}
	return l.keepNewest(keep)
}

// PruneKeepRounds keeps the system part, the newest n rounds of the middle
// history and the current question (the context_length_exceeded action:
// docs/how-it-works.md "Failure classes" keeps 3). n ≤ 0 keeps no round.
func PruneKeepRounds(msgs []request.Message, n int) PruneResult {
	return pruneParse(msgs).keepNewest(n)
}

// FitWindow removes the oldest whole rounds until the prompt's tokens plus
// reserve (kept free for the answer) fit in window tokens, counting with tc
// (nil: EstimateTokens). It never cuts the system part or the current
// question: if they alone do not fit, Messages holds just them and Fits is
// false, so the caller can refuse the model instead of sending a prompt the
// upstream will reject. window ≤ 0 means unknown: nothing is removed.
// Result.Tokens is the prompt token count of Messages.
func FitWindow(msgs []request.Message, window, reserve int, tc *TokenCounter) PruneResult {
	l := pruneParse(msgs)
	n := len(l.starts)
	reserve = max(reserve, 0)

	tokens := make([]int, len(msgs))
	total := 0
	for i, m := range msgs {
		tokens[i] = tc.CountMessage(m)
		total += tokens[i]
	}
	if len(msgs) > 0 {
		total += TokensReplyPriming
	}
	keep := n
	if window > 0 {
		for keep > 0 && total+reserve > window {
			start, end := l.round(n - keep)
			for i := start; i < end; i++ {
				total -= tokens[i]
			}
			keep--
		}
	}
	res := l.keepNewest(keep)
	if res.After == 0 {
		total = 0
	}
	res.Tokens = total
	res.Fits = window <= 0 || total+reserve <= window
	return res
}

// pruneLayout is a conversation split into system part, rounds and the
// kept tail.
type pruneLayout struct {
	msgs []request.Message
	// sysEnd: msgs[:sysEnd] is the system part.
	sysEnd int
	// tail: msgs[tail:] is always kept (the current question and any rounds
	// pinned to it by a tool call).
	tail int
	// starts are the first indexes of the rounds, oldest first; round i
	// ends where round i+1 starts, the last one at tail.
	starts []int
}

func pruneParse(msgs []request.Message) pruneLayout {
	l := pruneLayout{msgs: msgs}
	for l.sysEnd < len(msgs) && msgs[l.sysEnd].Instructs() {
		l.sysEnd++
	}
	current := len(msgs)
	for i := len(msgs) - 1; i >= l.sysEnd; i-- {
		if msgs[i].Role == request.RoleUser {
			current = i
			break
		}
	}

	// A cut before index b (keep msgs[b:]) is forbidden when a tool message
	// at or after b answers a call made before b. crossing[b] > 0 marks
	// forbidden cuts; it is built as a difference array over the links.
	crossing := make([]int, len(msgs)+2)
	callAt := make(map[string]int)
	for i, m := range msgs {
		if i < l.sysEnd {
			continue
		}
		switch m.Role {
		case request.RoleAssistant:
			for _, c := range m.ToolCalls {
				if c.ID != "" {
					callAt[c.ID] = i
				}
			}
		case request.RoleTool:
			if c, ok := callAt[m.ToolCallID]; ok && m.ToolCallID != "" {
				crossing[c+1]++
				crossing[i+1]--
			}
		}
	}
	for i := 1; i < len(crossing); i++ {
		crossing[i] += crossing[i-1]
	}
	allowed := func(b int) bool { return crossing[b] == 0 }

	// The tail starts at the current question, or earlier when a tool link
	// pins rounds to it.
	l.tail = current
	for l.tail > l.sysEnd && !allowed(l.tail) {
		l.tail--
		for l.tail > l.sysEnd && msgs[l.tail].Role != request.RoleUser {
			l.tail--
		}
	}
	for b := l.sysEnd; b < l.tail; b++ {
		if (b == l.sysEnd || msgs[b].Role == request.RoleUser) && allowed(b) {
			l.starts = append(l.starts, b)
		}
	}
	return l
}

// round returns the index range of round i.
func (l pruneLayout) round(i int) (start, end int) {
	start, end = l.starts[i], l.tail
	if i+1 < len(l.starts) {
		end = l.starts[i+1]
	}
	return start, end
}

// keepNewest keeps the system part, the newest k rounds and the tail.
func (l pruneLayout) keepNewest(k int) PruneResult {
	n := len(l.starts)
	k = min(max(k, 0), n)
	cut := l.tail
	if k > 0 {
		cut = l.starts[n-k]
	}
	res := PruneResult{
		Rounds:        n,
		RemovedRounds: n - k,
		Before:        len(l.msgs),
		Fits:          true,
	}
	res.Messages = make([]request.Message, 0, l.sysEnd+len(l.msgs)-cut)
	res.Messages = pruneAppendCopies(res.Messages, l.msgs[:l.sysEnd])
	res.Messages = pruneAppendCopies(res.Messages, l.msgs[cut:])
	if cut > l.sysEnd {
		res.Removed = pruneAppendCopies(make([]request.Message, 0, cut-l.sysEnd), l.msgs[l.sysEnd:cut])
	}
	res.After = len(res.Messages)
	return res
}

// pruneAppendCopies appends copies of src to dst; tool calls are copied too
// so the result shares no slice with the input.
func pruneAppendCopies(dst, src []request.Message) []request.Message {
	for _, m := range src {
		dst = append(dst, pruneCopy(m))
	}
	return dst
}

func pruneCopy(m request.Message) request.Message {
	if m.ToolCalls != nil {
		m.ToolCalls = append([]request.ToolCall(nil), m.ToolCalls...)
	}
	return m
}
