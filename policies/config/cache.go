package config

import (
	"fmt"
	"regexp"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// CacheConfig is the answer cache (seed 003 §3.2, maintenance → local
// cache): good model answers are kept by tenant, scenario and normalised
// question, and answer a call before the FAQ when no model can.
type CacheConfig struct {
	Enabled bool `yaml:"enabled"`
	// TTL is how long an answer is served; MaxEntries bounds the answers
	// kept (the least recently used go first).
	TTL        Duration `yaml:"ttl"`
	MaxEntries int      `yaml:"max_entries"`
	// On lists when the cache answers: failure classes seen by the call
	// (service_unavailable, breaker_open, …) or "budget" (a retry budget
	// spent).
	On []string `yaml:"on"`
	// Private are regular expressions; a request whose user text matches
	// one carries user data: its answer is never kept.
	Private []string `yaml:"private"`
}

// CacheOnBudget is the word of CacheConfig.On for a spent retry budget.
const CacheOnBudget = "budget"

func (c CacheConfig) validate(bad func(path, format string, args ...any)) {
	if !c.Enabled {
		return
	}
	if c.TTL <= 0 {
		bad("cache.ttl", "must be a positive duration such as \"24h\", got %s", c.TTL)
	}
	if c.MaxEntries <= 0 {
		bad("cache.max_entries", "must be a positive number of answers, got %d", c.MaxEntries)
	}
	for i, on := range c.On {
		if on != CacheOnBudget && !failure.Class(on).Valid() {
			bad(fmt.Sprintf("cache.on[%d]", i), "must be a failure class or %q, got %q", CacheOnBudget, on)
		}
	}
	for i, p := range c.Private {
		if _, err := regexp.Compile(p); err != nil {
			bad(fmt.Sprintf("cache.private[%d]", i), "must be a regular expression (Go syntax): %v", err)
		}
	}
}
