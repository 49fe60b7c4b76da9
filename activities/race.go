package activities

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errCutByRace is the cause of a hedged attempt's upstream request that
// its rival's answer cut (races).
var errCutByRace = errors.New("the other attempt of the hedged call answered")

// races holds the upstream requests of the hedged attempts that run in
// this process, by call run, attempt and side, so that the attempt that
// answers first stops the other's request at once. The workflow cancels
// the loser too, but an activity learns of that only with a heartbeat's
// reply (seconds later), while a provider goes on generating and billing;
// when the two run on different workers, that reply is all there is.
type races struct {
	mu sync.Mutex
	by map[string]context.CancelCauseFunc
	// won: by the primary's key, whether the hedge's first token came
	// first (CallInput.FirstTokenWins), while a side of the race runs here.
	won map[string]bool
}

// raceKey names one side of a hedged attempt of one call run.
func raceKey(run string, attempt int, hedge bool) string {
	k := run + "/" + strconv.Itoa(attempt)
	if hedge {
		k += "h"
	}
	return k
}

// join registers cut as the request of the side named key until leave is
// called.
func (r *races) join(key string, cut context.CancelCauseFunc) (leave func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by, r.won = map[string]context.CancelCauseFunc{}, map[string]bool{}
	}
	r.by[key] = cut
	primary := strings.TrimSuffix(key, "h")
	if hedge, ok := r.won[primary]; ok && hedge != (key != primary) {
		cut(errCutByRace) // its rival's first token came first
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.by, key)
		if r.by[primary] == nil && r.by[primary+"h"] == nil {
			delete(r.won, primary)
		}
	}
}

// win claims the race of attempt of run for the side whose first token
// came (hedge: the hedge's), and cuts the other side's request if it runs
// here; it reports false when the other side claimed it first.
func (r *races) win(run string, attempt int, hedge bool) bool {
	key := raceKey(run, attempt, false)
	r.mu.Lock()
	if r.won == nil {
		r.by, r.won = map[string]context.CancelCauseFunc{}, map[string]bool{}
	}
	if h, ok := r.won[key]; ok {
		r.mu.Unlock()
		return h == hedge
	}
	r.won[key] = hedge
	rival := r.by[raceKey(run, attempt, !hedge)]
	r.mu.Unlock()
	if rival != nil {
		rival(errCutByRace)
	}
	return true
}

// cut stops the request of the side named key, if it runs here; it
// reports whether it did.
func (r *races) cut(key string) bool {
	r.mu.Lock()
	cut, ok := r.by[key]
	r.mu.Unlock()
	if ok {
		cut(errCutByRace)
	}
	return ok
}

// cutsRival reports whether the answer of attempt in stops its rival: an
// answer of a call that is not streamed (a streamed call's winner is the
// first to stream, which only the workflow knows), except a hedge's under
// hedge.replace, whose primary goes on to replace it.
func cutsRival(in CallInput) bool {
	return in.Announce && !in.Request.Stream && !(in.Hedge && in.HedgeReplace)
}

// awaitCancel waits, heartbeating, for the workflow's cancellation of an
// attempt whose request its rival cut: the attempt has no outcome of its
// own to report, and the workflow, which takes the rival's answer, cancels
// it.
func awaitCancel(ctx context.Context, timeout time.Duration) {
	stop := heartbeat(ctx, timeout, func() any { return Progress{} })
	defer stop()
	<-ctx.Done()
}
