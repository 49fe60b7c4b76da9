package activities

import (
	"container/list"
	"crypto/sha256"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/faq"
	"github.com/durable-llm/durable-llm/policies/request"
)

// answerCache keeps good model answers in the worker's memory, by tenant,
// scenario and normalised question (README "Answer cache"): at most max,
// the least recently used dropped first, each served for ttl.
type answerCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	order   *list.List // of *cachedAnswer, most recently used first
	byKey   map[string]*list.Element
	private []*regexp.Regexp
}

type cachedAnswer struct {
	key, content, model string
	at                  time.Time
}

func newAnswerCache(cfg config.CacheConfig) *answerCache {
	if !cfg.Enabled {
		return nil
	}
	c := &answerCache{ttl: cfg.TTL.D(), max: cfg.MaxEntries, order: list.New(), byKey: map[string]*list.Element{}}
	for _, p := range cfg.Private {
		c.private = append(c.private, regexp.MustCompile(p)) // Validate compiled it
	}
	return c
}

// key is where req's answer is kept: tenant, scenario, the system and
// developer messages (hashed) and the normalised question. ok is false for
// a request whose answer must not be kept or served: anything but one
// question (with system messages), a request that asks for tool calls or
// JSON, images, or text that matches a private pattern.
func (c *answerCache) key(req request.Request) (string, bool) {
	if c == nil || len(req.Tools) > 0 || req.ResponseFormat != nil {
		return "", false
	}
	q := ""
	sys := sha256.New()
	texts := []string{}
	for _, m := range req.Messages {
		switch {
		case m.Role == request.RoleSystem || m.Role == request.RoleDeveloper:
			// The answer depends on the instructions too: they are part
			// of the key, and they may carry the user's data.
			fmt.Fprintf(sys, "%s\x00%s\x00", m.Role, m.Content)
			texts = append(texts, m.Content)
		case m.Role == request.RoleUser && q == "" && len(m.Parts) == 0:
			q = m.Content
			texts = append(texts, m.Content)
		default:
			return "", false // earlier turns, tool results or images
		}
	}
	for _, p := range c.private {
		for _, t := range texts {
			if p.MatchString(t) {
				return "", false
			}
		}
	}
	n := faq.Normalize(q)
	if n == "" {
		return "", false
	}
	return fmt.Sprintf("%s\x00%s\x00%x\x00%s", req.Tenant, req.Scenario, sys.Sum(nil)[:12], n), true
}

// put keeps an answer of model to req.
func (c *answerCache) put(req request.Request, content, model string, now time.Time) {
	key, ok := c.key(req)
	if !ok || content == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.Remove(e)
	}
	c.byKey[key] = c.order.PushFront(&cachedAnswer{key: key, content: content, model: model, at: now})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cachedAnswer).key)
	}
}

// get returns the answer kept for req, if one is younger than the TTL.
func (c *answerCache) get(req request.Request, now time.Time) (cachedAnswer, bool) {
	key, ok := c.key(req)
	if !ok {
		return cachedAnswer{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return cachedAnswer{}, false
	}
	a := e.Value.(*cachedAnswer)
	if now.Sub(a.at) > c.ttl {
		c.order.Remove(e)
		delete(c.byKey, key)
		return cachedAnswer{}, false
	}
	c.order.MoveToFront(e)
	return *a, true
}

// cacheServes reports whether the cache answers a call that saw classes
// and skipped models for guards (config cache.on).
func cacheServes(cfg config.CacheConfig, classes []failure.Class, guards []string) bool {
	for _, on := range cfg.On {
		for _, c := range classes {
			if string(c) == on {
				return true
			}
		}
		if on == config.CacheOnBudget {
			for _, g := range guards {
				if g == "budget" {
					return true
				}
			}
		}
	}
	return false
}
