package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
)

// refiner is the call's refined request and partial answer: the state of
// the context refiner ("Context refiner" in the package documentation).
type refiner struct {
	// messages replace the request's messages for the call's attempts
	// once a summary replaced dropped rounds (nil: the request's own).
	messages []request.Message
	// summarized: the call asked for its summary (once per call).
	summarized bool
	// partial is the truncated answer the next attempt continues (a
	// caller that does not stream; a streaming caller's text is
	// call.delivered).
	partial string
	// note is said of the next attempt (how its prompt was refined or
	// adapted), in its reason.
	note string
}

// attemptRequest is the request an attempt sends: the call's, with the
// refined conversation once there is one.
func (c *call) attemptRequest() request.Request {
	r := c.req
	if c.refined.messages != nil {
		r.Messages = c.refined.messages
	}
	return r
}

// continued is the text the next attempt continues: what was streamed to
// the caller and the partial answer kept to be continued.
func (c *call) continued() string { return c.delivered + c.refined.partial }

// refine asks for the summary of the rounds the next attempt drops, when
// the state asks for one (Shape.Summarize) and the call has none yet, and
// rebuilds the conversation with it. A summary that cannot be had leaves
// the attempt to drop the rounds as prune_resend does.
func (c *call) refine(ctx workflow.Context, remaining time.Duration) error {
	if !c.st.Shape.Summarize || c.refined.summarized {
		return nil
	}
	if workflow.GetVersion(ctx, "context-refiner", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	c.refined.summarized = true
	var a *activities.Activities
	left := remaining - guard.MinAttemptTime
	if left < time.Second {
		c.refined.note = "no context summary: the deadline leaves no time for one"
		return nil
	}
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: min(40*time.Second, left),
		HeartbeatTimeout:    c.admission.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             fmt.Sprintf("summarize: the rounds attempt %d drops (keeps the last %d)", c.st.N, c.st.Shape.KeepRounds),
	})
	req := c.attemptRequest()
	var s activities.Summary
	err := workflow.ExecuteActivity(sctx, a.Summarize, activities.SummarizeInput{Request: req, Keep: c.st.Shape.KeepRounds, Attempt: c.st.N}).Get(ctx, &s)
	switch {
	case err != nil && temporal.IsCanceledError(err):
		return err
	case err != nil:
		c.refined.note = "no context summary: " + err.Error()
		return nil
	case s.Text == "":
		c.refined.note = s.Reason
		return nil
	}
	c.refined.messages = prompt.Refine(req.Messages, prompt.Dropped{From: s.From, To: s.To, Rounds: s.Rounds},
		prompt.SummaryMessage(s.Text, s.Rounds, s.Model))
	// The summary stands for the rounds it covers; the rounds after them
	// are all sent (a session's summary may cover fewer than were dropped).
	c.st.Shape.KeepRounds = 0
	c.res.Usage.PromptTokens += s.PromptTokens
	c.res.Usage.CompletionTokens += s.CompletionTokens
	c.tokens(ctx, "prompt", s.Model, s.PromptTokens)
	c.tokens(ctx, "completion", s.Model, s.CompletionTokens)
	how := fmt.Sprintf("%s summarized", s.Model)
	if s.Cached {
		how = fmt.Sprintf("the session's summary by %s replaces", s.Model)
	}
	c.refined.note = fmt.Sprintf("context refiner: %s %d round(s), %d → %d tokens", how, s.Rounds, s.DroppedTokens, s.SummaryTokens)
	return nil
}

// partialTokens is what the decision after a failed attempt learns of the
// text it may continue: the completion tokens of a truncated answer's text
// that the call keeps (not streamed to the caller; a streamed text is
// delivered and continued as such).
func (c *call) partialTokens(class failure.Class, out activities.CallOutcome) int {
	if class != failure.OutputTruncated || out.Published > 0 || c.stream != nil || out.Content == "" {
		return 0
	}
	return max(out.CompletionTokens, 1)
}

// keepPartial keeps the truncated answer when the step continues it, and
// forgets it otherwise (the next attempt answers from scratch).
func (c *call) keepPartial(step callstate.Step, out activities.CallOutcome) {
	if !step.Next.Shape.Continue {
		c.refined.partial = ""
		return
	}
	c.refined.partial = joinContinuation(c.refined.partial, out.Content)
}

// bestText is a model's text kept from a failed attempt.
type bestText struct {
	text, model string
	tokens      int
}

// keepBest keeps the text of a failed attempt that a model wrote for the
// call (an answer cut at a limit, a stream that broke, a generation that
// outlasted the attempt's deadline), with the part it
// continues, when it is the longest so far. Text the caller has already
// seen (streamed) is the delivered text's, and a request only a model's
// whole answer serves (a tool call, JSON) has no use for a cut one.
func (c *call) keepBest(class failure.Class, model string, out activities.CallOutcome) {
	switch class {
	case failure.OutputTruncated, failure.StreamBroken, failure.Timeout:
		// Text a model wrote before its limit, a cut, or the attempt's
		// deadline (a generation too long for it): never a filter's.
	default:
		return
	}
	if out.Published > 0 || c.req.Structured() {
		return
	}
	text := joinContinuation(c.refined.partial, out.Content)
	if classify.StripThinking(text) == "" || len(text) <= len(c.best.text) {
		return
	}
	c.best = bestText{text: text, model: model, tokens: out.CompletionTokens}
}

// answerBest ends the call with the best text a model wrote, degraded and
// cut (finish_reason length), when no model answered in full: a model's
// text is never traded for a canned answer.
func (c *call) answerBest(ctx workflow.Context, reason string) {
	c.res.Content, c.res.Model, c.res.FinishReason = c.best.text, c.best.model, "length"
	c.res.Source, c.res.Degraded = SourceModel, true
	if c.best.model != c.admission.FirstModel {
		c.res.Source = SourceFallbackModel
	}
	c.res.Reason = fmt.Sprintf("%s; answered with the longest text a model wrote (%s, %d token(s)), cut short", reason, c.best.model, c.best.tokens)
	c.finish(ctx, OutcomeDegraded)
}

// takeNote returns the note of the attempt just made and forgets it.
func (c *call) takeNote(prep activities.Prepared) string {
	notes := []string{}
	if c.refined.note != "" {
		notes = append(notes, c.refined.note)
		c.refined.note = ""
	}
	if prep.Prompt.Note != "" {
		notes = append(notes, prep.Prompt.Note)
	}
	return strings.Join(notes, "; ")
}

// joinContinuation is an answer's text and its continuation, without the
// text twice when a model answered from scratch instead of continuing.
func joinContinuation(partial, cont string) string {
	if partial != "" && strings.HasPrefix(cont, partial) {
		return cont
	}
	return partial + cont
}
