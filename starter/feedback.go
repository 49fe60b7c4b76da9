package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/durable-llm/durable-llm/workflows"
)

// feedbackCmd is `starter feedback <call id> <outcome>`: what the user did
// after a call, for the rules' learner (docs/rules.md "Rules that learn from users").
func feedbackCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("feedback", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print what the learner recorded as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("feedback: a call ID and an outcome are required: starter feedback <call id> resolved|abandoned|handoff_requested|complaint")
	}
	lc, ctx, done, err := dialWithin(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	defer done()
	res, err := lc.Feedback(ctx, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return fmt.Errorf("feedback: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	writeFeedback(out, res)
	return nil
}

// writeFeedback words what a feedback did.
func writeFeedback(out io.Writer, res workflows.FeedbackResult) {
	switch {
	case res.Duplicate:
		fmt.Fprintf(out, "call %s already has feedback (%s): not counted again\n", res.CallID, res.Previous)
		return
	case len(res.Counted) == 0 && len(res.Unknown) == 0:
		fmt.Fprintf(out, "%s recorded for call %s: no rule matched it, nothing to learn\n", res.Outcome, res.CallID)
		return
	}
	fmt.Fprintf(out, "%s recorded for call %s (scenario %s):\n", res.Outcome, res.CallID, res.Scenario)
	for _, c := range res.Counted {
		how := "matched in shadow (off)"
		if c.Fired {
			how = "fired"
		}
		fmt.Fprintf(out, "  %s %s: %s, now %s\n", c.Rule, how, c.Judgment, c.State)
	}
	for _, id := range res.Unknown {
		fmt.Fprintf(out, "  %s: not in the workers' policy for this scenario, not counted\n", id)
	}
	for _, c := range res.Changes {
		fmt.Fprintf(out, "  changed %s\n", c)
	}
}

// rulesCmd is `starter rules [--scenario S]`: every learner's rules, their
// precision and state.
func rulesCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	scenario := fs.String("scenario", "", "only this scenario's learner (default: every running learner)")
	asJSON := fs.Bool("json", false, "print the learners' records as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lc, ctx, done, err := dialWithin(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	defer done()
	var views []workflows.RulesView
	if *scenario != "" {
		v, err := lc.Rules(ctx, *scenario)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			return fmt.Errorf("rules: no learner for scenario %q yet (%s): it starts with the first feedback on a call a rule matched; until then every rule is on",
				*scenario, workflows.LearnerID(*scenario))
		case err != nil:
			return fmt.Errorf("rules: %w", err)
		}
		views = append(views, v)
	} else if views, err = lc.AllRules(ctx); err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	}
	return writeRules(out, views)
}

// writeRules prints the learners' rules as a table, then why each rule
// that changed or that is pinned below its threshold is in its state.
func writeRules(out io.Writer, views []workflows.RulesView) error {
	if len(views) == 0 {
		_, err := fmt.Fprintln(out, "no rules learner runs yet: every rule is on (learners start with the first feedback: starter feedback <call id> <outcome>)")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRULE\tSTATE\tPRECISION\tTHRESHOLD\tWINDOW\tFEEDBACKS\tFIRED\tSHADOW\tCHANGES")
	var notes []string
	for _, v := range views {
		for _, r := range v.Rules {
			state := r.State
			if r.Below {
				state += " (below)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%d/%d\t%d\t%d\t%d\t%d\n", v.Scenario, r.ID, state, r.Precision, r.Threshold,
				r.Window, v.MinFeedback, r.Feedbacks, r.Fired, r.Shadow, r.Changes)
			if r.Changes > 0 || r.Below {
				notes = append(notes, fmt.Sprintf("%s/%s %s since %s: %s", v.Scenario, r.ID, r.State, r.ChangedAt.Format(time.RFC3339), r.Reason))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, strings.Join(notes, "\n"))
	}
	fmt.Fprintln(out, "\nPRECISION is (good+1)/(good+bad+2) over the last WINDOW feedbacks: on calls the rule fired on while on or pinned, in shadow while off.")
	return nil
}
