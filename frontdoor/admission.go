package frontdoor

import (
	"context"
	"net/http"
	"time"

	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/workflows"
)

// admission is a request's place in its tenant's limits, from before its
// body is read: its slot, and once started its call's workflow ID and
// whether its client waits for it.
type admission struct {
	tenant   string
	slot     *Slot
	id       string
	async    bool
	deadline time.Duration
}

// admit takes the request's place in its tenant's limits before its body
// is read, or answers 429 without reading it. The caller must leave.
func (h *Handler) admit(w http.ResponseWriter, tenant string) (*admission, *apiError) {
	slot, ref := h.limiter.Enter(tenant, h.o.Now())
	if ref != nil {
		closeEarly(w) // its body is not read
		return nil, rateLimited(ref)
	}
	return &admission{tenant: tenant, slot: slot}, nil
}

// charge takes the valid request's tokens from its tenant's limits, or
// answers 429.
func (h *Handler) charge(w http.ResponseWriter, a *admission, req workflows.CallRequest) *apiError {
	if ref := a.slot.Charge(h.estimate(req), h.o.Now()); ref != nil {
		closeEarly(w)
		return rateLimited(ref)
	}
	a.deadline = time.Duration(req.DeadlineMS) * time.Millisecond
	if a.deadline <= 0 {
		a.deadline = h.o.Config.Call.Deadline.D()
	}
	return nil
}

// estimate is the tokens a call asks for: its prompt's, estimated without
// a tokenizer, plus its max_tokens or, when it sets none, the max_tokens
// the worker sends for it (limits.default_max_tokens; the output reserve
// when that is 0: the worker then sends none).
func (h *Handler) estimate(req workflows.CallRequest) int {
	out := req.MaxTokens
	if out <= 0 {
		out = h.o.Config.Limits.DefaultMaxTokens
	}
	if out <= 0 {
		out = h.o.Config.Pruning.ReserveOutputTokens
	}
	return prompt.EstimateMessages(req.Messages) + out
}

// leave ends a request's part in its call. The slot is freed when no call
// started (the request was refused) or the request waited for the call's
// end; a call that runs on without it (an async call, a background
// response, a client that left) keeps its slot until the front door sees
// the call end.
func (h *Handler) leave(a *admission, r *http.Request) {
	if a.id == "" || (!a.async && r.Context().Err() == nil) {
		a.slot.Release()
		return
	}
	if a.slot.Keep(a.id) {
		go h.watch(a.tenant, a.id, a.deadline+CallEndMargin)
	}
}

// watch waits, for at most bound, for the call id to end, then frees its
// slot. One goroutine per kept call: at most the tenants' max_in_flight
// in all.
func (h *Handler) watch(tenant, id string, bound time.Duration) {
	defer h.limiter.End(tenant, id)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for {
		_, err := h.o.Client.Result(ctx, id)
		if err == nil || ctx.Err() != nil || !unreachable(err) {
			return // ended (answered or failed), or the bound is reached
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.o.RetryAfter):
		}
	}
}
