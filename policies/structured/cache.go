package structured

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// DefaultCacheBytes is the memory a Cache from NewCache keeps its schemas
// in: 64 MiB, a few thousand ordinary schemas (a 2 KB tool schema holds
// about 100 KiB, four compiled copies and its document) or four at the
// limits. A process has one (the request package's).
const DefaultCacheBytes = 64 << 20

// Cache compiles each schema once and keeps the compiled schemas whose
// estimated memory (Schema's cost: its document and its compiled copies)
// fits in its bound, evicting the least recently used. A schema that
// does not compile is kept too (its error), so refusing it again costs
// nothing. A schema larger than the whole bound is compiled and not kept.
// It is safe for concurrent use; one compilation of a schema runs at a
// time, and the callers that want it meanwhile wait for it.
type Cache struct {
	mu      sync.Mutex
	max     int64
	used    int64
	order   *list.List // of *entry, the most recently used first
	entries map[[32]byte]*list.Element
	pending map[[32]byte]*compiling
}

type entry struct {
	key  [32]byte
	s    *Schema
	err  error
	cost int64
}

type compiling struct {
	done chan struct{}
	s    *Schema
	err  error
}

// errorCost is what a kept compile error is counted as.
const errorCost = 512

// NewCache returns an empty Cache bounded by DefaultCacheBytes.
func NewCache() *Cache { return NewCacheBytes(DefaultCacheBytes) }

// NewCacheBytes returns an empty Cache bounded by maxBytes.
func NewCacheBytes(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, order: list.New(), entries: map[[32]byte]*list.Element{}, pending: map[[32]byte]*compiling{}}
}

// Schema compiles raw, or returns it compiled before. A nil Cache
// compiles every time.
func (c *Cache) Schema(raw json.RawMessage) (*Schema, error) {
	if c == nil {
		return Compile(raw)
	}
	key := sha256.Sum256(raw)
	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		c.order.MoveToFront(el)
		e := el.Value.(*entry)
		c.mu.Unlock()
		return e.s, e.err
	}
	if p, ok := c.pending[key]; ok {
		c.mu.Unlock()
		<-p.done
		return p.s, p.err
	}
	p := &compiling{done: make(chan struct{})}
	c.pending[key] = p
	c.mu.Unlock()

	p.s, p.err = Compile(raw)
	cost := int64(errorCost)
	if p.err == nil {
		cost = p.s.cost
	}
	c.mu.Lock()
	delete(c.pending, key)
	if cost <= c.max {
		c.used += cost
		c.entries[key] = c.order.PushFront(&entry{key: key, s: p.s, err: p.err, cost: cost})
		for c.used > c.max {
			last := c.order.Back()
			e := last.Value.(*entry)
			c.order.Remove(last)
			delete(c.entries, e.key)
			c.used -= e.cost
		}
	}
	c.mu.Unlock()
	close(p.done)
	return p.s, p.err
}

// Bytes is the estimated memory of the schemas c keeps, never above its
// bound.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Len is how many schemas (and compile errors) c keeps.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
