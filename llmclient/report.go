package llmclient

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/durable-llm/durable-llm/workflows"
)

// WriteReport prints a call's answer, source and attempt table for people.
func WriteReport(w io.Writer, res workflows.CallResult) error {
	if text := strings.TrimSpace(res.Content); text != "" || len(res.ToolCalls) == 0 {
		fmt.Fprintf(w, "%s\n\n", text)
	}
	for _, c := range res.ToolCalls {
		// A tool call is the answer an agent acts on.
		fmt.Fprintf(w, "tool call %s: %s(%s)\n", c.ID, c.Function.Name, c.Function.Arguments)
	}
	if len(res.ToolCalls) > 0 {
		fmt.Fprintln(w)
	}
	src := string(res.Source)
	if res.Model != "" {
		src += " (" + res.Model + ")"
	}
	if res.Degraded {
		src += " · degraded"
	}
	if res.FAQID != "" {
		src += " · faq " + res.FAQID
	}
	if res.RuleID != "" {
		src += " · rule " + res.RuleID
	}
	if res.Flag != "" {
		src += " · flag " + res.Flag
	}
	fmt.Fprintf(w, "source:   %s\n", src)
	if res.Reason != "" {
		fmt.Fprintf(w, "reason:   %s\n", res.Reason)
	}
	fmt.Fprintf(w, "tokens:   prompt %d · completion %d · spent on failed attempts %d",
		res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.FailedAttemptTokens)
	if d := res.Usage.DuplicatePromptTokens; d > 0 {
		fmt.Fprintf(w, " · sent again %d", d)
	}
	fmt.Fprintln(w)
	if res.Review != "" {
		fmt.Fprintf(w, "review:   %s (starter review approve|reject %s)\n", res.Review, res.RequestID)
	}
	for i, s := range res.Steps {
		fmt.Fprintf(w, "step %d:   %s · %s %s\n", i+1, s.CallID, s.Source, s.Model)
	}
	fmt.Fprintf(w, "call:     %s\n\n", res.RequestID)
	return WriteAttempts(w, res.Attempts)
}

// WriteAttempts prints the attempt table.
func WriteAttempts(w io.Writer, attempts []workflows.Attempt) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tMODEL\tCLASS\tHTTP\tTIME\tMSGS\tTOKENS\tDECISION\tWAIT\tREASON")
	for _, a := range attempts {
		class := a.Class
		if class == "" {
			class = "ok"
		}
		status := "–"
		if a.Status > 0 {
			status = fmt.Sprint(a.Status)
		}
		wait := "–"
		if a.DelayMS > 0 {
			wait = fmt.Sprintf("%d ms", a.DelayMS)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d ms\t%d\t%d\t%s\t%s\t%s\n",
			a.N, a.Model, class, status, a.DurationMS, a.Messages, a.PromptTokens, a.Decision, wait, a.Reason)
	}
	return tw.Flush()
}
