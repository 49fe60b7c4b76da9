package prompt

import (
	"fmt"
	"strings"

	"github.com/durable-llm/durable-llm/policies/request"
)

// The context refiner (docs/how-it-works.md "Context refiner") replaces the rounds a
// prune drops with one marked message that summarises them, so that a
// retry after context_length_exceeded keeps their facts in far fewer
// tokens. The summary message is a system message placed right after the
// system part, where pruning never cuts; it starts with SummaryMark, by
// which AdaptMessages sends it as a user message to a model that takes no
// (or a partial) system role.

// SummaryMark starts the content of a context summary message.
const SummaryMark = "[Context summary]"

// IsSummary reports whether m is a context summary message (SummaryMessage).
func IsSummary(m request.Message) bool {
	return (m.Role == request.RoleSystem || m.Role == request.RoleUser) && strings.HasPrefix(m.Content, SummaryMark)
}

// SummaryMessage is the message that stands for rounds earlier rounds of
// the conversation: their summary, written by model.
func SummaryMessage(summary string, rounds int, model string) request.Message {
	return request.Message{Role: request.RoleSystem, Content: fmt.Sprintf(
		"%s The %d earlier round(s) of this conversation were left out to fit the context window; %s summarised them:\n%s",
		SummaryMark, rounds, model, strings.TrimSpace(summary))}
}

// Dropped is what keeping only the newest keep rounds of a conversation
// leaves out: msgs[From:To], Rounds whole rounds right after the system
// part (none when From == To).
type Dropped struct {
	From, To int
	Rounds   int
}

// DroppedRounds is what PruneKeepRounds(msgs, keep) removes, by index. A
// summary already in the system part (a refined conversation) is not a
// round and is never dropped.
func DroppedRounds(msgs []request.Message, keep int) Dropped {
	l := pruneParse(msgs)
	n := len(l.starts)
	keep = min(max(keep, 0), n)
	cut := l.tail
	if keep > 0 {
		cut = l.starts[n-keep]
	}
	return Dropped{From: l.sysEnd, To: cut, Rounds: n - keep}
}

// Refine returns msgs with msgs[d.From:d.To] replaced by summary: a new
// slice of copies, msgs untouched.
func Refine(msgs []request.Message, d Dropped, summary request.Message) []request.Message {
	out := make([]request.Message, 0, len(msgs)-(d.To-d.From)+1)
	out = pruneAppendCopies(out, msgs[:d.From])
	out = append(out, summary)
	return pruneAppendCopies(out, msgs[d.To:])
}

// Transcript writes messages as the plain text a summarizer reads: one
// "role: text" paragraph per message, tool calls as "assistant calls
// name(arguments)", a message already a summary as it is.
func Transcript(msgs []request.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if t := strings.TrimSpace(m.Text()); t != "" {
			fmt.Fprintf(&b, "%s: %s\n\n", m.Role, t)
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "%s calls %s(%s)\n\n", m.Role, c.Function.Name, c.Function.Arguments)
		}
	}
	return strings.TrimSpace(b.String())
}
