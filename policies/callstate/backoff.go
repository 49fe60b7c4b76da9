package callstate

import (
	"math"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// FullJitter returns U(0, min(cap, base·2^n)) for the random number u:
// exactly u·min(cap, base·2^n). With the defaults (base 500ms, cap 8s) retry
// n waits up to 0.5 s, 1 s, 2 s, 4 s, 8 s, 8 s, …
//
// Out-of-range inputs are tolerated rather than trusted: n < 0 counts as 0,
// u is clamped to [0,1), a non-positive base or cap gives 0, and a large n
// never overflows (the ceiling is simply the cap). The result is always in
// [0, cap).
func FullJitter(n int, base, cap time.Duration, u float64) time.Duration {
	if base <= 0 || cap <= 0 {
		return 0
	}
	if n < 0 {
		n = 0
	}
	ceiling := cap
	// base·2^n < cap  ⇔  base < cap/2^n; testing it this way cannot overflow.
	if n < 63 && base <= cap>>uint(n) {
		ceiling = base << uint(n)
	}
	d := time.Duration(backoffUnit(u) * float64(ceiling))
	if d >= ceiling { // float rounding near huge ceilings
		d = ceiling - 1
	}
	return d
}

// Fixed returns the fixed wait before retry n (0 for the first retry): the
// n-th entry of waits, the last entry repeating for larger n. No waits, or a
// negative entry, means no wait.
func Fixed(waits []config.Duration, n int) time.Duration {
	if len(waits) == 0 {
		return 0
	}
	if n < 0 {
		n = 0
	}
	if n >= len(waits) {
		n = len(waits) - 1
	}
	if w := waits[n].D(); w > 0 {
		return w
	}
	return 0
}

// HonourRetryAfter decides whether an upstream's Retry-After is honoured
// (docs/how-it-works.md "Failure classes", rate_limited: "honour it exactly, capped at 60 s; beyond the cap,
// switch model"). It returns the wait and true when retryAfter is at most
// cap (a negative retryAfter counts as 0, "retry now"); beyond the cap it
// returns 0 and false: the caller must not wait, it switches model instead.
// A non-positive cap means no cap.
func HonourRetryAfter(retryAfter, cap time.Duration) (time.Duration, bool) {
	if retryAfter < 0 {
		retryAfter = 0
	}
	if cap > 0 && retryAfter > cap {
		return 0, false
	}
	return retryAfter, true
}

// backoffUnit maps u into [0,1): NaN and negatives become 0, values at or
// above 1 become the largest float64 below 1.
func backoffUnit(u float64) float64 {
	switch {
	case math.IsNaN(u) || u < 0:
		return 0
	case u >= 1:
		return math.Nextafter(1, 0)
	}
	return u
}
