package guard

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// holdGap is how soon after a hold ends a new rate limit must come for
// the scope to count as held without a break.
const holdGap = time.Second

// Holds are the rate-limit holds of a process (docs/how-it-works.md "Failure classes"):
// a scope (an endpoint, a key on an endpoint, a model; see
// config.ModelConfig.Scope) that answered 429 or queue_full is held until
// its Retry-After has passed, so that calls arriving meanwhile wait or go
// elsewhere instead of being sent to be refused. A rate limit is
// backpressure, not sickness: Hold says how long the scope has been held
// without a break, and only a hold that lasts (rate_limit.breaker_after)
// lets the refusals count against a breaker.
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
	until time.Time // the scope is held before this instant
	since time.Time // start of the unbroken run of holds
}

// NewHolds returns holds with no scope held.
func NewHolds() *Holds { return &Holds{by: map[string]*hold{}} }

// Hold holds scope for d from now (a longer hold already there is kept)
// and returns how long the scope has been held without a break: since the
// first rate limit that did not come within holdGap of the end of the
// previous hold.
func (h *Holds) Hold(scope string, now time.Time, d time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.by[scope]
	if x == nil || now.After(x.until.Add(holdGap)) {
		x = &hold{since: now, until: now}
		h.by[scope] = x
	}
	if u := now.Add(d); u.After(x.until) {
		x.until = u
	}
	if h.sync != nil {
		h.sync.hold(scope, now, d)
	}
	return max(now.Sub(x.since), 0)
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
