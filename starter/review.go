package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/workflows"
)

const reviewUsage = `usage: starter review list
       starter review approve|reject [--reviewer NAME] [--note TEXT] <call id>

The risk reviews are RiskReview workflows (task queue llm-reviews) that a
business rule with review: true started; each waits for one decision.`

// reviewCmd lists the reviews waiting for a decision, or decides one.
func reviewCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(reviewUsage)
	}
	switch args[0] {
	case "list":
		return reviewList(ctx, args[1:], out)
	case workflows.DecisionApprove, workflows.DecisionReject:
		return reviewDecide(ctx, args[0], args[1:], out)
	}
	return fmt.Errorf("review: unknown subcommand %q\n%s", args[0], reviewUsage)
}

func reviewDecide(ctx context.Context, decision string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("review "+decision, flag.ContinueOnError)
	reviewer := fs.String("reviewer", os.Getenv("USER"), "who decides (recorded with the decision)")
	note := fs.String("note", "", "why (recorded with the decision)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("review %s: exactly one call ID is required\n%s", decision, reviewUsage)
	}
	id := workflows.ReviewID(workflows.ReviewCallID(fs.Arg(0)))
	d := workflows.ReviewDecision{Decision: decision, Reviewer: *reviewer, Note: *note}
	if err := workflows.ValidateDecision(d); err != nil {
		return fmt.Errorf("review %s: %w", decision, err)
	}
	lc, uctx, done, err := dialWithin(ctx, 15*time.Second)
	if err != nil {
		return err
	}
	defer done()
	h, err := lc.Temporal.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateReviewDecision, Args: []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res workflows.ReviewResult
	if err == nil {
		err = h.Get(uctx, &res)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// A decided review has ended: say how.
			var done workflows.ReviewResult
			if lc.Temporal.GetWorkflow(uctx, id, "").Get(uctx, &done) == nil && done.State != workflows.ReviewPending {
				return fmt.Errorf("review %s: call %s was already reviewed: %s", decision, done.CallID, done.Outcome())
			}
			return fmt.Errorf("review %s: no review %s is waiting (it was decided or expired, or the call's rule started none): %w", decision, id, err)
		}
		return fmt.Errorf("review %s %s: %w", decision, id, err)
	}
	fmt.Fprintf(out, "%s: %s (rule %s, call %s)\n", id, res.Outcome(), res.RuleID, res.CallID)
	return nil
}

func reviewList(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("review list", flag.ContinueOnError)
	all := fs.Bool("all", false, "also the decided and expired reviews")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lc, lctx, done, err := dialWithin(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	defer done()
	q := `WorkflowType = "` + workflows.ReviewWorkflowName + `"`
	if !*all {
		q += ` AND ExecutionStatus = "Running"`
	}
	resp, err := lc.Temporal.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 200})
	if err != nil {
		return fmt.Errorf("review list: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "CALL\tRULE\tFLAG\tSCENARIO\tTENANT\tSTATE\tSINCE")
	for _, e := range resp.GetExecutions() {
		id := e.GetExecution().GetWorkflowId()
		var res workflows.ReviewResult
		v, err := lc.Temporal.QueryWorkflow(lctx, id, e.GetExecution().GetRunId(), workflows.QueryReview)
		if err == nil {
			err = v.Get(&res)
		}
		if err != nil {
			fmt.Fprintf(tw, "%s\t?\t\t\t\t(%v)\t\n", workflows.ReviewCallID(id), err)
			continue
		}
		since := time.Since(e.GetStartTime().AsTime()).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\n", res.CallID, res.RuleID, res.Flag, res.Scenario, res.Tenant, res.State, since)
	}
	if len(resp.GetExecutions()) == 0 {
		fmt.Fprintln(tw, "(no review is waiting)\t\t\t\t\t\t")
	}
	return tw.Flush()
}
