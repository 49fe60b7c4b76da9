package guard

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
)

// testBreakerConfig is small enough to walk through by hand: open after 3
// failures in a row or more than half of the last 10 calls (from 6 calls
// on); open 1 s at first, doubled by each failed trial up to 8 s, halved
// by every 10 s closed; half-open, one trial out at a time until one
// succeeds, then up to 4 out at once; close once 4 trial results are in
// and 90 % of them succeeded (so all 4 must). The per-class settings are
// the default policy's.
var testBreakerConfig = func() config.BreakerConfig {
	c := config.DefaultConfig().Breaker
	c.ConsecutiveFailures = 3
	c.FailureRate = 0.5
	c.Window = 10
	c.MinCalls = 6
	c.OpenFor = config.Duration(time.Second)
	c.OpenForMax = config.Duration(8 * time.Second)
	c.HealAfter = config.Duration(10 * time.Second)
	c.CloseThreshold = 0.9
	c.Probes = 4
	return c
}()

// classBreakerConfig is the default breaker policy with the per-class
// settings a test works through by hand.
func classBreakerConfig(rate float64, minRetries int, window time.Duration) config.BreakerConfig {
	c := config.DefaultConfig().Breaker
	c.ClassFailureRate, c.ClassMinRetries, c.ClassWindow = rate, minRetries, config.Duration(window)
	return c
}

type breakerOp int

const (
	bopOK      breakerOp = iota // Record(now, true)
	bopFail                     // Record(now, false)
	bopAllow                    // Allow(now, u) must return allow (u is not read)
	bopTrip                     // Trip(now)
	bopOutcome                  // RecordOutcome(now, class)
	bopState                    // only check the state
)

// breakerStep is one call at one instant and the state it must leave.
type breakerStep struct {
	at    time.Duration
	op    breakerOp
	class failure.Class
	allow bool
	want  BreakerState
}

func bOK(at time.Duration, want BreakerState) breakerStep {
	return breakerStep{at: at, op: bopOK, want: want}
}

func bFail(at time.Duration, want BreakerState) breakerStep {
	return breakerStep{at: at, op: bopFail, want: want}
}

func bAllow(at time.Duration, allow bool, want BreakerState) breakerStep {
	return breakerStep{at: at, op: bopAllow, allow: allow, want: want}
}

func bState(at time.Duration, want BreakerState) breakerStep {
	return breakerStep{at: at, op: bopState, want: want}
}

func bOutcome(at time.Duration, class failure.Class, want BreakerState) breakerStep {
	return breakerStep{at: at, op: bopOutcome, class: class, want: want}
}

func bTrip(at time.Duration, want BreakerState) breakerStep {
	return breakerStep{at: at, op: bopTrip, want: want}
}

func bRepeat(n int, s breakerStep) []breakerStep {
	out := make([]breakerStep, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// bOpened opens a breaker at instant 0 with three failures.
func bOpened() []breakerStep {
	return []breakerStep{bFail(0, BreakerClosed), bFail(0, BreakerClosed), bFail(0, BreakerOpen)}
}

// bFirstTrialOK lets the first trial through at 1 s and it succeeds:
// from then on up to Probes trials may be out at once.
func bFirstTrialOK() []breakerStep {
	return []breakerStep{bAllow(brSec, true, BreakerHalfOpen), bOK(brSec, BreakerHalfOpen)}
}

// bTrialFails lets one trial through at at and fails it: the breaker
// reopens.
func bTrialFails(at time.Duration) []breakerStep {
	return []breakerStep{bAllow(at, true, BreakerHalfOpen), bFail(at, BreakerOpen)}
}

// bOpenFor checks that a breaker that opened at at stays open for d.
func bOpenFor(at, d time.Duration) []breakerStep {
	return []breakerStep{bState(at+d-time.Millisecond, BreakerOpen), bState(at+d, BreakerHalfOpen)}
}

// bRecovers lets four trials through at at, one after the other, and
// succeeds them: the breaker closes on the fourth.
func bRecovers(at time.Duration) []breakerStep {
	return []breakerStep{
		bAllow(at, true, BreakerHalfOpen), bOK(at, BreakerHalfOpen),
		bAllow(at, true, BreakerHalfOpen), bOK(at, BreakerHalfOpen),
		bAllow(at, true, BreakerHalfOpen), bOK(at, BreakerHalfOpen),
		bAllow(at, true, BreakerHalfOpen), bOK(at, BreakerClosed),
	}
}

// bGrownTo4s opens a breaker at 0 and fails its trials at 4 s (2 s, half
// the outage so far) and 12 s: it is open from 12 s for 4 s.
func bGrownTo4s() []breakerStep {
	return slices.Concat(bOpened(), bTrialFails(4*brSec), bOpenFor(4*brSec, 2*brSec), bTrialFails(12*brSec), bOpenFor(12*brSec, 4*brSec))
}

const brSec = time.Second

func TestBreaker(t *testing.T) {
	tests := []struct {
		name  string
		cfg   func(*config.BreakerConfig) // changes to testBreakerConfig
		steps []breakerStep
	}{
		{
			name: "consecutive failures open",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(0, false, BreakerOpen),
			}),
		},
		{
			name: "closed allows every call whatever u",
			steps: []breakerStep{
				bAllow(0, true, BreakerClosed),
				bAllow(0, true, BreakerClosed),
			},
		},
		{
			name: "a success resets the consecutive count",
			steps: []breakerStep{
				bFail(0, BreakerClosed), bFail(0, BreakerClosed), bOK(0, BreakerClosed),
				bFail(0, BreakerClosed), bFail(0, BreakerClosed),
			},
		},
		{
			name: "failure rate above the threshold opens",
			steps: []breakerStep{
				bFail(0, BreakerClosed), bOK(0, BreakerClosed), bFail(0, BreakerClosed),
				bOK(0, BreakerClosed), bFail(0, BreakerClosed), bOK(0, BreakerClosed), // 3/6: not above 0.5
				bFail(0, BreakerOpen), // 4/7
			},
		},
		{
			name: "the rate waits for MinCalls",
			steps: []breakerStep{
				bFail(0, BreakerClosed), bOK(0, BreakerClosed), bFail(0, BreakerClosed),
				bOK(0, BreakerClosed), bFail(0, BreakerClosed), // 3/5 but only 5 calls
			},
		},
		{
			name: "the rate is over the last Window calls, not all time",
			steps: slices.Concat(bRepeat(10, bOK(0, BreakerClosed)), []breakerStep{
				bFail(0, BreakerClosed), bFail(0, BreakerClosed), bOK(0, BreakerClosed),
				bFail(0, BreakerClosed), bFail(0, BreakerClosed), bOK(0, BreakerClosed),
				bFail(0, BreakerClosed), // last 10: 5 failures, not above half
				bFail(0, BreakerOpen),   // last 10: 6 failures (6/18 over all time)
			}),
		},
		{
			name: "the first open period is short: open_for",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(999*time.Millisecond, false, BreakerOpen),
				bState(brSec, BreakerHalfOpen),
			}),
		},
		{
			name: "at low traffic every call in half-open is a trial, whatever u and probe_fraction",
			cfg:  func(c *config.BreakerConfig) { c.ProbeFraction = 0.01 }, // not read
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(brSec, true, BreakerHalfOpen), bOK(1200*time.Millisecond, BreakerHalfOpen),
				bAllow(1500*time.Millisecond, true, BreakerHalfOpen), bOK(1700*time.Millisecond, BreakerHalfOpen),
				bAllow(2*brSec, true, BreakerHalfOpen), bOK(2200*time.Millisecond, BreakerHalfOpen),
				bAllow(2500*time.Millisecond, true, BreakerHalfOpen), bOK(2700*time.Millisecond, BreakerClosed), // 4/4
			}),
		},
		{
			name: "half-open lets one trial out at a time until one succeeds",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(brSec, true, BreakerHalfOpen),
				bAllow(brSec, false, BreakerHalfOpen), // the first trial is out
				bAllow(1500*time.Millisecond, false, BreakerHalfOpen),
				bOK(1600*time.Millisecond, BreakerHalfOpen), // it succeeded: several at once now
				bAllow(1600*time.Millisecond, true, BreakerHalfOpen),
				bAllow(1600*time.Millisecond, true, BreakerHalfOpen),
			}),
		},
		{
			name: "a failed first trial lets none other out: it reopens",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(4*brSec, true, BreakerHalfOpen),
				bAllow(4*brSec, false, BreakerHalfOpen),
				bFail(4100*time.Millisecond, BreakerOpen), // at best 3/4 < 90 %
				bAllow(4100*time.Millisecond, false, BreakerOpen),
			}, bOpenFor(4100*time.Millisecond, 2*brSec)),
		},
		{
			name: "a trial out for the open period is lost: another goes",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(brSec, true, BreakerHalfOpen),
				bAllow(1999*time.Millisecond, false, BreakerHalfOpen),
				bAllow(2*brSec, true, BreakerHalfOpen),      // out 1 s, the open period
				bAllow(2*brSec, false, BreakerHalfOpen),     // one at a time still
				bOK(2100*time.Millisecond, BreakerHalfOpen), // a result for one of the two
				bAllow(2100*time.Millisecond, true, BreakerHalfOpen),
			}),
		},
		{
			name: "a trial is lost after the grown open period, not open_for",
			steps: slices.Concat(bGrownTo4s(), []breakerStep{ // half-open at 16 s, period 4 s
				bAllow(16*brSec, true, BreakerHalfOpen),
				bAllow(17*brSec, false, BreakerHalfOpen), // out 1 s: open_for, not the period
				bAllow(19999*time.Millisecond, false, BreakerHalfOpen),
				bAllow(20*brSec, true, BreakerHalfOpen),
			}),
		},
		{
			name: "after a success up to probes trials are out at once, and no more",
			steps: slices.Concat(bOpened(), bFirstTrialOK(), []breakerStep{
				bAllow(1100*time.Millisecond, true, BreakerHalfOpen),
				bAllow(1100*time.Millisecond, true, BreakerHalfOpen),
				bAllow(1100*time.Millisecond, true, BreakerHalfOpen),
				bAllow(1100*time.Millisecond, true, BreakerHalfOpen),  // 4 out
				bAllow(1100*time.Millisecond, false, BreakerHalfOpen), // a fifth is refused
				bOK(1200*time.Millisecond, BreakerHalfOpen),           // 3 out: room for one
				bAllow(1200*time.Millisecond, true, BreakerHalfOpen),
				bAllow(1200*time.Millisecond, false, BreakerHalfOpen),
				bOK(1300*time.Millisecond, BreakerHalfOpen), // 3 results < probes
				bOK(1300*time.Millisecond, BreakerClosed),   // 4/4: close
				bAllow(1300*time.Millisecond, true, BreakerClosed),
			}),
		},
		{
			name: "with probes trials out, one out for the open period lets another through",
			steps: slices.Concat(bOpened(), bFirstTrialOK(), bRepeat(4, bAllow(brSec, true, BreakerHalfOpen)), []breakerStep{
				bAllow(1999*time.Millisecond, false, BreakerHalfOpen),
				bAllow(2*brSec, true, BreakerHalfOpen),
				bAllow(2*brSec, false, BreakerHalfOpen),
			}),
		},
		{
			name: "a closed breaker starts counting afresh",
			steps: slices.Concat(bOpened(), bRecovers(brSec), []breakerStep{
				bFail(2*brSec, BreakerClosed), bFail(2*brSec, BreakerClosed), bFail(2*brSec, BreakerOpen),
			}),
		},
		{
			name: "a failing trial reopens, for twice the period",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(4*brSec, true, BreakerHalfOpen), bOK(4500*time.Millisecond, BreakerHalfOpen),
				bAllow(4500*time.Millisecond, true, BreakerHalfOpen),
				bFail(4500*time.Millisecond, BreakerOpen), // at best 3/4 < 90 %
				bAllow(4500*time.Millisecond, false, BreakerOpen),
			}, bOpenFor(4500*time.Millisecond, 2*brSec)),
		},
		{
			name: "the period grows to at most half the time since the breaker opened",
			steps: slices.Concat(bOpened(), bOpenFor(0, brSec),
				bTrialFails(brSec), bOpenFor(brSec, brSec), // 1 s into the outage: stays 1 s
				bTrialFails(2*brSec), bOpenFor(2*brSec, brSec),
				bTrialFails(3*brSec), bOpenFor(3*brSec, 1500*time.Millisecond),
				bTrialFails(4500*time.Millisecond), bOpenFor(4500*time.Millisecond, 2250*time.Millisecond),
			),
		},
		{
			name: "trials that keep failing double the period up to open_for_max",
			steps: slices.Concat(bOpened(), bOpenFor(0, brSec),
				bTrialFails(10*brSec), bOpenFor(10*brSec, 2*brSec),
				bTrialFails(20*brSec), bOpenFor(20*brSec, 4*brSec),
				bTrialFails(30*brSec), bOpenFor(30*brSec, 8*brSec),
				bTrialFails(40*brSec), bOpenFor(40*brSec, 8*brSec), // the cap
			),
		},
		{
			name:  "open_for_max 0: the period never grows",
			cfg:   func(c *config.BreakerConfig) { c.OpenForMax = 0 },
			steps: slices.Concat(bOpened(), bTrialFails(brSec), bOpenFor(brSec, brSec), bTrialFails(2*brSec), bOpenFor(2*brSec, brSec)),
		},
		{
			name: "closes at 90 % of the trials, not only at all of them",
			cfg:  func(c *config.BreakerConfig) { c.Probes = 10 },
			steps: slices.Concat(bOpened(), bFirstTrialOK(), bRepeat(9, bAllow(brSec, true, BreakerHalfOpen)),
				[]breakerStep{bFail(brSec, BreakerHalfOpen)}, // at best 9/10
				bRepeat(7, bOK(brSec, BreakerHalfOpen)),
				[]breakerStep{bOK(brSec, BreakerClosed)}, // 9/10
			),
		},
		{
			name: "reopens when 90 % can no longer be reached",
			cfg:  func(c *config.BreakerConfig) { c.Probes = 10 },
			steps: slices.Concat(bOpened(), bFirstTrialOK(), bRepeat(9, bAllow(brSec, true, BreakerHalfOpen)),
				[]breakerStep{bFail(brSec, BreakerHalfOpen), bOK(brSec, BreakerHalfOpen),
					bFail(brSec, BreakerOpen)}, // at best 8/10
				bOpenFor(brSec, brSec), // 1 s into the outage: the period stays open_for
			),
		},
		{
			name: "one failure too many reopens for twice the period, whatever trials are still out",
			steps: slices.Concat(bOpened(), []breakerStep{
				bAllow(4*brSec, true, BreakerHalfOpen), bOK(4*brSec, BreakerHalfOpen),
			}, bRepeat(3, bAllow(4*brSec, true, BreakerHalfOpen)), []breakerStep{
				bFail(4100*time.Millisecond, BreakerOpen), // at best 3/4 < 90 %
				bOK(4200*time.Millisecond, BreakerOpen),   // the others' results come too late
				bOK(4200*time.Millisecond, BreakerOpen),
			}, bOpenFor(4100*time.Millisecond, 2*brSec), []breakerStep{
				bAllow(6100*time.Millisecond, true, BreakerHalfOpen),  // the trials left out do not count
				bAllow(6100*time.Millisecond, false, BreakerHalfOpen), // and it starts one at a time again
			}),
		},
		{
			name: "after heal_after closed the period is halved again",
			steps: slices.Concat(bGrownTo4s(), bRecovers(16*brSec), // closed at 16 s: 4 s → 2 s
				[]breakerStep{bFail(26*brSec, BreakerClosed), bFail(26*brSec, BreakerClosed), bFail(26*brSec, BreakerOpen)},
				bOpenFor(26*brSec, brSec),
			),
		},
		{
			name: "good trials halve the grown period; a trip before heal_after keeps the half",
			steps: slices.Concat(bGrownTo4s(), bRecovers(16*brSec),
				[]breakerStep{bFail(25*brSec, BreakerClosed), bFail(25*brSec, BreakerClosed), bFail(25*brSec, BreakerOpen)},
				bOpenFor(25*brSec, 2*brSec),
			),
		},
		{
			name: "every heal_after halves it again, down to open_for",
			steps: slices.Concat(bGrownTo4s(), bRecovers(16*brSec),
				[]breakerStep{bFail(56*brSec, BreakerClosed), bFail(56*brSec, BreakerClosed), bFail(56*brSec, BreakerOpen)},
				bOpenFor(56*brSec, brSec), // 4 → 2 → 1 → 1
			),
		},
		{
			name: "heal_after 0: back to open_for as soon as it closes",
			cfg:  func(c *config.BreakerConfig) { c.HealAfter = 0 },
			steps: slices.Concat(bGrownTo4s(), bRecovers(16*brSec),
				[]breakerStep{bFail(16*brSec, BreakerClosed), bFail(16*brSec, BreakerClosed), bFail(16*brSec, BreakerOpen)},
				bOpenFor(16*brSec, brSec),
			),
		},
		{
			name: "a trip from closed opens for the period, it does not grow it",
			steps: slices.Concat(bOpened(), bRecovers(brSec),
				[]breakerStep{bFail(2*brSec, BreakerClosed), bFail(2*brSec, BreakerClosed), bFail(2*brSec, BreakerOpen)},
				bOpenFor(2*brSec, brSec),
			),
		},
		{
			name: "half-open counts only as many results as trials let through",
			steps: slices.Concat(bOpened(), []breakerStep{
				bFail(brSec, BreakerHalfOpen), // a late result: no trial was let through
				bAllow(brSec, true, BreakerHalfOpen),
				bOK(1100*time.Millisecond, BreakerHalfOpen),
				bFail(1100*time.Millisecond, BreakerHalfOpen), // again more results than trials
			}),
		},
		{
			name: "results while open are ignored",
			steps: slices.Concat(bOpened(), bRepeat(5, bOK(500*time.Millisecond, BreakerOpen)), []breakerStep{
				bState(brSec, BreakerHalfOpen),
				bAllow(brSec, true, BreakerHalfOpen),
				bAllow(brSec, false, BreakerHalfOpen), // none was a successful trial: one at a time
			}),
		},
		{
			name:  "trip opens a closed breaker at once",
			steps: slices.Concat([]breakerStep{bTrip(5*brSec, BreakerOpen)}, bOpenFor(5*brSec, brSec)),
		},
		{
			name: "trip extends an open breaker",
			steps: slices.Concat(bOpened(), []breakerStep{
				bTrip(800*time.Millisecond, BreakerOpen),
				bState(brSec, BreakerOpen),
			}, bOpenFor(800*time.Millisecond, brSec)),
		},
		{
			name: "trip of a half-open breaker is a failed trial",
			steps: slices.Concat(bOpened(), []breakerStep{
				bState(brSec, BreakerHalfOpen),
				bTrip(4*brSec, BreakerOpen),
			}, bOpenFor(4*brSec, 2*brSec)),
		},
		{
			name: "only upstream-health classes count",
			steps: []breakerStep{
				bOutcome(0, failure.InvalidRequest, BreakerClosed),
				bOutcome(0, failure.InvalidRequest, BreakerClosed),
				bOutcome(0, failure.InvalidRequest, BreakerClosed),
				bOutcome(0, failure.ContentFilter, BreakerClosed),
				bOutcome(0, failure.ContextLengthExceeded, BreakerClosed),
				bOutcome(0, failure.OutputTruncated, BreakerClosed),
				bOutcome(0, failure.ModelNotFound, BreakerClosed),
				bOutcome(0, failure.BreakerOpen, BreakerClosed),
				bOutcome(0, failure.WorkerLost, BreakerClosed),
				bOutcome(0, failure.ServerError, BreakerClosed),
				bOutcome(0, failure.Timeout, BreakerClosed),
				bOutcome(0, failure.None, BreakerClosed), // a success resets the count
				bOutcome(0, failure.QueueFull, BreakerClosed),
				bOutcome(0, failure.RateLimited, BreakerClosed),
				bOutcome(0, failure.Connect, BreakerOpen),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testBreakerConfig
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			b := NewBreaker(cfg)
			for i, s := range tt.steps {
				now := budgetAt(s.at)
				switch s.op {
				case bopOK:
					b.Record(now, true)
				case bopFail:
					b.Record(now, false)
				case bopAllow:
					if got := b.Allow(now); got != s.allow {
						t.Fatalf("step %d (t=%v): Allow = %v, want %v", i, s.at, got, s.allow)
					}
				case bopTrip:
					b.Trip(now)
				case bopOutcome:
					b.RecordOutcome(now, s.class)
				}
				if got := b.State(now); got != s.want {
					t.Fatalf("step %d (t=%v): state %v, want %v", i, s.at, got, s.want)
				}
			}
		})
	}
}

// The breaker built from the default policy uses its settings as they
// are: it trips after consecutive_failures, opens for open_for, doubles the
// period with each failed trial up to open_for_max, lets one trial out at
// a time at first.
func TestBreakerDefaultConfig(t *testing.T) {
	cfg := config.DefaultConfig().Breaker
	if cfg.OpenFor.D() > 2*time.Second || cfg.OpenForMax.D() < 8*cfg.OpenFor.D() {
		t.Fatalf("default open_for %v, open_for_max %v: want a short first period (≤ 2 s) that can grow", cfg.OpenFor, cfg.OpenForMax)
	}
	b := NewBreaker(cfg)
	now := budgetAt(0)
	for i := range cfg.ConsecutiveFailures {
		if got := b.State(now); got != BreakerClosed {
			t.Fatalf("open after %d failures, want %d", i, cfg.ConsecutiveFailures)
		}
		b.Record(now, false)
	}
	if got := b.State(now); got != BreakerOpen {
		t.Fatalf("state %v after %d failures, want open", got, cfg.ConsecutiveFailures)
	}
	period := cfg.OpenFor.D()
	for i := range 16 {
		if got := b.State(now.Add(period - 1)); got != BreakerOpen {
			t.Fatalf("opening %d: state %v just before %v, want open", i, got, period)
		}
		now = now.Add(period)
		if got := b.State(now); got != BreakerHalfOpen {
			t.Fatalf("opening %d: state %v after %v, want half_open", i, got, period)
		}
		if !b.Allow(now) {
			t.Fatalf("opening %d: no trial let through", i)
		}
		if b.Allow(now) {
			t.Fatalf("opening %d: a second trial let through before the first's result", i)
		}
		b.Record(now, false)
		period = max(period, min(2*period, cfg.OpenForMax.D(), now.Sub(budgetAt(0))/2))
	}
	if period != cfg.OpenForMax.D() {
		t.Errorf("after 16 failed trials the period is %v, want the cap %v", period, cfg.OpenForMax)
	}
}

// The breakers refuse, loudly, exactly the settings config.Validate
// refuses; each constructor checks only the fields it reads.
func TestNewBreakerRefuses(t *testing.T) {
	tests := []struct {
		name    string
		set     func(*config.BreakerConfig)
		wantErr string // "": a setting no breaker reads, none refuses it
		class   bool   // a per-class setting: NewClassBreaker refuses it, NewBreaker ignores it
	}{
		{"consecutive_failures 0", func(c *config.BreakerConfig) { c.ConsecutiveFailures = 0 }, "breaker.consecutive_failures", false},
		{"failure_rate 0", func(c *config.BreakerConfig) { c.FailureRate = 0 }, "breaker.failure_rate", false},
		{"failure_rate above 1", func(c *config.BreakerConfig) { c.FailureRate = 1.1 }, "breaker.failure_rate", false},
		{"failure_rate NaN", func(c *config.BreakerConfig) { c.FailureRate = math.NaN() }, "breaker.failure_rate", false},
		{"window 0 (no calls to divide by)", func(c *config.BreakerConfig) { c.Window = 0 }, "breaker.window", false},
		{"min_calls 0", func(c *config.BreakerConfig) { c.MinCalls = 0 }, "breaker.min_calls", false},
		{"min_calls above window", func(c *config.BreakerConfig) { c.MinCalls = c.Window + 1 }, "breaker.min_calls", false},
		{"open_for 0", func(c *config.BreakerConfig) { c.OpenFor = 0 }, "breaker.open_for", false},
		{"open_for_max below open_for", func(c *config.BreakerConfig) { c.OpenForMax = c.OpenFor - 1 }, "breaker.open_for_max", false},
		{"open_for_max negative", func(c *config.BreakerConfig) { c.OpenForMax = -1 }, "breaker.open_for_max", false},
		{"heal_after negative", func(c *config.BreakerConfig) { c.HealAfter = -1 }, "breaker.heal_after", false},
		{"probe_fraction above 1 (no longer read)", func(c *config.BreakerConfig) { c.ProbeFraction = 2 }, "", false},
		{"close_threshold 0", func(c *config.BreakerConfig) { c.CloseThreshold = 0 }, "breaker.close_threshold", false},
		{"close_threshold above 1", func(c *config.BreakerConfig) { c.CloseThreshold = 2 }, "breaker.close_threshold", false},
		{"probes 0", func(c *config.BreakerConfig) { c.Probes = 0 }, "breaker.probes", false},
		{"class_failure_rate 0", func(c *config.BreakerConfig) { c.ClassFailureRate = 0 }, "breaker.class_failure_rate", true},
		{"class_failure_rate +Inf", func(c *config.BreakerConfig) { c.ClassFailureRate = math.Inf(1) }, "breaker.class_failure_rate", true},
		{"class_window 0", func(c *config.BreakerConfig) { c.ClassWindow = 0 }, "breaker.class_window", true},
		{"class_min_retries 0", func(c *config.BreakerConfig) { c.ClassMinRetries = 0 }, "breaker.class_min_retries", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full := config.DefaultConfig()
			tt.set(&full.Breaker)
			if err := full.Validate(); err == nil {
				t.Fatal("config.Validate() accepts it; guard must agree with it")
			}
			cfg := full.Breaker
			constructors := []struct {
				name   string
				refuse bool
				build  func()
			}{
				{"NewBreaker", tt.wantErr != "" && !tt.class, func() { NewBreaker(cfg) }},
				{"NewBreakerRegistry", tt.wantErr != "" && !tt.class, func() { NewBreakerRegistry(cfg, nil) }},
				{"NewClassBreaker", tt.wantErr != "" && tt.class, func() { NewClassBreaker(cfg) }},
			}
			for _, c := range constructors {
				got := panicText(c.build)
				switch {
				case !c.refuse && got != "":
					t.Errorf("%s panicked on a setting it does not read: %s", c.name, got)
				case c.refuse && !strings.Contains(got, tt.wantErr):
					t.Errorf("%s panic = %q, want one naming %s", c.name, got, tt.wantErr)
				}
			}
		})
	}
}

func TestBreakerStateString(t *testing.T) {
	tests := []struct {
		state BreakerState
		want  string
	}{
		{BreakerClosed, "closed"},
		{BreakerOpen, "open"},
		{BreakerHalfOpen, "half_open"},
		{BreakerState(9), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.state.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

type breakerHookCall struct {
	model    string
	from, to BreakerState
	at       time.Duration
}

func TestBreakerRegistry(t *testing.T) {
	var calls []breakerHookCall
	reg := NewBreakerRegistry(testBreakerConfig, func(model string, from, to BreakerState, now time.Time) {
		calls = append(calls, breakerHookCall{model, from, to, now.Sub(budgetT0)})
	})
	const big, small = "qwen-72b", "qwen-14b"
	t0 := budgetAt(0)

	if got := reg.State(big, t0); got != BreakerClosed {
		t.Fatalf("unknown model state %v, want closed", got)
	}
	if got := reg.Snapshot(t0); len(got) != 0 {
		t.Fatalf("State created a breaker: %v", got)
	}
	for range 3 {
		reg.RecordOutcome(big, t0, failure.ServerError)
	}
	reg.RecordOutcome(small, t0, failure.InvalidRequest)
	if got := reg.Models(); !slices.Equal(got, []string{big}) {
		t.Fatalf("Models = %q, want only %q (an ignored class creates no breaker)", got, big)
	}
	if reg.Allow(big, t0) || !reg.Allow(small, t0) {
		t.Fatalf("Allow with %s open: %s %v, %s %v; want only %s", big, big, reg.Allow(big, t0), small, reg.Allow(small, t0), small)
	}
	want := map[string]BreakerState{big: BreakerOpen, small: BreakerClosed}
	if got := reg.Snapshot(t0); !maps.Equal(got, want) {
		t.Fatalf("Snapshot = %v, want %v", got, want)
	}

	t1 := budgetAt(brSec)
	if !reg.Allow(big, t1) {
		t.Fatal("half-open breaker refused its first trial")
	}
	if reg.Allow(big, t1) {
		t.Fatal("half-open breaker let a second trial out before the first's result")
	}
	reg.Record(big, t1, true)
	for i := range 3 {
		if !reg.Allow(big, t1) {
			t.Fatalf("half-open breaker refused trial %d after a success", i+2)
		}
		reg.Record(big, t1, true)
	}
	reg.Trip(small, budgetAt(11*brSec))

	wantCalls := []breakerHookCall{
		{big, BreakerClosed, BreakerOpen, 0},
		{big, BreakerOpen, BreakerHalfOpen, brSec},
		{big, BreakerHalfOpen, BreakerClosed, brSec},
		{small, BreakerClosed, BreakerOpen, 11 * brSec},
	}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("hook calls =\n%v\nwant\n%v", calls, wantCalls)
	}
	want = map[string]BreakerState{big: BreakerClosed, small: BreakerOpen}
	if got := reg.Snapshot(budgetAt(11 * brSec)); !maps.Equal(got, want) {
		t.Errorf("Snapshot = %v, want %v", got, want)
	}
}

// Under concurrent use every model's hook calls must form one chain
// (each change starts where the previous one ended).
func TestBreakerRegistryConcurrent(t *testing.T) {
	var mu sync.Mutex
	last := map[string]BreakerState{}
	var broken []string
	reg := NewBreakerRegistry(testBreakerConfig, func(model string, from, to BreakerState, now time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if from != last[model] {
			broken = append(broken, fmt.Sprintf("%s: %v→%v after %v", model, from, to, last[model]))
		}
		last[model] = to
	})
	models := []string{"a", "b", "c"}
	classes := []failure.Class{failure.None, failure.ServerError, failure.Timeout, failure.None, failure.InvalidRequest}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 400 {
				now := budgetAt(time.Duration(i) * 500 * time.Millisecond)
				m := models[(w+i)%len(models)]
				if reg.Allow(m, now) {
					reg.RecordOutcome(m, now, classes[(w+i)%len(classes)])
				}
				if i%50 == 0 {
					reg.Trip(m, now)
				}
				_ = reg.Snapshot(now)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(broken) > 0 {
		t.Errorf("hook calls out of order: %q", broken)
	}
	if len(last) == 0 {
		t.Error("no state change was reported")
	}
}

// classBreakerStep records retry outcomes of one class at one instant, then
// checks whether a class may retry.
type classBreakerStep struct {
	at        time.Duration
	class     failure.Class
	successes int
	failures  int
	check     failure.Class
	allow     bool
}

func TestClassBreaker(t *testing.T) {
	tests := []struct {
		name  string
		cfg   config.BreakerConfig
		steps []classBreakerStep
	}{
		{
			name: "opens above 15 % failed retries and recovers when the window slides",
			cfg:  classBreakerConfig(0.15, 20, time.Minute),
			steps: []classBreakerStep{
				{at: 0, class: failure.Timeout, successes: 16, failures: 3, check: failure.Timeout, allow: true}, // 19 < 20 samples
				{at: brSec, class: failure.Timeout, successes: 1, check: failure.Timeout, allow: true},           // 3/20 = 15 %: not above
				{at: 2 * brSec, class: failure.Timeout, failures: 1, check: failure.Timeout, allow: false},       // 4/21
				{at: 2 * brSec, check: failure.ServerError, allow: true},                                         // other classes unaffected
				{at: 59 * brSec, check: failure.Timeout, allow: false},                                           // still in the window
				{at: 60 * brSec, check: failure.Timeout, allow: true},                                            // the t=0 retries left
				{at: 61 * brSec, class: failure.Timeout, failures: 19, check: failure.Timeout, allow: false},     // 20/20 in the window
				{at: 122 * brSec, check: failure.Timeout, allow: true},                                           // all gone
			},
		},
		{
			name: "successful retries bring the rate back under the threshold",
			cfg:  classBreakerConfig(0.15, 20, time.Minute),
			steps: []classBreakerStep{
				{at: 0, class: failure.ServerError, successes: 16, failures: 4, check: failure.ServerError, allow: false}, // 4/20
				{at: brSec, class: failure.ServerError, successes: 7, check: failure.ServerError, allow: true},            // 4/27
			},
		},
		{
			name: "the empty class is never recorded or refused",
			cfg:  classBreakerConfig(0.15, 20, time.Minute),
			steps: []classBreakerStep{
				{at: 0, class: failure.None, failures: 100, check: failure.None, allow: true},
			},
		},
		{
			name: "custom rate, minimum and window",
			cfg:  classBreakerConfig(0.5, 4, 10*brSec),
			steps: []classBreakerStep{
				{at: 0, class: failure.RateLimited, successes: 1, failures: 2, check: failure.RateLimited, allow: true}, // 3 < 4 samples
				{at: brSec, class: failure.RateLimited, failures: 1, check: failure.RateLimited, allow: false},          // 3/4
				{at: 10 * brSec, check: failure.RateLimited, allow: true},                                               // 1 sample left
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClassBreaker(tt.cfg)
			for i, s := range tt.steps {
				now := budgetAt(s.at)
				for range s.successes {
					c.Record(s.class, now, true)
				}
				for range s.failures {
					c.Record(s.class, now, false)
				}
				if got := c.Allow(s.check, now); got != s.allow {
					t.Errorf("step %d (t=%v): Allow(%q) = %v, want %v (%+v)", i, s.at, s.check, got, s.allow, c.Snapshot(now))
				}
			}
		})
	}
}

func TestClassBreakerSnapshot(t *testing.T) {
	c := NewClassBreaker(classBreakerConfig(0.15, 20, time.Minute))
	now := budgetAt(0)
	for i := range 20 {
		c.Record(failure.Timeout, now, i%4 != 0) // 5 of 20 fail
	}
	c.Record(failure.QueueFull, now, true)
	want := map[failure.Class]ClassStats{
		failure.Timeout:   {Retries: 20, Failures: 5, Open: true},
		failure.QueueFull: {Retries: 1},
	}
	if got := c.Snapshot(now); !maps.Equal(got, want) {
		t.Errorf("Snapshot = %+v, want %+v", got, want)
	}
}

func TestClassBreakerConcurrent(t *testing.T) {
	c := NewClassBreaker(config.DefaultConfig().Breaker)
	now := budgetAt(0)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 100 {
				c.Record(failure.AllClasses[(w+i)%len(failure.AllClasses)], now, i%10 != 0)
				c.Allow(failure.Timeout, now)
			}
		})
	}
	wg.Wait()
	total := 0
	for _, s := range c.Snapshot(now) {
		total += s.Retries
	}
	if total != 16*100 {
		t.Errorf("recorded %d retries, want %d", total, 16*100)
	}
}

// TestBreakerPermitAdmit: the worker that plans an attempt asks Permit
// (no trial taken); the worker that runs it Admits it, which takes the
// trial whose outcome it then records, so half-open trials are counted
// where their results arrive.
func TestBreakerPermitAdmit(t *testing.T) {
	cfg := config.DefaultConfig().Breaker
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	planner, runner := NewBreaker(cfg), NewBreaker(cfg)
	planner.Trip(t0)
	runner.Trip(t0)
	half := t0.Add(cfg.OpenFor.D())
	if planner.Permit(t0) || runner.Admit(t0) {
		t.Fatal("an open breaker permitted or admitted an attempt")
	}
	// Permit takes no trial: asked again and again, it permits.
	for i := range cfg.Probes + 1 {
		if !planner.Permit(half) {
			t.Fatalf("half-open Permit refused call %d with no trial out", i+1)
		}
	}
	if planner.State(half) != BreakerHalfOpen {
		t.Fatalf("planner %s, want half-open", planner.State(half))
	}
	// Nor does a result the planner did not admit count: it is late.
	planner.Record(half, false)
	if planner.State(half) != BreakerHalfOpen {
		t.Errorf("Permit took a trial in the planner: %s", planner.State(half))
	}
	if !runner.Admit(half) {
		t.Fatal("a half-open breaker did not admit a permitted trial")
	}
	if runner.Permit(half) {
		t.Error("the runner permits a second trial while its first is out")
	}
	runner.Record(half, true)
	// The trial counted where it ran: with its success there, several
	// trials may be out at once in the runner; the planner, which saw no
	// success, still lets one out at a time.
	if !runner.Admit(half) || !runner.Permit(half) {
		t.Error("after a successful trial the runner does not let a second out")
	}
	if !planner.Admit(half) || planner.Permit(half) {
		t.Error("the planner, which saw no successful trial, lets a second trial out")
	}
}
