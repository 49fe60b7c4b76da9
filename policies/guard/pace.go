package guard

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Pacer paces the requests and tokens sent to each rate-limit scope to
// the limits the policy sets (rpm, tpm), so that a call waits its turn in
// the worker instead of being sent to be refused. Each limit is a token
// bucket (golang.org/x/time/rate) refilled at limit/60 per second, holding
// at most one second's worth (at least one request, and at least the
// tokens of the request being paced). Safe for concurrent use.
type Pacer struct {
	mu sync.Mutex
	by map[string]*pace
}

type pace struct {
	rpm, tpm         int
	requests, tokens *rate.Limiter
}

// NewPacer returns a pacer with no scope paced yet.
func NewPacer() *Pacer { return &Pacer{by: map[string]*pace{}} }

// Reserve books one request of tokens on scope at now under the limits rpm
// and tpm (0: no limit) and returns how long the caller must wait before
// sending it, and how to give the turn back when the request is not sent
// after all. When the wait is longer than maxWait nothing is booked and ok
// is false. The limits of a scope are those of its first reservation.
func (p *Pacer) Reserve(scope string, now time.Time, rpm, tpm, tokens int, maxWait time.Duration) (wait time.Duration, ok bool, undo func()) {
	undo = func() {}
	if rpm <= 0 && tpm <= 0 {
		return 0, true, undo
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	x := p.scope(scope, rpm, tpm)
	var rs []*rate.Reservation
	cancel := func() { // with p.mu held
		for _, r := range rs {
			r.CancelAt(now)
		}
	}
	if x.requests != nil {
		rs = append(rs, x.requests.ReserveN(now, 1))
	}
	if x.tokens != nil {
		n := max(tokens, 1)
		if n > x.tokens.Burst() {
			x.tokens.SetBurstAt(now, n) // one request larger than a second's worth still goes, alone
		}
		rs = append(rs, x.tokens.ReserveN(now, n))
	}
	for _, r := range rs {
		wait = max(wait, r.DelayFrom(now))
	}
	if wait > maxWait {
		cancel()
		return wait, false, undo
	}
	return wait, true, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		cancel()
	}
}

// Turn is how long a request of tokens on scope would wait at now for its
// turn under rpm and tpm; it books nothing, and a scope not paced yet is
// left to its first reservation.
func (p *Pacer) Turn(scope string, now time.Time, rpm, tpm, tokens int) time.Duration {
	if rpm <= 0 && tpm <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	x := p.by[scope]
	if x == nil {
		x = newPace(rpm, tpm)
	}
	wait := func(l *rate.Limiter, n int) time.Duration {
		if l == nil {
			return 0
		}
		short := float64(n) - l.TokensAt(now)
		if short <= 0 {
			return 0
		}
		return time.Duration(short / float64(l.Limit()) * float64(time.Second))
	}
	return max(wait(x.requests, 1), wait(x.tokens, max(tokens, 1)))
}

// scope is the pace of scope, made with rpm and tpm on first use; with
// p.mu held.
func (p *Pacer) scope(scope string, rpm, tpm int) *pace {
	x := p.by[scope]
	if x == nil {
		x = newPace(rpm, tpm)
		p.by[scope] = x
	}
	return x
}

// newPace is the pace of a scope not paced yet: its buckets full.
func newPace(rpm, tpm int) *pace {
	x := &pace{rpm: rpm, tpm: tpm}
	if rpm > 0 {
		x.requests = rate.NewLimiter(rate.Limit(float64(rpm)/60), perSecond(rpm))
	}
	if tpm > 0 {
		x.tokens = rate.NewLimiter(rate.Limit(float64(tpm)/60), perSecond(tpm))
	}
	return x
}

// perSecond is a bucket of one second's worth of a per-minute limit.
func perSecond(perMinute int) int {
	return max(int(math.Ceil(float64(perMinute)/60)), 1)
}
