package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// SignalAttemptNote is the signal an attempt that may be hedged (or is a
// hedge) sends its call (README "Hedged calls"): at its first chunk, and
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
	// PublisherID is the id the attempt's stream batches carry ("" when
	// the caller does not stream).
	PublisherID string `json:"publisher_id,omitempty"`
}

// HedgePlan is how the call's first attempt is hedged: when it has no
// first token after After, Model answers the same question in parallel.
type HedgePlan struct {
	Model string        `json:"model"`
	After time.Duration `json:"after"`
	// Basis says where After comes from ("fixed", "p90 of 42 first tokens
	// of qwen-72b", "initial: 3 first tokens on record").
	Basis string `json:"basis"`
}

// HedgeInput asks to start the hedge of a call's attempt: the call's
// request and state as they are, and the hedge model.
type HedgeInput struct {
	Prepare PrepareInput `json:"prepare"`
	Model   string       `json:"model"`
}

// firstTokens keeps each model's recent times to first token (the whole
// reply of a model that does not stream), for the adaptive hedge delay.
type firstTokens struct {
	mu  sync.Mutex
	per map[string][]time.Duration
}

// firstTokenSamples is how many recent times a model keeps.
const firstTokenSamples = 200

func newFirstTokens() *firstTokens { return &firstTokens{per: map[string][]time.Duration{}} }

func (f *firstTokens) add(model string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := append(f.per[model], d)
	if len(s) > firstTokenSamples {
		s = slices.Delete(s, 0, len(s)-firstTokenSamples)
	}
	f.per[model] = s
}

// p90 is the 90th percentile of model's recent times and their number.
func (f *firstTokens) p90(model string) (time.Duration, int) {
	f.mu.Lock()
	s := slices.Clone(f.per[model])
	f.mu.Unlock()
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	return s[(len(s)*9-1)/10], len(s)
}

// hedgePlan is the hedge of a call's first attempt on m, nil when the
// call's scenario is not hedged, m is the hedge model itself, or the
// request needs what the hedge model lacks.
func (a *Activities) hedgePlan(in PrepareInput, m config.ModelConfig, st callstate.State) *HedgePlan {
	if st.Requests != 1 {
		return nil // only the call's first request is hedged
	}
	rule := a.cfg.Hedge.Rule(in.Request.Scenario)
	d, adaptive, on := rule.Delay()
	if !on || rule.Model == m.Name {
		return nil
	}
	hm, ok := a.cfg.Model(rule.Model)
	if !ok || len(request.Lacks(hm, in.Request.Needs())) > 0 {
		return nil
	}
	p := &HedgePlan{Model: rule.Model, After: d, Basis: "fixed"}
	if adaptive {
		p90, n := a.firstTokens.p90(m.Name)
		if n >= config.HedgeMinSamples {
			p.After, p.Basis = p90, fmt.Sprintf("p90 of %d first tokens of %s", n, m.Name)
		} else {
			p.After, p.Basis = a.cfg.Hedge.Initial.D(), fmt.Sprintf("initial: %d first tokens of %s on record", n, m.Name)
		}
	}
	return p
}

// StartHedge decides, when a hedge's delay has passed, whether the hedge
// may start, and prepares it: within the hedge budget (hedge.budget of
// calls), the hedge model's breaker, keys, rate limits and pacing, and
// paid from its endpoint's retry budget like any retry. A refused hedge
// comes back with no Model and the Reason.
func (a *Activities) StartHedge(ctx context.Context, in HedgeInput) (Prepared, error) {
	now := a.now()
	if a.hedges.Remaining(now) <= 0 {
		a.hedgeMetric(in.Model, "budget")
		return Prepared{Reason: fmt.Sprintf("hedge budget spent (%.0f%% of calls): no hedge", a.cfg.Hedge.Budget*100)}, nil
	}
	pin := in.Prepare
	pin.State.Model, pin.Only = in.Model, true
	p, err := a.PrepareAttempt(ctx, pin)
	if err != nil {
		return p, err
	}
	switch {
	case p.Model != in.Model:
		a.hedgeMetric(in.Model, "refused")
		p.Reason = "no hedge: " + p.Reason
		if len(p.Skipped) > 0 {
			p.Reason = "no hedge: " + p.Skipped[len(p.Skipped)-1].Reason
		}
		p.Model = ""
		return p, nil
	case p.Hold > 0:
		a.hedgeMetric(in.Model, "held")
		return Prepared{Reason: fmt.Sprintf("no hedge: %s for %s", p.HoldReason, callstate.FormatDuration(p.Hold))}, nil
	}
	a.hedges.TryRetry(now)
	a.hedgeMetric(in.Model, "started")
	return p, nil
}

// announcer sends the call the notes of an attempt that may be hedged:
// its first token, once, and, when the hedge delay passes first, that it
// has none. nil announces nothing.
type announcer struct {
	ctx   context.Context
	note  AttemptNote
	mu    sync.Mutex
	first bool
	timer *time.Timer
}

func newAnnouncer(ctx context.Context, in CallInput, pub *callPublisher) *announcer {
	if !in.Announce {
		return nil
	}
	n := &announcer{ctx: ctx, note: AttemptNote{Attempt: in.Attempt, Hedge: in.Hedge, Model: in.Model}}
	if pub != nil {
		n.note.PublisherID = pub.c.PublisherID()
	}
	if in.HedgeAfter > 0 {
		n.timer = time.AfterFunc(in.HedgeAfter, func() {
			n.mu.Lock()
			due := !n.first
			n.mu.Unlock()
			if due {
				n.send(NoteNoFirstToken)
			}
		})
	}
	return n
}

// firstToken sends the first-token note, once; it returns once the call
// has it, so that it is in history before the attempt's first streamed
// batch.
func (n *announcer) firstToken() {
	if n == nil {
		return
	}
	n.mu.Lock()
	already := n.first
	n.first = true
	n.mu.Unlock()
	if !already {
		n.send(NoteFirstToken)
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
