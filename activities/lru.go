package activities

import (
	"container/list"
	"sync"
	"time"
)

// lru keeps at most max values by key in the worker's memory, the least
// recently used dropped first, each for ttl after its time: the answer
// cache's and the summary cache's own copies. Safe for concurrent use.
type lru[V any] struct {
	ttl   time.Duration
	max   int
	mu    sync.Mutex
	order *list.List // of *lruEntry[V], most recently used first
	byKey map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	at  time.Time
	v   V
}

func newLRU[V any](max int, ttl time.Duration) *lru[V] {
	return &lru[V]{ttl: ttl, max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// put keeps v under key from at.
func (l *lru[V]) put(key string, v V, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byKey[key]; ok {
		l.order.Remove(e)
	}
	l.byKey[key] = l.order.PushFront(&lruEntry[V]{key: key, at: at, v: v})
	for l.order.Len() > l.max {
		last := l.order.Back()
		l.order.Remove(last)
		delete(l.byKey, last.Value.(*lruEntry[V]).key)
	}
}

// get returns the value kept under key, unless it is older than the TTL
// at now (then it is dropped).
func (l *lru[V]) get(key string, now time.Time) (V, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero V
	e, ok := l.byKey[key]
	if !ok {
		return zero, false
	}
	en := e.Value.(*lruEntry[V])
	if now.Sub(en.at) > l.ttl {
		l.order.Remove(e)
		delete(l.byKey, key)
		return zero, false
	}
	l.order.MoveToFront(e)
	return en.v, true
}
