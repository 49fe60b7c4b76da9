package activities

import (
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// keyPools keeps, per pooled model, where the rotation over its keys is;
// a key parked after a refusal is a hold of its own scope, so the fleet's
// guard shares it with every worker (README "Key pools"). Safe for
// concurrent use.
type keyPools struct {
	mu    sync.Mutex
	next  map[string]int // model → the rotation's next index
	holds *guard.Holds
}

func newKeyPools(holds *guard.Holds) *keyPools {
	return &keyPools{next: map[string]int{}, holds: holds}
}

// parkScope names a key where it was refused: every model on that
// endpoint that lists the key leaves it out. The key's id (its variable's
// name), never the key.
func parkScope(m config.ModelConfig, key string) string {
	return "parked\x00" + m.Endpoint() + "\x00" + key
}

// park leaves key of m out until until, in this worker and, through the
// fleet's guard, in every worker.
func (k *keyPools) park(m config.ModelConfig, key string, now, until time.Time) {
	k.holds.Hold(parkScope(m, key), now, until.Sub(now))
}

// isParked reports whether key of m is parked at now.
func (k *keyPools) isParked(m config.ModelConfig, key string, now time.Time) bool {
	return k.holds.Left(parkScope(m, key), now) > 0
}

// order is model's keys in this call's rotation order: the next key
// first, so calls spread over the pool.
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

// pickKey chooses the key of an attempt on m: the next key of the
// rotation that is neither parked nor held by a rate limit; when every
// unparked key is held, the one free soonest (the attempt then waits for
// it or takes another model); ok is false when every key is parked. A
// model with one key always gets it.
func (a *Activities) pickKey(m config.ModelConfig, now time.Time) (key string, ok bool) {
	if !m.Pooled() {
		return m.Keys()[0], true
	}
	best, bestLeft := "", time.Duration(-1)
	for _, k := range a.keys.order(m) {
		if a.keys.isParked(m, k, now) {
			continue
		}
		mk := m.WithKey(k)
		_, left := a.held(mk, now)
		if left <= 0 {
			return k, true
		}
		if bestLeft < 0 || left < bestLeft {
			best, bestLeft = k, left
		}
	}
	return best, best != ""
}

// otherKey is a key of m's pool other than key that is free now (not
// parked, not held), or "".
func (a *Activities) otherKey(m config.ModelConfig, key string, now time.Time) string {
	if !m.Pooled() {
		return ""
	}
	for _, k := range m.Keys() {
		if k == key || a.keys.isParked(m, k, now) {
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
		if k != key && !a.keys.isParked(m, k, now) {
			return true
		}
	}
	return false
}
