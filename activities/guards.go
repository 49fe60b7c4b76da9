package activities

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// headroom reads the provider's own rate-limit headers on any response
// (rateLimits: x-ratelimit-* or anthropic-ratelimit-*): a pooled key's
// share of its limits left is noted for the key choice; when a limit's
// remaining says 0, the model's rate_limit_scope is held until that
// limit's reset, so the next call waits its turn instead of being refused.
func (a *Activities) headroom(m config.ModelConfig, h http.Header) {
	now := a.now()
	limits := rateLimits(h, now)
	if m.Pooled() {
		// The share of its limits the key has left: the key choice
		// favours the keys with the most.
		room, step, told := 1.0, 0.0, false
		for _, l := range limits {
			if l.known && l.limit > 0 {
				room, told = min(room, l.remaining/l.limit), true
				if l.kind == "requests" {
					step = 1 / l.limit
				}
			}
		}
		if told {
			a.keys.report(m, room, step, now)
		}
	}
	for _, l := range limits {
		if l.spent && l.reset > 0 && !a.without[guard.RuleBackpressure] {
			a.holds.Hold(m.Scope(m.RateLimitScope), now, min(l.reset, a.cfg.Backoff.RetryAfterCap.D()))
		}
	}
}

// rateLimit is one limit a provider's headers told.
type rateLimit struct {
	kind             string // requests, tokens, input-tokens, output-tokens
	limit, remaining float64
	known            bool          // limit and remaining were both told
	spent            bool          // remaining said 0
	reset            time.Duration // until the limit is whole again (0: not told)
}

// rateLimits reads OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,
// tokens} (reset as "1s", "6m0s", "20ms" or seconds) and Anthropic's
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
// remaining,reset} (reset as an RFC 3339 time).
func rateLimits(h http.Header, now time.Time) []rateLimit {
	var out []rateLimit
	read := func(kind, limitH, remainingH, resetH string, reset func(string) (time.Duration, bool)) {
		left := strings.TrimSpace(h.Get(remainingH))
		if left == "" {
			return
		}
		l := rateLimit{kind: kind, spent: left == "0"}
		var lerr, merr error
		l.remaining, lerr = strconv.ParseFloat(left, 64)
		l.limit, merr = strconv.ParseFloat(strings.TrimSpace(h.Get(limitH)), 64)
		l.known = lerr == nil && merr == nil
		if d, ok := reset(strings.TrimSpace(h.Get(resetH))); ok && d > 0 {
			l.reset = d
		}
		out = append(out, l)
	}
	for _, kind := range []string{"requests", "tokens"} {
		read(kind, "x-ratelimit-limit-"+kind, "x-ratelimit-remaining-"+kind, "x-ratelimit-reset-"+kind, resetAfter)
	}
	at := func(s string) (time.Duration, bool) {
		t, err := time.Parse(time.RFC3339, s)
		return t.Sub(now), err == nil
	}
	for _, kind := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		p := "anthropic-ratelimit-" + kind + "-"
		read(kind, p+"limit", p+"remaining", p+"reset", at)
	}
	return out
}

// resetAfter reads OpenAI's reset header: a Go duration or seconds.
func resetAfter(s string) (time.Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}
