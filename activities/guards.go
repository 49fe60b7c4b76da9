package activities

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
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
// rate_limit.breaker_after. A 429 holds the model's rate_limit_scope for
// the upstream's Retry-After, else rate_limit.hold, and lasts while that
// scope is held without a break. A busy refusal (queue_full) is its
// endpoint's outlier ejection instead (recordOutlier; refusing is how
// long the endpoint has refused without an answer): a call with another
// rung goes there, one without waits for the probe, so nothing else is
// held.
func (a *Activities) backpressure(m config.ModelConfig, v classify.Verdict, refusing time.Duration) bool {
	var scope string
	switch v.Class {
	case failure.RateLimited:
		scope = m.Scope(m.RateLimitScope)
	case failure.QueueFull:
		return refusing < a.cfg.RateLimit.BreakerAfter.D()
	default:
		return false
	}
	d := a.cfg.RateLimit.Hold.D()
	if v.HasRetryAfter && v.RetryAfter > 0 {
		d = min(v.RetryAfter, a.cfg.Backoff.RetryAfterCap.D())
	}
	return a.holds.Hold(scope, a.now(), d) < a.cfg.RateLimit.BreakerAfter.D()
}

// headroom reads the provider's own rate-limit headers on any response:
// a pooled key's share of its limits left is noted for the key choice;
// when x-ratelimit-remaining-requests or -tokens says 0, the model's
// rate_limit_scope is held until the matching x-ratelimit-reset-* ("1s",
// "6m0s", "20ms", or seconds), so the next call waits its turn instead of
// being refused.
func (a *Activities) headroom(m config.ModelConfig, h http.Header) {
	now := a.now()
	if m.Pooled() {
		// The share of its limits the key has left: the key choice
		// favours the keys with the most.
		room, step, told := 1.0, 0.0, false
		for _, kind := range []string{"requests", "tokens"} {
			left, lerr := strconv.ParseFloat(strings.TrimSpace(h.Get("x-ratelimit-remaining-"+kind)), 64)
			limit, merr := strconv.ParseFloat(strings.TrimSpace(h.Get("x-ratelimit-limit-"+kind)), 64)
			if lerr == nil && merr == nil && limit > 0 {
				room, told = min(room, left/limit), true
				if kind == "requests" {
					step = 1 / limit
				}
			}
		}
		if told {
			a.keys.report(m, room, step, now)
		}
	}
	for _, kind := range []string{"requests", "tokens"} {
		if strings.TrimSpace(h.Get("x-ratelimit-remaining-"+kind)) != "0" {
			continue
		}
		reset := strings.TrimSpace(h.Get("x-ratelimit-reset-" + kind))
		d, err := time.ParseDuration(reset)
		if err != nil {
			s, ferr := strconv.ParseFloat(reset, 64)
			if ferr != nil || s < 0 {
				continue
			}
			d = time.Duration(s * float64(time.Second))
		}
		if d > 0 {
			a.holds.Hold(m.Scope(m.RateLimitScope), now, min(d, a.cfg.Backoff.RetryAfterCap.D()))
		}
	}
}
