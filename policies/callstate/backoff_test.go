package callstate

import (
	"math"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

func TestFullJitter(t *testing.T) {
	const (
		ms   = time.Millisecond
		base = 500 * ms
		cp   = 8 * time.Second
	)
	below1 := math.Nextafter(1, 0)
	cases := []struct {
		name       string
		n          int
		base, cap  time.Duration
		u          float64
		want       time.Duration
		wantAround bool // want is the ceiling; the result is just below it
	}{
		{"first retry, half", 0, base, cp, 0.5, 250 * ms, false},
		{"second retry, half", 1, base, cp, 0.5, 500 * ms, false},
		{"third retry, quarter", 2, base, cp, 0.25, 500 * ms, false},
		{"ceiling reaches the cap exactly", 4, base, cp, 0.999, 7992 * ms, false},
		{"capped", 5, base, cp, 0.5, 4 * time.Second, false},
		{"u = 0", 3, base, cp, 0, 0, false},
		{"u just below 1", 1, base, cp, below1, time.Second, true},
		{"u = 1 is clamped below the ceiling", 1, base, cp, 1, time.Second, true},
		{"u > 1 is clamped", 0, base, cp, 7, 500 * ms, true},
		{"negative u", 2, base, cp, -0.3, 0, false},
		{"NaN u", 2, base, cp, math.NaN(), 0, false},
		{"negative n counts as 0", -3, base, cp, 0.5, 250 * ms, false},
		{"n = 62 no overflow", 62, base, cp, 0.5, 4 * time.Second, false},
		{"n = 63 no overflow", 63, base, cp, 0.5, 4 * time.Second, false},
		{"n = 1000 no overflow", 1000, base, cp, 0.5, 4 * time.Second, false},
		{"huge base and n", 40, time.Hour, math.MaxInt64, 0.5, 1 << 62, false},
		{"huge cap, u just below 1", 70, time.Hour, math.MaxInt64, below1, math.MaxInt64, true},
		{"cap below base", 0, time.Second, 300 * ms, 0.5, 150 * ms, false},
		{"no base", 3, 0, cp, 0.5, 0, false},
		{"no cap", 3, base, 0, 0.5, 0, false},
		// docs/how-it-works.md "Failure classes": connect resends at 0.3 s · 2^n.
		{"connect n=0", 0, 300 * ms, 10 * time.Second, 0.5, 150 * ms, false},
		{"connect n=1", 1, 300 * ms, 10 * time.Second, 0.5, 300 * ms, false},
		{"connect n=2", 2, 300 * ms, 10 * time.Second, 0.5, 600 * ms, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FullJitter(c.n, c.base, c.cap, c.u)
			if c.wantAround {
				if got >= c.want || got < c.want-c.want/1e6 {
					t.Errorf("FullJitter = %v, want just below %v", got, c.want)
				}
				return
			}
			if got != c.want {
				t.Errorf("FullJitter = %v, want %v", got, c.want)
			}
		})
	}
}

func TestFullJitterStaysBelowCap(t *testing.T) {
	const base, cp = 500 * time.Millisecond, 8 * time.Second
	for n := -2; n < 200; n++ {
		for _, u := range []float64{0, 0.1, 0.5, 0.9, 0.999999, 1} {
			d := FullJitter(n, base, cp, u)
			ceiling := cp
			if n >= 0 && n < 5 {
				ceiling = base << n
			}
			if n < 0 {
				ceiling = base
			}
			if d < 0 || d >= cp || d > ceiling {
				t.Fatalf("FullJitter(%d, u=%v) = %v, outside [0, %v)", n, u, d, ceiling)
			}
		}
	}
}

func TestFixed(t *testing.T) {
	waits := []config.Duration{config.Duration(500 * time.Millisecond), config.Duration(1200 * time.Millisecond)}
	cases := []struct {
		name  string
		waits []config.Duration
		n     int
		want  time.Duration
	}{
		{"first", waits, 0, 500 * time.Millisecond},
		{"second", waits, 1, 1200 * time.Millisecond},
		{"the last repeats", waits, 5, 1200 * time.Millisecond},
		{"negative n", waits, -1, 500 * time.Millisecond},
		{"no waits", nil, 0, 0},
		{"negative entry", []config.Duration{config.Duration(-time.Second)}, 0, 0},
		{"single", []config.Duration{config.Duration(200 * time.Millisecond)}, 3, 200 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Fixed(c.waits, c.n); got != c.want {
				t.Errorf("Fixed = %v, want %v", got, c.want)
			}
		})
	}
}

func TestHonourRetryAfter(t *testing.T) {
	const cp = 60 * time.Second
	cases := []struct {
		name       string
		retryAfter time.Duration
		cap        time.Duration
		want       time.Duration
		ok         bool
	}{
		{"within the cap: exactly", 2 * time.Second, cp, 2 * time.Second, true},
		{"fractional", 1500 * time.Millisecond, cp, 1500 * time.Millisecond, true},
		{"at the cap", cp, cp, cp, true},
		{"beyond the cap: switch model", cp + time.Millisecond, cp, 0, false},
		{"negative means now", -time.Second, cp, 0, true},
		{"zero", 0, cp, 0, true},
		{"no cap", 10 * time.Minute, 0, 10 * time.Minute, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := HonourRetryAfter(c.retryAfter, c.cap)
			if got != c.want || ok != c.ok {
				t.Errorf("HonourRetryAfter = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}
