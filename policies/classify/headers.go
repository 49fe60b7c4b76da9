package classify

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var retryAfterNumberRE = regexp.MustCompile(`^\d+(\.\d+)?$`)

// maxRetryAfter bounds a parsed Retry-After so that absurd values cannot
// overflow a time.Duration; any cap the caller applies is far below.
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads how long the upstream asks to wait: the
// retry-after-ms header (milliseconds, OpenAI and Azure), else Retry-After
// in seconds (fractions allowed) or as an HTTP date, measured from now; a
// date in the past means 0. It reports false when neither header is present
// or parseable (negative numbers and garbage are ignored), and for a date
// when now is zero.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if s := strings.TrimSpace(h.Get("Retry-After-Ms")); retryAfterNumberRE.MatchString(s) {
		ms, _ := strconv.ParseFloat(s, 64)
		return secondsToDuration(ms / 1000), true
	}
	s := strings.TrimSpace(h.Get("Retry-After"))
	if s == "" {
		return 0, false
	}
	if retryAfterNumberRE.MatchString(s) {
		secs, _ := strconv.ParseFloat(s, 64)
		return secondsToDuration(secs), true
	}
	if t, err := http.ParseTime(s); err == nil && !now.IsZero() {
		return min(max(t.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}

func secondsToDuration(secs float64) time.Duration {
	if math.IsNaN(secs) || secs <= 0 {
		return 0
	}
	if secs >= maxRetryAfter.Seconds() {
		return maxRetryAfter
	}
	return time.Duration(math.Round(secs * float64(time.Second)))
}

// rateLimitRemaining reads X-RateLimit-Remaining.
func rateLimitRemaining(h http.Header) (int, bool) {
	s := strings.TrimSpace(h.Get("X-RateLimit-Remaining"))
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
