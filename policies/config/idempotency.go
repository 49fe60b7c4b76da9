package config

import "time"

// IdempotencyConfig says how long a completed call answers a duplicate of
// its request (docs/how-it-works.md "Idempotency and audit"). A duplicate that arrives
// while the call runs always attaches to it: one generation, whatever the
// window.
type IdempotencyConfig struct {
	// ReplayWindow is how long after a call completed the same request
	// under its derived key (a content hash) still gets its recorded
	// answer: long enough for a client's own retries. After it the same
	// request is a new call, as a chat UI's "regenerate" expects. Default
	// 60 s.
	ReplayWindow Duration `yaml:"replay_window"`
	// KeyWindow is the same for an explicit Idempotency-Key, the caller's
	// promise that two requests are one; after it the key is free again.
	// Default 24 h (Stripe keeps keys as long).
	KeyWindow Duration `yaml:"key_window"`
}

// The defaults of IdempotencyConfig.
const (
	DefaultReplayWindow = time.Minute
	DefaultKeyWindow    = 24 * time.Hour
)

func (c IdempotencyConfig) validate(bad func(path, format string, args ...any)) {
	if c.ReplayWindow.D() <= 0 {
		bad("idempotency.replay_window", "must be a positive duration, got %s", c.ReplayWindow.D())
	}
	if c.KeyWindow.D() < c.ReplayWindow.D() {
		bad("idempotency.key_window", "must be at least replay_window (%s), got %s", c.ReplayWindow.D(), c.KeyWindow.D())
	}
}
