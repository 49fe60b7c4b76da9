package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// The context refiner benchmark (docs/how-it-works.md "Context refiner") runs the same
// llmsim script under today's action and the refiner's, side by side:
//
//   - output_truncated: an answer of Tokens tokens under the policy's
//     limit MaxTokens (limits.default_max_tokens), under bump_tokens (regenerate with 256 more) and continue
//     (ask for the missing part only): attempts, and the prompt and
//     completion tokens billed per call (every attempt, failed ones
//     included, as llmsim's usage says);
//   - context_length_exceeded: a long conversation with a fact planted in
//     a middle round and a question that asks for it, refused over a
//     window, under prune_resend without and with summarize: the retry's
//     prompt tokens, what the summary cost, and whether the answer still
//     holds the fact.

// RefinerOptions configure RunRefiner.
type RefinerOptions struct {
	// Temporal is a client of the dev server (required).
	Temporal client.Client
	// Truncations are the output_truncated cases; default
	// DefaultTruncations.
	Truncations []TruncationCase
	// Rounds of the long conversation (default 12), its context window
	// (default 1300 tokens) and the rounds a prune keeps (3, the policy's).
	Rounds int
	Window int
}

// TruncationCase is one answer of Tokens tokens asked with MaxTokens.
type TruncationCase struct {
	Tokens, MaxTokens int
}

// DefaultTruncations: answers a little, twice and three times longer than
// the max_tokens they were asked with.
var DefaultTruncations = []TruncationCase{{Tokens: 400, MaxTokens: 300}, {Tokens: 600, MaxTokens: 300}, {Tokens: 900, MaxTokens: 300}}

// TruncationRow is one case under one action.
type TruncationRow struct {
	Case     TruncationCase
	Action   config.Action
	Attempts int
	// Prompt and Completion are the tokens billed for the call (failed
	// attempts included); Complete: the answer is the whole answer.
	Prompt, Completion int
	Complete           bool
	Decisions          []string
}

// Billed is the row's prompt + completion tokens.
func (r TruncationRow) Billed() int { return r.Prompt + r.Completion }

// SummaryRow is the long conversation under one prune_resend.
type SummaryRow struct {
	Summarize bool
	// FullPrompt is the refused first attempt's prompt tokens; Retry the
	// answering attempt's; Summary what the summary's request cost
	// (prompt + completion), Dropped and Replacement the tokens of the
	// dropped rounds and of the summary message that replaced them.
	FullPrompt, Retry, Summary int
	Dropped, Replacement       int
	// Recalled: the answer holds the fact planted in a dropped round.
	Recalled bool
	// SecondCallSummaries: summary requests llmsim saw for the session's
	// second call (0: it reused the first call's summary).
	SecondCallSummaries int
	SecondRecalled      bool
	Decisions           []string
}

// RefinerReport is the benchmark's result.
type RefinerReport struct {
	Truncations []TruncationRow
	Summaries   []SummaryRow
}

// RunRefiner runs both halves of the benchmark, each contender on a
// worker and llmsim of its own.
func RunRefiner(ctx context.Context, o RefinerOptions) (*RefinerReport, error) {
	if len(o.Truncations) == 0 {
		o.Truncations = DefaultTruncations
	}
	o.Rounds, o.Window = orDefault(o.Rounds, 12), orDefault(o.Window, 1300)
	rep := &RefinerReport{}
	for _, action := range []config.Action{config.ActionBumpTokens, config.ActionContinue} {
		rows, err := runTruncations(ctx, o, action)
		if err != nil {
			return nil, err
		}
		rep.Truncations = append(rep.Truncations, rows...)
	}
	for _, on := range []bool{false, true} {
		row, err := runSummary(ctx, o, on)
		if err != nil {
			return nil, err
		}
		rep.Summaries = append(rep.Summaries, row)
	}
	return rep, nil
}

func instantSim() (*llmsim.Server, error) {
	return llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{Name: "instant", Models: llmsim.InstantModels()}})
}

func runTruncations(ctx context.Context, o RefinerOptions, action config.Action) ([]TruncationRow, error) {
	sim, err := instantSim()
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	// The limit is the policy's (limits.default_max_tokens, sent when the
	// request sets none): a caller's own max_tokens reached is an answer,
	// never output_truncated.
	limit := 0
	for _, tc := range o.Truncations {
		if limit != 0 && tc.MaxTokens != limit {
			return nil, fmt.Errorf("refiner: every truncation case needs the same MaxTokens (the policy's default limit), got %d and %d", limit, tc.MaxTokens)
		}
		limit = tc.MaxTokens
	}
	lc, _, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{Mutate: func(c *config.Config) {
		cp := c.Classes[failure.OutputTruncated]
		cp.Action = action
		c.Classes[failure.OutputTruncated] = cp
		c.Limits.DefaultMaxTokens = limit
	}})
	if err != nil {
		return nil, err
	}
	defer stop()
	run := randomID()
	var rows []TruncationRow
	for i, tc := range o.Truncations {
		req := DurableRequest(run, i, 60*time.Second)
		q := fmt.Sprintf("Explain the delivery options in detail, case %d.", i)
		req.Messages[len(req.Messages)-1].Content = fmt.Sprintf("[[sim tokens=%d]] %s", tc.Tokens, q)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		res, err := lc.Call(cctx, req)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("refiner: %s, %d tokens: %w", action, tc.Tokens, err)
		}
		row := TruncationRow{Case: tc, Action: action, Decisions: res.Decisions()}
		for _, g := range sim.Generations(res.RequestID) {
			row.Attempts++
			row.Prompt += g.PromptTokens
			row.Completion += g.CompletionTokens
		}
		row.Complete = res.Content == llmsim.AnswerTokens("qwen-72b", q, tc.Tokens)
		rows = append(rows, row)
	}
	return rows, nil
}

// fact is what the long conversation plants in a middle round.
const fact = "ZX-4711"

// LongConversation is the benchmark's long conversation: rounds rounds of
// filler (no names, no numbers), the fourth telling the order number, and
// a question about it that the first model refuses over window tokens.
func LongConversation(run string, rounds, window int, question string) workflows.CallRequest {
	req := DurableRequest(run, 0, 60*time.Second)
	req.Messages = req.Messages[:1]
	long := strings.Repeat("the parcel was handed to the courier and scanned at the depot. ", 8)
	for i := range rounds {
		u := "about my parcel: " + long
		if i == 3 {
			u = "My order number is " + fact + " and it was paid on 3 May. " + u
		}
		req.Messages = append(req.Messages,
			request.Message{Role: request.RoleUser, Content: u},
			request.Message{Role: request.RoleAssistant, Content: "noted: " + long})
	}
	req.Messages = append(req.Messages, request.Message{Role: request.RoleUser, Content: fmt.Sprintf(
		"[[sim fault=context_length_exceeded window=%d times=always model=qwen-72b]] [[sim recall=%s]] %s", window, fact, question)})
	return req
}

func runSummary(ctx context.Context, o RefinerOptions, on bool) (SummaryRow, error) {
	row := SummaryRow{Summarize: on}
	sim, err := instantSim()
	if err != nil {
		return row, err
	}
	defer sim.Close()
	lc, _, stop, err := startDurableWorker(o.Temporal, sim.BaseURL, DurableOptions{Mutate: func(c *config.Config) {
		cp := c.Classes[failure.ContextLengthExceeded]
		cp.Summarize = on
		c.Classes[failure.ContextLengthExceeded] = cp
	}})
	if err != nil {
		return row, err
	}
	defer stop()
	req := LongConversation(randomID(), o.Rounds, o.Window, "What was my order number?")
	call := func(req workflows.CallRequest) (workflows.CallResult, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return lc.Call(cctx, req)
	}
	res, err := call(req)
	if err != nil {
		return row, fmt.Errorf("refiner: summarize %v: %w", on, err)
	}
	row.Decisions = res.Decisions()
	if n := len(res.Attempts); n > 0 {
		row.FullPrompt, row.Retry = res.Attempts[0].PromptTokens, res.Attempts[n-1].PromptTokens
	}
	for _, g := range sim.Generations(res.RequestID) {
		switch {
		case g.Summary:
			row.Summary += g.PromptTokens + g.CompletionTokens
		case g.Recall != "":
			row.Recalled = g.Recalled
		}
	}
	fmt.Sscanf(reasonAfter(res, "context refiner: "), "%d → %d tokens", &row.Dropped, &row.Replacement)

	// The session's next call: one more round, the same question.
	next := req
	next.Messages = append(append([]request.Message{}, req.Messages[:len(req.Messages)-1]...),
		request.Message{Role: request.RoleUser, Content: "When will it arrive?"},
		request.Message{Role: request.RoleAssistant, Content: "soon."},
		req.Messages[len(req.Messages)-1])
	res2, err := call(next)
	if err != nil {
		return row, fmt.Errorf("refiner: summarize %v, second call: %w", on, err)
	}
	for _, g := range sim.Generations(res2.RequestID) {
		switch {
		case g.Summary:
			row.SecondCallSummaries++
		case g.Recall != "":
			row.SecondRecalled = g.Recalled
		}
	}
	return row, nil
}

// reasonAfter is what follows marker's text in the reasons of res's
// attempts ("" when none has it), up to the next "; ".
func reasonAfter(res workflows.CallResult, marker string) string {
	for _, a := range res.Attempts {
		if _, rest, ok := strings.Cut(a.Reason, marker); ok {
			rest, _, _ = strings.Cut(rest, "; ")
			// "llama-8b summarized 9 round(s), 2210 → 60 tokens"
			if _, nums, ok := strings.Cut(rest, ", "); ok {
				return nums
			}
		}
	}
	return ""
}

// Markdown writes the report's two tables.
func (r *RefinerReport) Markdown() string {
	var b strings.Builder
	b.WriteString("### output_truncated: bump_tokens vs continue (tokens billed per call)\n\n")
	b.WriteString("| answer / max_tokens | action | attempts | prompt | completion | billed | complete | billed vs bump_tokens | completion vs bump_tokens |\n|---|---|---|---|---|---|---|---|---|\n")
	base := map[TruncationCase]TruncationRow{}
	for _, row := range r.Truncations {
		if row.Action == config.ActionBumpTokens {
			base[row.Case] = row
		}
	}
	for _, row := range r.Truncations {
		ratio, cratio := "1.00", "1.00"
		if bt, ok := base[row.Case]; ok && row.Action != config.ActionBumpTokens {
			ratio = fmt.Sprintf("%.2f", float64(row.Billed())/float64(max(bt.Billed(), 1)))
			cratio = fmt.Sprintf("%.2f", float64(row.Completion)/float64(max(bt.Completion, 1)))
		}
		fmt.Fprintf(&b, "| %d / %d | %s | %d | %d | %d | %d | %v | %s | %s |\n", row.Case.Tokens, row.Case.MaxTokens, row.Action,
			row.Attempts, row.Prompt, row.Completion, row.Billed(), row.Complete, ratio, cratio)
	}
	b.WriteString("\n### context_length_exceeded: prune_resend without and with summarize\n\n")
	b.WriteString("| summarize | full prompt (refused) | retry prompt | summary request | dropped rounds → summary | fact in the answer | 2nd call: summary requests | 2nd call: fact |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Summaries {
		drop := "–"
		if row.Dropped > 0 {
			drop = fmt.Sprintf("%d → %d tokens (%.0f %% smaller)", row.Dropped, row.Replacement, 100*(1-float64(row.Replacement)/float64(row.Dropped)))
		}
		fmt.Fprintf(&b, "| %v | %d | %d | %d | %s | %v | %d | %v |\n", row.Summarize, row.FullPrompt, row.Retry, row.Summary, drop,
			row.Recalled, row.SecondCallSummaries, row.SecondRecalled)
	}
	return b.String()
}
