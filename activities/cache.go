package activities

import (
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/faq"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/store"
)

// answerCache keeps good model answers in the worker's memory, by tenant,
// scenario and normalised question (docs/how-it-works.md "Answer cache"): at most max,
// the least recently used dropped first, each served for ttl; with a
// shared store, in the store too, for every worker.
type answerCache struct {
	// shared, when set, is the store every worker keeps answers in: put
	// writes there too, and get reads there after a miss here.
	shared  SharedCache
	puts    atomic.Int64
	ttl     time.Duration
	max     int
	mem     *lru[cachedAnswer] // this worker's
	private []*regexp.Regexp
}

type cachedAnswer struct {
	content, model string
	at             time.Time
}

// SharedCache is the answer cache every worker shares (store.Postgres).
type SharedCache interface {
	GetAnswer(ctx context.Context, key string, now time.Time) (store.Answer, bool, error)
	PutAnswer(ctx context.Context, key, tenant string, a store.Answer, ttl time.Duration) error
	TrimAnswers(ctx context.Context, now time.Time, max int) error
}

// sharedTimeout bounds one request to the shared cache: a slow store
// costs a call at most that, and a miss.
const sharedTimeout = 2 * time.Second

// trimEvery is how many puts a worker makes between trims of the shared
// cache to its size bound.
const trimEvery = 100

func newAnswerCache(cfg config.CacheConfig, shared SharedCache) *answerCache {
	if !cfg.Enabled {
		return nil
	}
	c := &answerCache{shared: shared, ttl: cfg.TTL.D(), max: cfg.MaxEntries, mem: newLRU[cachedAnswer](cfg.MaxEntries, cfg.TTL.D())}
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
		case m.Instructs():
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

// put keeps an answer of model to req. A shared store's failure is
// returned; the answer is kept here all the same.
func (c *answerCache) put(ctx context.Context, req request.Request, content, model string, now time.Time) error {
	key, ok := c.key(req)
	if !ok || content == "" {
		return nil
	}
	c.mem.put(key, cachedAnswer{content: content, model: model, at: now}, now)
	if c.shared == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	if err := c.shared.PutAnswer(sctx, key, req.Tenant, store.Answer{Content: content, Model: model, At: now}, c.ttl); err != nil {
		return err
	}
	if c.puts.Add(1)%trimEvery == 0 {
		return c.shared.TrimAnswers(sctx, now, c.max)
	}
	return nil
}

// get returns the answer kept for req, if one is younger than the TTL:
// this worker's, else the shared store's. A shared store's failure is
// returned with the miss.
func (c *answerCache) get(ctx context.Context, req request.Request, now time.Time) (cachedAnswer, bool, error) {
	key, ok := c.key(req)
	if !ok {
		return cachedAnswer{}, false, nil
	}
	if a, ok := c.mem.get(key, now); ok {
		return a, true, nil
	}
	if c.shared == nil {
		return cachedAnswer{}, false, nil
	}
	sctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	sa, ok, err := c.shared.GetAnswer(sctx, key, now)
	if err != nil || !ok {
		return cachedAnswer{}, false, err
	}
	a := cachedAnswer{content: sa.Content, model: sa.Model, at: sa.At}
	c.mem.put(key, a, a.at)
	return a, true, nil
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
				if g == string(guard.RuleBudget) {
					return true
				}
			}
		}
	}
	return false
}
