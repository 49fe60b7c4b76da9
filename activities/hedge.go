package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
)

// SignalAttemptNote is the signal an attempt that may be hedged (or is a
// hedge) sends its call (docs/how-it-works.md "Hedged calls"): at its first chunk, and
// when its hedge delay passed without one. Its value is an AttemptNote.
// The attempt keeps the time itself: Temporal's timers fire up to a
// second late on the dev server, too coarse for a hedge delay.
const SignalAttemptNote = "attempt-note"

// The kinds of AttemptNote.
const (
	NoteFirstToken   = "first_token"
	NoteNoFirstToken = "no_first_token"
)

// AttemptNote tells the call about one of its attempts.
type AttemptNote struct {
	Kind    string `json:"kind"`
	Attempt int    `json:"attempt"`
	Hedge   bool   `json:"hedge,omitempty"`
	Model   string `json:"model"`
	// Sooner, on the no-first-token note of an attempt whose first token
	// is overdue (CallInput.HedgeOverdue), are the models where a hedge
	// could answer sooner, in the ladder's order, and Why says why.
	Sooner []string `json:"sooner,omitempty"`
	Why    string   `json:"why,omitempty"`
	// PublisherID is the id the attempt's stream batches carry ("" when
	// the caller does not stream).
	PublisherID string `json:"publisher_id,omitempty"`
}

// HedgePlan is how an attempt is hedged: when it has no first token after
// After, Model answers the same question in parallel. An Overdue plan
// (every streamed attempt without a hedge policy) has no Model: After is
// the first-token timeout, the attempt names the models where a hedge
// could answer sooner, and the first to give a first token wins.
type HedgePlan struct {
	Model   string        `json:"model,omitempty"`
	After   time.Duration `json:"after"`
	Overdue bool          `json:"overdue,omitempty"`
	// Basis says where After comes from ("fixed", "1.5 × p90 600 ms of 42 first tokens
	// of qwen-72b", "initial: 3 first tokens on record").
	Basis string `json:"basis"`
	// Replace: when the hedge answers first, the primary keeps running and
	// its answer, when it succeeds, replaces the hedge's.
	Replace bool `json:"replace,omitempty"`
}

// HedgeInput asks to start the hedge of a call's attempt: the call's
// request and state as they are, and the hedge model; for an overdue
// attempt, the models where a hedge could answer sooner (Sooner, the
// first that its guards allow), paid from the retry budget alone.
type HedgeInput struct {
	Prepare PrepareInput `json:"prepare"`
	Model   string       `json:"model,omitempty"`
	Sooner  []string     `json:"sooner,omitempty"`
}

// firstToken records a time to first token of model.
func (a *Activities) firstToken(model string, d time.Duration) {
	a.firstTokens.Add(model, d)
}

// firstTokenP90 is the p90 time to first token of model the adaptive
// delay uses: this worker's (each worker measures its own: the fleet
// shares only what changes rarely, docs/how-it-works.md "Shared guards").
// where words its source.
func (a *Activities) firstTokenP90(model string) (p90 time.Duration, n int, where string) {
	p90, n = a.firstTokens.P90(model)
	return p90, n, "on this worker"
}

// newHedgeBudget allows hedge.budget of the calls in budget.window, and
// one hedge a window beyond that; none when hedge.budget is 0.
func newHedgeBudget(cfg *config.Config) *guard.RetryBudget {
	floor := 1
	if cfg.Hedge.Budget == 0 {
		floor = 0
	}
	return guard.NewShareBudget(config.BudgetConfig{Window: cfg.Budget.Window, Ratio: cfg.Hedge.Budget, Floor: floor})
}

// hedgePlan is the hedge of a call's attempt on m as rule hedge
// (guard.Hedge) decides it; nil when there is none.
func (a *Activities) hedgePlan(in PrepareInput, m config.ModelConfig, st callstate.State) *HedgePlan {
	rule := a.cfg.Hedge.Rule(in.Request.Scenario)
	f := guard.HedgeFacts{FirstRequest: st.Requests == 1, Initial: a.cfg.Hedge.Initial.D(), Model: m.Name, HedgeModel: rule.Model}
	f.Fixed, f.Adaptive, f.On = rule.Delay()
	if !f.FirstRequest || !f.On {
		return nil // nothing more to read: guard.Hedge would say no
	}
	if hm, ok := a.cfg.Model(rule.Model); ok {
		f.HedgeAble = len(request.Lacks(hm, in.Request.Needs())) == 0
	}
	if f.Adaptive {
		f.P90, f.Samples, f.Where = a.firstTokenP90(m.Name)
	}
	after, basis, ok := guard.Hedge(f)
	if !ok {
		return nil
	}
	return &HedgePlan{Model: rule.Model, After: after, Basis: basis, Replace: rule.Replace}
}

// overduePlan is the plan of a streamed attempt on m that the hedge policy
// leaves unhedged: at its first-token timeout it is kept open (it may still
// answer), and a hedge may race it where one could answer sooner.
func overduePlan(m config.ModelConfig, st callstate.State, maxRequests int) *HedgePlan {
	if !m.Stream || st.Attempts() >= maxRequests {
		return nil
	}
	return &HedgePlan{After: m.FirstTokenTimeout.D(), Overdue: true, Basis: "first_token_timeout"}
}

// overdue is the stream watchdog's question when the first token of
// attempt in on m, sent at since, is overdue. The request is never cut for
// that: it may still answer, and a retry can only be slower (it would join
// the back of the same queue). When the call may hedge it, the attempt
// tells the call where a hedge could answer sooner (guard.RaceTo: rungs
// whose endpoint is not ejected and whose breaker is not open, the own
// endpoint only with a retry left in its budget); the call's StartHedge
// then decides and pays. It asks again every
// guard.OverdueRecheck while notes are left to send.
//
// On a server that stops working on a request its client leaves
// (stops_on_disconnect), the request is cut once the model's p90 time to
// first token, counted from its start, passes the attempt's deadline: it
// is not expected to start in time, and leaving frees the server's slot
// for a request that can (why then says so).
func (a *Activities) overdue(in CallInput, m config.ModelConfig, since, deadline time.Time, ann *announcer, why *string) (wait bool, recheck time.Duration) {
	now := a.now()
	if a.without[guard.RuleOverdue] {
		*why = "cut: no first token within first_token_timeout"
		return false, 0
	}
	o := guard.Overdue{Since: since, Deadline: deadline, Grace: in.Grace > 0, StopsOnDisconnect: m.StopsOnDisconnect,
		MayRace: in.HedgeOverdue && ann != nil && ann.notesLeft()}
	if m.StopsOnDisconnect && !deadline.IsZero() {
		o.Model = m.Name
		o.P90, o.Samples, o.Where = a.firstTokenP90(m.Name)
	}
	v := guard.Open(o, now)
	if v.Cut {
		*why = v.Why
		return false, 0
	}
	a.outliers.Overdue(m.Capacity(), since, now, a.rand())
	if v.Race {
		if models, reason := a.sooner(in, m, since, now); len(models) > 0 {
			ann.overdue(models, reason, now)
		}
	}
	return true, v.Recheck
}

// sooner lists the models where a hedge of attempt in on m, sent at
// since, could answer sooner at now, and why the first could: what rule
// overdue reads of each rung, decided by guard.RaceTo.
func (a *Activities) sooner(in CallInput, m config.ModelConfig, since, now time.Time) (models []string, why string) {
	need, own := in.Request.Needs(), m.Capacity()
	// The own endpoint's budget and accepts, read once for its rungs.
	ownLeft := a.budgets.For(own).Remaining(now) > 0
	sent, answered := a.queues.accepted(own, now, m.FirstTokenTimeout.D()/guard.AcceptsPart)
	rungs := make([]guard.RaceRung, 0, len(a.cfg.Models))
	for _, l := range a.cfg.Models {
		e := l.Capacity()
		sick, _ := a.outliers.State(e, now)
		r := guard.RaceRung{Model: l.Name, Own: e == own,
			Usable: sick == guard.Healthy && len(request.Lacks(l, need)) == 0 && a.breakers.State(l.Name, now) != guard.BreakerOpen}
		r.AnsweredSince, r.Overdue = a.queues.since(e, since, now)
		if r.Own {
			r.BudgetLeft, r.Sent, r.Answered = ownLeft, sent, answered
		}
		rungs = append(rungs, r)
	}
	return guard.RaceTo(rungs)
}

// StartHedge decides, when a hedge's delay has passed, whether the hedge
// may start, and prepares it: within the hedge budget (hedge.budget of
// calls; a hedge the model's guards then refuse has spent its share), the
// hedge model's breaker, keys, rate limits and pacing, and paid from its
// endpoint's retry budget like any retry. A refused hedge comes back with
// no Model and the Reason.
func (a *Activities) StartHedge(ctx context.Context, in HedgeInput) (Prepared, error) {
	return oncePerStep(ctx, a.steps, a.now(), in, func() (Prepared, error) { return a.startHedge(in) })
}

func (a *Activities) startHedge(in HedgeInput) (Prepared, error) {
	now := a.now()
	if in.Model == "" {
		return a.startOverdueHedge(in)
	}
	if !a.hedges.TryRetry(now) {
		a.hedgeMetric(in.Model, "budget")
		return Prepared{Reason: fmt.Sprintf("hedge budget spent (%.0f%% of calls): no hedge", a.cfg.Hedge.Budget*100)}, nil
	}
	return a.prepareHedge(in.Prepare, in.Model)
}

// prepareHedge prepares a hedge on model as PrepareAttempt would, never
// waiting in a budget's line; one its guards refuse or hold comes back
// with no Model and the Reason.
func (a *Activities) prepareHedge(pin PrepareInput, model string) (Prepared, error) {
	pin.State.Model, pin.Only = model, true
	p, err := a.prepareAttempt(pin, "")
	if err != nil {
		return p, err
	}
	// A hedge never waits (its walk skips a held or paced rung, books no
	// turn that is away, and does not wait for a rung): it goes now, or
	// not at all.
	if p.Model != model {
		a.hedgeMetric(model, "refused")
		p.Reason = "no hedge: " + p.Reason
		if len(p.Skipped) > 0 {
			p.Reason = "no hedge: " + p.Skipped[len(p.Skipped)-1].Reason
		}
		p.Model = ""
		return p, nil
	}
	a.hedgeMetric(model, "started")
	return p, nil
}

// startOverdueHedge prepares the hedge of an overdue attempt on the first
// of in.Sooner its guards allow (breaker, keys, rate limits, pacing, and
// its endpoint's retry budget, which pays for it), within the call's
// requests cap.
func (a *Activities) startOverdueHedge(in HedgeInput) (Prepared, error) {
	if in.Prepare.State.Attempts() >= callstate.MaxRequests(a.cfg) {
		return Prepared{Reason: fmt.Sprintf("no hedge: the call has sent its %d requests", callstate.MaxRequests(a.cfg))}, nil
	}
	p := Prepared{Reason: "no hedge: no model could answer sooner"}
	for _, name := range in.Sooner {
		var err error
		if p, err = a.prepareHedge(in.Prepare, name); err != nil || p.Model != "" {
			return p, err
		}
	}
	return p, nil
}

// announcer sends the call the notes of an attempt that may be hedged:
// that its hedge delay passed without a first token and, on a streamed
// call once a hedge may be racing it, its first token (which decides the
// race). The happy path, a first token in time, sends nothing. nil
// announces nothing.
type announcer struct {
	ctx   context.Context
	note  AttemptNote
	pub   *callPublisher // its live event is withdrawn once the attempt is late
	mu    sync.Mutex
	first bool // the first token came
	late  bool // the no-first-token note went out
	// wins: the first first token wins the race, whether or not the
	// caller streams (CallInput.FirstTokenWins).
	wins  bool
	timer *time.Timer
	// notes and last: the overdue notes sent, and when the last went.
	notes int
	last  time.Time
}

func newAnnouncer(ctx context.Context, in CallInput, pub *callPublisher) *announcer {
	if !in.Announce {
		return nil
	}
	n := &announcer{ctx: ctx, pub: pub, note: AttemptNote{Attempt: in.Attempt, Hedge: in.Hedge, Model: in.Model}, wins: in.FirstTokenWins}
	if pub != nil {
		n.note.PublisherID = pub.c.PublisherID()
	}
	if in.HedgeAfter > 0 {
		n.timer = time.AfterFunc(in.HedgeAfter, func() {
			n.mu.Lock()
			due := !n.first
			n.lateNow(due)
			n.mu.Unlock()
			if due {
				n.send(NoteNoFirstToken)
			}
		})
	}
	return n
}

// lateNow marks the attempt late (with n.mu held), before its note says
// so: from then on a hedge may race it, so the live event it gave before
// its first token is withdrawn (the first token cannot come meanwhile:
// firstToken takes n.mu).
func (n *announcer) lateNow(late bool) {
	if late && !n.late {
		n.pub.withdrawLive()
	}
	n.late = n.late || late
}

// firstToken notes the first token, and tells the call when it may decide
// a race of streams: the attempt is a hedge, or its delay passed. It
// returns once the call has the note, so that the note is in history
// before the attempt's first streamed batch.
func (n *announcer) firstToken() {
	if n == nil {
		return
	}
	n.mu.Lock()
	send := !n.first && (n.note.PublisherID != "" || n.wins) && (n.late || n.note.Hedge)
	n.first = true
	n.mu.Unlock()
	if send {
		n.send(NoteFirstToken)
	}
}

// notesLeft reports whether an overdue note may still be sent.
func (n *announcer) notesLeft() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.first && n.notes < guard.MaxOverdueNotes
}

// overdue tells the call, at most guard.MaxOverdueNotes times and guard.OverdueNoteGap
// apart, that the attempt's first token is overdue and where a hedge
// could answer sooner. It sends in the background: the watchdog asks.
func (n *announcer) overdue(models []string, why string, now time.Time) {
	n.mu.Lock()
	due := !n.first && n.notes < guard.MaxOverdueNotes && (n.notes == 0 || now.Sub(n.last) >= guard.OverdueNoteGap)
	if due {
		n.notes++
		n.last = now
		n.lateNow(true)
	}
	n.mu.Unlock()
	if due {
		note := n.note
		note.Kind, note.Sooner, note.Why = NoteNoFirstToken, models, why
		go n.sendNote(note)
	}
}

// stop ends the hedge delay: the attempt is over.
func (n *announcer) stop() {
	if n != nil && n.timer != nil {
		n.timer.Stop()
	}
}

func (n *announcer) send(kind string) {
	note := n.note
	note.Kind = kind
	n.sendNote(note)
}

func (n *announcer) sendNote(note AttemptNote) {
	kind := note.Kind
	info := activity.GetInfo(n.ctx)
	sctx, cancel := context.WithTimeout(n.ctx, flushTimeout)
	defer cancel()
	if err := activity.GetClient(n.ctx).SignalWorkflow(sctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, SignalAttemptNote, note); err != nil {
		activity.GetLogger(n.ctx).Warn("attempt note not sent", "kind", kind, "error", err)
	}
}

// HedgeMetrics is implemented by a Metrics that counts hedges by model and
// outcome: started, budget (the hedge budget was spent), refused (breaker,
// keys, retry budget or capabilities), held (rate limit or pacing).
type HedgeMetrics interface {
	Hedge(model, outcome string)
}

func (a *Activities) hedgeMetric(model, outcome string) {
	if hm, ok := a.metrics.(HedgeMetrics); ok {
		hm.Hedge(model, outcome)
	}
}
