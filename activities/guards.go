package activities

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// blamesRequest reports whether a failure says more about the request than
// about the model, so that it does not count against the model's breaker
// (one tenant's huge requests would otherwise open it for everyone): a
// timeout of an attempt whose prompt took more than half of the model's
// context window (a long prefill), or that asked for more than a quarter
// of it as max_tokens (a long generation). Classes caused by the request
// alone (context_length_exceeded, output_truncated, invalid_request)
// never count (failure.Class.CountsForBreaker).
func blamesRequest(m config.ModelConfig, in CallInput, class failure.Class) bool {
	switch class {
	case failure.Timeout, failure.ReadTimeout:
	default:
		return false
	}
	w := m.ContextWindow
	return w > 0 && (in.Prompt.Tokens*2 > w || in.Shape.MaxTokens*4 > w)
}

// backpressure reports whether the refusal of an attempt is backpressure,
// which does not count against the model's breaker until it has lasted
// rate_limit.breaker_after (refusing: how long the endpoint has refused
// without an answer, recordOutlier). A 429 holds the model's
// rate_limit_scope (a pooled key's, that key) for its Retry-After, else
// rate_limit.hold: calls put off weigh the hold again at its release
// (rule hold, guard.Weigh), so the first released find out for the rest. A busy
// refusal (queue_full) is its endpoint's outlier ejection instead.
func (a *Activities) backpressure(m config.ModelConfig, v classify.Verdict, refusing time.Duration) bool {
	if v.Class != failure.RateLimited && v.Class != failure.QueueFull {
		return false
	}
	if v.Class == failure.RateLimited {
		d := a.cfg.RateLimit.Hold.D()
		if v.HasRetryAfter && v.RetryAfter > 0 {
			d = min(v.RetryAfter, a.cfg.Backoff.RetryAfterCap.D())
		}
		a.holds.Hold(m.Scope(m.RateLimitScope), a.now(), d)
	}
	return refusing < a.cfg.RateLimit.BreakerAfter.D()
}

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
