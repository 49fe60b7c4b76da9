package activities

import (
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// keyPools keeps, per pooled model, where the rotation over its keys is;
// a key parked after a refusal is a hold of its own scope, so the fleet's
// guard shares it with every worker (docs/operating.md "API keys"). Safe for
// concurrent use.
type keyPools struct {
	mu    sync.Mutex
	next  map[string]int // model → the rotation's next index
	holds *guard.Holds
	// room is the headroom each key last reported (endpoint + key →).
	room map[string]headroom
}

// headroom is the share of its rate limit a key had left, as the
// provider's x-ratelimit-* headers said at At.
type headroom struct {
	left float64 // 0 … 1
	step float64 // the share one request takes (1 / the request limit), 0 unknown
	at   time.Time
}

func newKeyPools(holds *guard.Holds) *keyPools {
	return &keyPools{next: map[string]int{}, holds: holds, room: map[string]headroom{}}
}

// keyID names a key (or deployment) where it serves, as the keyed model
// mk (m.WithKey) sees it: its endpoint and key. Every model on that
// endpoint that lists the key shares its park and its headroom. The key's
// id (its variable's name), never the key.
func keyID(mk config.ModelConfig) string { return mk.Scope(config.ScopeKey) }

// report notes the headroom the key of mk reported at now: left, the
// share of its limits it has left, and step, the share one request takes.
func (k *keyPools) report(mk config.ModelConfig, left, step float64, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.room[keyID(mk)] = headroom{left: min(max(left, 0), 1), step: step, at: now}
}

// took counts a request picked for the key of mk before its answer tells
// the new headroom, so that calls picked together do not all go to the
// one key that looked best.
func (k *keyPools) took(mk config.ModelConfig, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h, ok := k.room[keyID(mk)]; ok && now.Sub(h.at) <= guard.HeadroomFresh {
		h.left = max(h.left-h.step, 0)
		k.room[keyID(mk)] = h
	}
}

// headroomOf is the share of its limit the key of mk has left, 1 when it
// told nothing lately.
func (k *keyPools) headroomOf(mk config.ModelConfig, now time.Time) float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.room[keyID(mk)]
	if !ok || now.Sub(h.at) > guard.HeadroomFresh {
		return 1
	}
	return h.left
}

// park leaves the key of mk out until until, in this worker and, through
// the fleet's guard, in every worker.
func (k *keyPools) park(mk config.ModelConfig, now, until time.Time) {
	k.holds.Hold("parked\x00"+keyID(mk), now, until.Sub(now))
}

// isParked reports whether the key of mk is parked at now.
func (k *keyPools) isParked(mk config.ModelConfig, now time.Time) bool {
	return k.holds.Left("parked\x00"+keyID(mk), now) > 0
}

// order is model's keys in the rotation's order: the next key first, so
// calls spread over the pool. Each look turns the rotation, in the same
// step as it reads it, so walks that read the pool at once start at
// different keys.
func (k *keyPools) order(m config.ModelConfig) []string {
	keys := m.Keys()
	k.mu.Lock()
	start := k.next[m.Name] % len(keys)
	k.next[m.Name] = start + 1
	k.mu.Unlock()
	out := make([]string, 0, len(keys))
	for i := range keys {
		out = append(out, keys[(start+i)%len(keys)])
	}
	return out
}

// pickKey chooses the key of an attempt on m: of the keys neither parked
// nor held by a rate limit, the one with the most headroom left (the
// share of its rate limit its last response reported), the rotation's
// order breaking ties — so calls spread over the pool, and a key nearly
// spent is spared before it is refused; when every unparked key is held,
// the one free soonest (the attempt then waits for it or takes another
// model); ok is false when every key is parked. A model with one key
// always gets it.
func (a *Activities) pickKey(m config.ModelConfig, now time.Time) (key string, ok bool) {
	key, ok, free := a.chooseKey(m, now)
	if ok {
		a.takeKey(m, key, free, now)
	}
	return key, ok
}

// chooseKey is pickKey's choice, taking no headroom: the key, whether
// there is one, and whether it is free (not held).
func (a *Activities) chooseKey(m config.ModelConfig, now time.Time) (key string, ok, free bool) {
	if !m.Pooled() {
		return m.Keys()[0], true, true
	}
	best, bestRoom := "", -1.0
	held, heldLeft := "", time.Duration(-1)
	for _, k := range a.keys.order(m) {
		mk := m.WithKey(k)
		if a.keys.isParked(mk, now) {
			continue
		}
		if _, left := a.held(mk, now); left > 0 {
			if heldLeft < 0 || left < heldLeft {
				held, heldLeft = k, left
			}
			continue
		}
		if room := a.keys.headroomOf(mk, now); room > bestRoom {
			best, bestRoom = k, room
		}
	}
	if best != "" {
		return best, true, true
	}
	return held, held != "", false
}

// takeKey takes the key chooseKey chose for a request on m: a free key's
// headroom is taken down by one request's share.
func (a *Activities) takeKey(m config.ModelConfig, key string, free bool, now time.Time) {
	if m.Pooled() && free {
		a.keys.took(m.WithKey(key), now)
	}
}

// otherKey is a key of m's pool other than key that is free now (not
// parked, not held), or "".
func (a *Activities) otherKey(m config.ModelConfig, key string, now time.Time) string {
	if !m.Pooled() {
		return ""
	}
	for _, k := range m.Keys() {
		if k == key || a.keys.isParked(m.WithKey(k), now) {
			continue
		}
		if _, left := a.held(m.WithKey(k), now); left <= 0 {
			return k
		}
	}
	return ""
}

// KeyMetrics is implemented by a Metrics that counts attempts per key of a
// pool (by the key's id, its environment variable; never the key).
type KeyMetrics interface {
	KeyAttempt(model, key, class string)
}

// keyAttempt counts an attempt on a pooled key when the metrics can.
func (a *Activities) keyAttempt(model, key, class string) {
	if km, ok := a.metrics.(KeyMetrics); ok && key != "" {
		km.KeyAttempt(model, key, class)
	}
}

// unparkedOther reports whether m's pool has a key other than key that is
// not parked (held by a rate limit or not).
func (a *Activities) unparkedOther(m config.ModelConfig, key string, now time.Time) bool {
	for _, k := range m.Keys() {
		if k != key && !a.keys.isParked(m.WithKey(k), now) {
			return true
		}
	}
	return false
}
