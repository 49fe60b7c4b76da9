package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// run is one upstream attempt as the attempts loop sees it: what was
// prepared for it, when it started, and its outcome.
type run struct {
	prep    activities.Prepared
	started time.Time
	out     activities.CallOutcome
	err     error
	hedge   bool // the hedge of a hedged attempt
}

// racer is one of the two attempts of a hedged call.
type racer struct {
	run
	f              workflow.Future
	cancel         workflow.CancelFunc
	running        bool // started and not yet resolved
	tokenAnnounced bool // announced its first token
	delayPassed    bool // announced that its hedge delay passed without one
	// notes: the overdue notes it sent (HedgePlan.Overdue), the last
	// naming the models where a hedge could answer sooner, and why.
	notes        int
	soonerModels []string
	soonerWhy    string
	pub          string // the publisher id of its stream batches, once announced
	cancelReason string // why it was cancelled
}

func (r *racer) model() string { return r.prep.Model }

// race is the state of a hedged attempt: the primary, the hedge once it
// starts, and, when the caller streams, the attempt whose first token came
// first (the only one whose deltas the stream keeps).
type race struct {
	ch      workflow.ReceiveChannel
	stream  bool
	primary racer
	hedge   racer
	winner  *racer
	// carrier is the attempt whose outcome the call went on with, once
	// the race is over.
	carrier *racer
	// decided is set when the stream's winner is known, so that the
	// attempts loop wakes when the stream's filter learned it first.
	decided workflow.Future
	settle  workflow.Settable
	// replaced: the carrier's answer replaced the winner's streamed text
	// in one event (hedge.replace); no racer's batches join after it.
	replaced bool
	// firstToken: the first attempt to give a first token wins, whether
	// or not the caller streams (an overdue plan).
	firstToken bool
	// prevFilter is the stream's filter of an earlier race of the call: the
	// batches it turned away stay away.
	prevFilter func(string) bool
	// attempt is the number of the attempt raced: a note of another
	// (an earlier race's, sent late) is not this race's.
	attempt int
}

// accept is the call stream's filter once a race began, for the rest of
// the call: the batches of a racer other than the winner (or, after the
// race, the carrier) never join the stream, even those its last flush
// sends after it was cancelled; every other publisher's are kept.
func (r *race) accept(pub string) bool {
	r.take()
	if r.prevFilter != nil && !r.prevFilter(pub) {
		return false
	}
	if pub == "" {
		return true
	}
	if r.replaced {
		// The whole answer went out in the replaced event: neither
		// racer's batches join the stream any more, even the hedge's
		// last flush after its cancellation.
		return pub != r.primary.pub && pub != r.hedge.pub
	}
	keep := r.winner
	if r.carrier != nil {
		keep = r.carrier
	}
	if keep == nil {
		return true
	}
	for _, x := range []*racer{&r.primary, &r.hedge} {
		if x != keep && x.pub == pub {
			return false
		}
	}
	return true
}

// take reads the notes the attempts sent. On a streamed call the first
// first-token note names the winner.
func (r *race) take() {
	var n activities.AttemptNote
	for r.ch.ReceiveAsync(&n) {
		if n.Attempt != r.attempt {
			continue
		}
		who := &r.primary
		if n.Hedge {
			who = &r.hedge
		}
		if n.PublisherID != "" {
			who.pub = n.PublisherID
		}
		switch n.Kind {
		case activities.NoteNoFirstToken:
			who.delayPassed = true
			if len(n.Sooner) > 0 {
				who.notes++
				who.soonerModels, who.soonerWhy = n.Sooner, n.Why
			}
		case activities.NoteFirstToken:
			who.tokenAnnounced = true
			if (r.stream || r.firstToken) && r.winner == nil && r.carrier == nil {
				r.winner = who
				r.settle.Set(nil, nil)
			}
		}
	}
}

// callModel runs the attempt prepared as in and returns its run. A call
// whose first attempt has a hedge plan (prep.Hedge) races it: when the
// attempt has no first token after the plan's delay, the hedge model is
// asked too, and the first complete answer (on a streamed call, the first
// token) wins; the other attempt is cancelled and recorded as such.
//
// The plain path keeps its frame small and the race in a function of its
// own: a streamed call's workflow coroutine stays parked here for the
// whole generation, and its stack is per-call memory (README
// "Benchmarks", memory).
func (c *call) callModel(ctx workflow.Context, prep *activities.Prepared, in *activities.CallInput, remaining time.Duration) *run {
	if prep.Hedge != nil {
		return c.race(ctx, prep, in, remaining)
	}
	r := &run{prep: *prep, started: workflow.Now(ctx)}
	r.err = c.startAttempt(ctx, prep, in, min(prep.Timeout, remaining)+in.Grace).Get(ctx, &r.out)
	return r
}

// startAttempt schedules the attempt. Not inlined: its frame is gone by
// the time callModel waits on the result.
//
//go:noinline
func (c *call) startAttempt(ctx workflow.Context, prep *activities.Prepared, in *activities.CallInput, timeout time.Duration) workflow.Future {
	var a *activities.Activities
	return workflow.ExecuteActivity(c.callOptions(ctx, *prep, timeout, ""), a.CallModel, *in)
}

// race runs a hedged first attempt (see callModel).
func (c *call) race(ctx workflow.Context, pp *activities.Prepared, pin *activities.CallInput, remaining time.Duration) *run {
	var a *activities.Activities
	prep, in := *pp, *pin
	timeout := min(prep.Timeout, remaining) + in.Grace
	plan := *prep.Hedge
	r := &race{ch: workflow.GetSignalChannel(ctx, activities.SignalAttemptNote), stream: c.stream != nil, firstToken: plan.Overdue, attempt: in.Attempt}
	r.decided, r.settle = workflow.NewFuture(ctx)
	r.hedge.hedge = true
	if r.stream {
		r.prevFilter, c.filter = c.filter, r.accept
		c.stream.SetPublishFilter(r.accept)
	}
	sel := workflow.NewSelector(ctx)
	start := func(x *racer, p activities.Prepared, in activities.CallInput, timeout time.Duration, summary string) {
		actx, cancel := workflow.WithCancel(ctx)
		x.prep, x.started, x.cancel, x.running = p, workflow.Now(ctx), cancel, true
		x.f = workflow.ExecuteActivity(c.raceOptions(actx, p, timeout, summary), a.CallModel, in)
		sel.AddFuture(x.f, func(f workflow.Future) {
			x.running = false
			x.err = f.Get(ctx, &x.out)
		})
	}
	// The attempt tells when its hedge delay passed without a first token
	// (a note, not a workflow timer: those fire up to a second late).
	in.Announce, in.HedgeAfter, in.HedgeReplace = true, plan.After, plan.Replace
	if plan.Overdue {
		// The attempt itself says, once its first token is overdue, where
		// a hedge could answer sooner.
		in.HedgeAfter, in.HedgeOverdue, in.FirstTokenWins = 0, true, true
	}
	start(&r.primary, prep, in, timeout, "")
	in.HedgeAfter, in.HedgeOverdue = 0, false

	sel.AddReceive(r.ch, func(workflow.ReceiveChannel, bool) { r.take() })
	sel.AddFuture(r.decided, func(workflow.Future) {})
	hedgeTried, tried := false, 0 // tried: overdue notes answered
	defer r.take()                // notes left behind are not read again
	for {
		sel.Select(ctx)
		r.take() // notes that came with a completion count first
		if ctx.Err() != nil {
			return &run{prep: prep, started: r.primary.started, err: temporal.NewCanceledError()}
		}
		p, h := &r.primary, &r.hedge
		if p.delayPassed && !p.tokenAnnounced && !hedgeTried && p.running && !p.f.IsReady() {
			switch {
			case !plan.Overdue:
				hedgeTried = true
				c.startHedge(ctx, r, plan, in, remaining, start)
			case p.notes > tried:
				// Each note of an overdue attempt asks again (the attempt
				// sends a few, a second apart), until a hedge starts.
				tried = p.notes
				c.startHedge(ctx, r, plan, in, remaining, start)
				hedgeTried = h.f != nil
			}
		}
		if won := c.raceOutcome(ctx, r, plan); won != nil {
			return &won.run
		}
	}
}

// raceOutcome is where race r stands after an event: the racer whose
// outcome the call goes on with once the race is over, else nil (the race
// goes on; a racer cancelled here reports its end as another event).
func (c *call) raceOutcome(ctx workflow.Context, r *race, plan activities.HedgePlan) *racer {
	p, h := &r.primary, &r.hedge
	if w := r.winner; w != nil && plan.Replace && w == h {
		// A streamed call under hedge.replace whose hedge streamed
		// first: the caller reads the hedge's text, the primary goes
		// on and, when it answers, replaces it.
		switch {
		case !p.running && p.err == nil:
			c.cancelLoser(h, p.model()+" answered and replaces the hedge's text")
			if h.running {
				return nil
			}
			return c.settleRace(ctx, r, p)
		case !h.running && h.err == nil && p.running:
			c.quickAnswer(ctx, h)
			return nil
		case p.running || h.running:
			return nil
		}
		return c.settleRace(ctx, r, h)
	}
	if w := r.winner; w != nil {
		// A streamed call: the first token decided, and the caller
		// reads the winner's text; the other stops, and the call goes
		// on with the winner's outcome whatever the other's.
		l := loserOf(r, w)
		c.cancelLoser(l, "its first token came later than "+w.model()+"'s")
		if w.running || l.running {
			return nil
		}
		return c.settleRace(ctx, r, w)
	}
	switch {
	case p.running && h.running:
		return nil
	case !p.running && p.err == nil && h.running:
		c.cancelLoser(h, p.model()+" answered first")
		return nil
	case h.f != nil && !h.running && h.err == nil && p.running:
		if plan.Replace {
			// Its answer goes out now; the primary's replaces it.
			c.quickAnswer(ctx, h)
			return nil
		}
		c.cancelLoser(p, "the hedge ("+h.model()+") answered first")
		return nil
	case p.running || h.running:
		return nil // one failed; the other may still answer
	}
	// Both are done (or the hedge never started): the answer, else the
	// primary's failure.
	won := p
	if h.f != nil && h.err == nil && !(plan.Replace && p.err == nil) {
		won = h
	}
	return c.settleRace(ctx, r, won)
}

func loserOf(r *race, w *racer) *racer {
	if w == &r.primary {
		return &r.hedge
	}
	return &r.primary
}

// cancelLoser cancels x, if it runs, because of why; settleRace records it.
func (c *call) cancelLoser(x *racer, why string) {
	if x.f == nil || !x.running || x.cancel == nil {
		return
	}
	x.cancel()
	x.cancel = nil
	x.cancelReason = why
}

// startHedge asks StartHedge and, when it agrees, starts the hedge.
func (c *call) startHedge(ctx workflow.Context, r *race, plan activities.HedgePlan, in activities.CallInput, remaining time.Duration,
	start func(*racer, activities.Prepared, activities.CallInput, time.Duration, string)) {
	var a *activities.Activities
	left := remaining - workflow.Now(ctx).Sub(r.primary.started)
	// An overdue attempt asks up to a few times; its first refusal is
	// recorded, the others are in history as their local activities.
	skip := func(model, reason string) {
		if !plan.Overdue || r.primary.notes <= 1 {
			c.res.Attempts = append(c.res.Attempts, Attempt{N: c.st.N, Model: model, Hedge: true, Decision: "skip", Reason: reason})
		}
	}
	model := plan.Model
	if plan.Overdue {
		model = r.primary.soonerModels[0]
	}
	if left < guard.MinAttemptTime {
		skip(model, fmt.Sprintf("no hedge: %s left before the fallback", callstate.FormatDuration(left)))
		return
	}
	elapsed := workflow.Now(ctx).Sub(c.start)
	var hp activities.Prepared
	hi := activities.HedgeInput{Prepare: activities.PrepareInput{Request: c.attemptRequest(), State: c.st, Elapsed: elapsed}, Model: plan.Model}
	what := plan.Model
	if plan.Overdue {
		hi.Sooner, what = r.primary.soonerModels, strings.Join(r.primary.soonerModels, " or ")
	}
	err := workflow.ExecuteLocalActivity(localOptions(ctx, "start hedge: "+what+", budget and guards"), a.StartHedge, hi).Get(ctx, &hp)
	if err != nil || hp.Model == "" {
		reason := hp.Reason
		if err != nil {
			reason = "no hedge: " + err.Error()
		}
		skip(model, reason)
		return
	}
	c.st.Requests = hp.State.Requests // the hedge is one more request of the call
	hin := in
	hin.Model, hin.Prompt, hin.Shape, hin.Key, hin.Fingerprint, hin.Resends = hp.Model, hp.Prompt, hp.State.Shape, hp.Key, hp.Fingerprint, hp.Resends
	hin.Hedge, hin.Timeout = true, min(hp.Timeout, left)
	// A hedge is extra load: no open breaker is set aside for it; its
	// grace is its own model's.
	hin.PastOpen, hin.Grace = false, callstate.Grace(hin.Timeout, hp.Timeout, c.admission.FallbackReserve)
	summary := fmt.Sprintf("hedge: %s after %s without a first token from %s (%s)", hp.Model, callstate.FormatDuration(plan.After), r.primary.model(), plan.Basis)
	if plan.Overdue {
		summary = fmt.Sprintf("hedge: %s, %s without a first token from %s, kept open: %s",
			hp.Model, callstate.FormatDuration(workflow.Now(ctx).Sub(r.primary.started)), r.primary.model(), r.primary.soonerWhy)
	}
	c.event(ctx, Event{Type: EventHedgeStarted, Attempt: c.st.N, Model: hp.Model, Reason: summary})
	start(&r.hedge, hp, hin, hin.Timeout+hin.Grace, summary)
}

// quickAnswer delivers the answer of hedge h while the primary goes on
// (hedge.replace): the answer update returns it, marked replaceable.
func (c *call) quickAnswer(ctx workflow.Context, h *racer) {
	if c.quick != nil {
		return
	}
	q := c.res
	q.Attempts = append(slices.Clone(c.res.Attempts), Attempt{
		N: c.st.N, Model: h.model(), Key: h.prep.Key, Hedge: true, Status: h.out.Status,
		Messages: h.prep.Prompt.Messages, PromptTokens: h.prep.Prompt.Tokens,
		DurationMS: workflow.Now(ctx).Sub(h.started).Milliseconds(),
		Decision:   "answer", Reason: "quick answer; " + c.admission.FirstModel + " is still answering",
	})
	q.Content, q.Model, q.FinishReason = h.out.Content, h.model(), h.out.FinishReason
	q.ToolCalls, q.Logprobs = h.out.ToolCalls, h.out.Logprobs
	q.Usage.PromptTokens += h.out.PromptTokens
	q.Usage.CompletionTokens += h.out.CompletionTokens
	q.Source, q.Degraded, q.Replaceable = SourceFallbackModel, true, true
	q.Reason = fmt.Sprintf("quick answer from %s, the hedge of %s, which is still answering: its answer, when it succeeds, replaces this one",
		h.model(), c.admission.FirstModel)
	c.quick, c.quickAt = &q, workflow.Now(ctx).Sub(c.start)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("quick answer from %s delivered; waiting for %s to replace it", h.model(), c.admission.FirstModel))
}

// settleRace ends the race with won carrying the call: it records the
// other attempt and returns won. A primary that carries the call after a
// quick answer replaces it: the result keeps the quick answer, and a
// streamed call's subscribers get the whole new text in a replaced event.
func (c *call) settleRace(ctx workflow.Context, r *race, won *racer) *racer {
	r.carrier = won
	if q := c.quick; q != nil && !won.hedge {
		c.res.Replaced = &QuickAnswer{Model: q.Model, Content: q.Content, AtMS: c.quickAt.Milliseconds()}
	}
	if won == &r.primary && r.winner == &r.hedge {
		// The caller streamed the hedge's text: the primary's replaces it,
		// whole, in one event; its own batches never join the stream.
		r.replaced = true
		c.res.Replaced = cmp.Or(c.res.Replaced, &QuickAnswer{Model: r.hedge.model(), AtMS: workflow.Now(ctx).Sub(c.start).Milliseconds()})
		c.event(ctx, Event{Type: EventReplaced, Model: won.model(), Content: won.out.Content})
	}
	for _, x := range []*racer{&r.primary, &r.hedge} {
		if x == won || x.f == nil {
			continue
		}
		c.recordRacer(ctx, x, won)
	}
	if won.hedge {
		st := c.st
		st.Model, st.Key = won.prep.Model, won.prep.Key
		c.st = st
	}
	return won
}

// recordRacer records the attempt of a race that did not carry the call.
func (c *call) recordRacer(ctx workflow.Context, x, won *racer) {
	class := failure.None
	out := x.out
	if x.err != nil && !temporal.IsCanceledError(x.err) {
		class = classOf(x.err, &out)
	}
	att := Attempt{
		N: c.st.N, Model: x.model(), Key: x.prep.Key, Hedge: x.hedge, Status: out.Status,
		Messages: x.prep.Prompt.Messages, PromptTokens: x.prep.Prompt.Tokens, Class: string(class),
		DurationMS: workflow.Now(ctx).Sub(x.started).Milliseconds(),
	}
	switch {
	case x.err == nil && c.res.Replaced != nil:
		att.Decision, att.Reason = "replaced", "its quick answer went out first; "+won.model()+"'s answer replaced it"
	case x.err == nil:
		att.Decision, att.Reason = "raced", "it answered, but "+won.model()+" carried the call"
	case temporal.IsCanceledError(x.err):
		att.Decision, att.Reason = "cancelled", x.cancelReason
		if att.Reason == "" {
			att.Reason = won.model() + " carried the call"
		}
	default:
		att.Decision, att.Reason = "raced", fmt.Sprintf("%s (the call goes on from %s's outcome)", out.Reason, won.model())
	}
	c.spent(ctx, x.prep, class, out, att.PromptTokens)
	if x.err == nil {
		// Both answered: the other answer was billed too.
		c.res.Usage.PromptTokens += out.PromptTokens
		c.res.Usage.CompletionTokens += out.CompletionTokens
		c.tokens(ctx, "prompt", att.Model, out.PromptTokens)
		c.tokens(ctx, "completion", att.Model, out.CompletionTokens)
	}
	if class != failure.None && !out.NotSent {
		c.res.Usage.FailedAttemptTokens += att.PromptTokens + out.CompletionTokens
		c.tokens(ctx, "failed", att.Model, att.PromptTokens+out.CompletionTokens)
	}
	c.res.Attempts = append(c.res.Attempts, att)
}
