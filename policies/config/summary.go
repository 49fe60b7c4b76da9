package config

import "time"

// SummaryModel is the model that writes the context refiner's summaries:
// Pruning.Summary.Model when it names a rung of the ladder, else the
// ladder's last (smallest) rung.
func (c *Config) SummaryModel() (ModelConfig, bool) {
	if m, ok := c.Model(c.Pruning.Summary.Model); ok {
		return m, true
	}
	if len(c.Models) == 0 {
		return ModelConfig{}, false
	}
	return c.Models[len(c.Models)-1], true
}

func (s SummaryConfig) validate(c *Config, bad func(path, format string, args ...any)) {
	if s.Model != "" {
		if _, ok := c.Model(s.Model); !ok {
			bad("pruning.summary.model", "must name a model of the ladder (or be empty: its last rung), got %q", s.Model)
		}
	}
	if s.MaxTokens < 16 || s.MaxTokens > 4096 {
		bad("pruning.summary.max_tokens", "must be from 16 to 4096 tokens, got %d", s.MaxTokens)
	}
	if s.TTL < 0 || s.TTL.D() > 30*24*time.Hour {
		bad("pruning.summary.ttl", "must be a duration from 0s (not kept) to 720h, got %s", s.TTL)
	}
	if s.MaxEntries < 0 {
		bad("pruning.summary.max_entries", "must be 0 (not kept) or a positive count, got %d", s.MaxEntries)
	}
}
