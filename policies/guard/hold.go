package guard

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Holds are the rate-limit holds of a process (rule hold, docs/how-it-works.md
// "The guard on one page"): a scope (a model's rate_limit_scope, a key of
// a pool, a parked key) that the provider said refuses every request
// until a moment is held until then, so that calls arriving meanwhile
// wait or go elsewhere instead of being sent to be refused.
//
// A Holds is safe for concurrent use; it keeps one entry per scope ever
// held, and the scopes are those of the ladder.
type Holds struct {
	mu   sync.Mutex
	by   map[string]*hold
	sync *Sync
}

// SetSync joins the holds to their fleet: holds are reported, and a scope
// the fleet holds is held here too (see Sync).
func (h *Holds) SetSync(s *Sync) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sync = s
}

type hold struct {
	until      time.Time     // the scope is held before this instant
	lastLength time.Duration // of the hold that set until
}

// NewHolds returns holds with no scope held.
func NewHolds() *Holds { return &Holds{by: map[string]*hold{}} }

// Hold holds scope for d from now (a longer hold already there is kept).
func (h *Holds) Hold(scope string, now time.Time, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.by[scope]
	if x == nil {
		x = &hold{}
		h.by[scope] = x
	}
	if u := now.Add(d); u.After(x.until) {
		x.until, x.lastLength = u, d
	}
	if h.sync != nil {
		h.sync.hold(scope, now, d)
	}
}

// Scopes lists, sorted, the scopes ever held.
func (h *Holds) Scopes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.by))
}

// Left returns how long scope is still held at now; 0 when it is free.
func (h *Holds) Left(scope string, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var left time.Duration
	if x := h.by[scope]; x != nil && x.until.After(now) {
		left = x.until.Sub(now)
	}
	if h.sync != nil {
		left = max(left, h.sync.fleetHeld(scope, now))
	}
	return left
}

// ReleaseJitter spreads the release of a hold: a call waiting for it goes
// at a moment drawn uniformly between the hold's end and ReleaseJitter ×
// the hold's length after it. Principle: the calls a hold stopped would,
// released together at its end, all send at once — a thundering herd that
// refills the queue which has just refused them and is refused again in
// one burst; spread out, the server takes them as its queue drains. It is
// the reason backoff is jittered, applied to a wait every call shares.
const ReleaseJitter = 0.5

// Jittered is the wait of a call for a hold of which left remains, the
// whole hold being length long: left + u·ReleaseJitter·length, for the
// random number u in [0,1) (clamped). A hold just set (left = length = the
// Retry-After or rate_limit.hold) is waited for 1 to 1.5 times its length.
func Jittered(left, length time.Duration, u float64) time.Duration {
	if left <= 0 {
		return 0
	}
	u = min(max(u, 0), 1)
	return left + time.Duration(u*ReleaseJitter*float64(max(length, left)))
}

// Release is how long a call that would send to scope at now waits for
// its hold, released with jitter (Jittered, u drawn by the caller); 0
// when the scope is free. Left is the hold itself, for questions that are
// not a call about to send (is the scope held? how long for the fleet?).
func (h *Holds) Release(scope string, now time.Time, u float64) time.Duration {
	left := h.Left(scope, now)
	if left <= 0 {
		return 0
	}
	h.mu.Lock()
	var length time.Duration
	if x := h.by[scope]; x != nil {
		length = x.lastLength
	}
	h.mu.Unlock()
	return Jittered(left, length, u)
}
