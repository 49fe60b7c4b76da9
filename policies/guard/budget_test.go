package guard

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

var budgetT0 = time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC)

func budgetAt(d time.Duration) time.Time { return budgetT0.Add(d) }

// budgetConfig is the default budget (config.DefaultConfig) with the
// window, ratio and floor a test works through by hand.
func budgetConfig(window time.Duration, ratio float64, floor int) config.BudgetConfig {
	c := config.DefaultConfig().Budget
	c.Window, c.Ratio, c.Floor = config.Duration(window), ratio, floor
	return c
}

// budgetStep is one instant of a budget's life: record requests, try
// retries (and how many must be allowed), then check the snapshot.
type budgetStep struct {
	at       time.Duration
	requests int
	retries  int // TryRetry calls
	allowed  int // how many of them must succeed
	want     BudgetSnapshot
}

func TestRetryBudget(t *testing.T) {
	tests := []struct {
		name  string
		cfg   config.BudgetConfig
		steps []budgetStep
	}{
		{
			name: "floor lets a quiet system retry, once per window",
			cfg:  budgetConfig(time.Minute, 0.1, 2),
			steps: []budgetStep{
				{at: 0, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 2}},
				// 2 retries per 60 s: none more within the window…
				{at: 30 * time.Second, retries: 3, allowed: 0, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 2}},
				// …and the floor again once those retries have left it.
				{at: 60 * time.Second, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 2}},
			},
		},
		{
			name: "ratio of requests on top of the floor",
			cfg:  budgetConfig(time.Minute, 0.1, 2),
			steps: []budgetStep{
				{at: 0, requests: 30, retries: 6, allowed: 5, want: BudgetSnapshot{Requests: 30, Retries: 5, Allowed: 5}},
				{at: time.Second, requests: 10, retries: 2, allowed: 1, want: BudgetSnapshot{Requests: 40, Retries: 6, Allowed: 6}},
			},
		},
		{
			name: "a storm cannot retry more than 10 % plus the floor",
			cfg:  budgetConfig(time.Minute, 0.1, 10),
			steps: []budgetStep{
				// 500 calls time out in one second and all want to retry (the
				// latency spike of docs/benchmarks.md).
				{at: 0, requests: 500, retries: 500, allowed: 60, want: BudgetSnapshot{Requests: 500, Retries: 60, Allowed: 60}},
				{at: time.Second, requests: 500, retries: 500, allowed: 50, want: BudgetSnapshot{Requests: 1000, Retries: 110, Allowed: 110}},
			},
		},
		{
			name: "buckets: a request counts until its one-second bucket leaves the window",
			cfg:  budgetConfig(time.Minute, 1, 0),
			steps: []budgetStep{
				{at: 0, want: BudgetSnapshot{}}, // the bucket grid starts here
				{at: 500 * time.Millisecond, requests: 1, want: BudgetSnapshot{Requests: 1, Allowed: 1}},
				{at: 59*time.Second + 900*time.Millisecond, want: BudgetSnapshot{Requests: 1, Allowed: 1}},
				{at: 60 * time.Second, want: BudgetSnapshot{Requests: 0, Allowed: 0}},
			},
		},
		{
			name: "floor 0: no retries beyond the ratio",
			cfg:  budgetConfig(time.Minute, 0.1, 0),
			steps: []budgetStep{
				{at: 0, retries: 1, allowed: 0, want: BudgetSnapshot{}},
				{at: time.Second, requests: 10, retries: 2, allowed: 1, want: BudgetSnapshot{Requests: 10, Retries: 1, Allowed: 1}},
			},
		},
		{
			name: "float ratio does not lose a retry to rounding",
			cfg:  budgetConfig(time.Minute, 0.29, 0),
			steps: []budgetStep{
				{at: 0, requests: 100, retries: 30, allowed: 29, want: BudgetSnapshot{Requests: 100, Retries: 29, Allowed: 29}},
			},
		},
		{
			name: "custom window of 10 s",
			cfg:  budgetConfig(10*time.Second, 0.1, 1),
			steps: []budgetStep{
				{at: 0, requests: 10, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 10, Retries: 2, Allowed: 2}},
				{at: 10 * time.Second, retries: 2, allowed: 1, want: BudgetSnapshot{Requests: 0, Retries: 1, Allowed: 1}},
			},
		},
		{
			name: "ratio 0, floor 3: 3 retries per window, whatever the traffic",
			cfg:  budgetConfig(time.Minute, 0, 3),
			steps: []budgetStep{
				{at: 0, requests: 1000, retries: 5, allowed: 3, want: BudgetSnapshot{Requests: 1000, Retries: 3, Allowed: 3}},
				{at: 20 * time.Second, requests: 1000, retries: 5, allowed: 0, want: BudgetSnapshot{Requests: 2000, Retries: 3, Allowed: 3}},
				// A whole window later the reserve is full again.
				{at: 60 * time.Second, retries: 5, allowed: 3, want: BudgetSnapshot{Requests: 1000, Retries: 3, Allowed: 3}},
				{at: 90 * time.Second, retries: 5, allowed: 0, want: BudgetSnapshot{Requests: 0, Retries: 3, Allowed: 3}},
			},
		},
		{
			name: "ratio 0, floor 0: no retries at all",
			cfg:  budgetConfig(time.Minute, 0, 0),
			steps: []budgetStep{
				{at: 0, retries: 1, allowed: 0, want: BudgetSnapshot{}},
				{at: time.Second, requests: 10000, retries: 100, allowed: 0, want: BudgetSnapshot{Requests: 10000}},
				{at: 61 * time.Second, requests: 1, retries: 1, allowed: 0, want: BudgetSnapshot{Requests: 1}},
			},
		},
		{
			name: "a clock stepping back counts at the latest instant",
			cfg:  budgetConfig(time.Minute, 0, 1),
			steps: []budgetStep{
				{at: 0, want: BudgetSnapshot{Allowed: 1}},
				{at: 50 * time.Second, want: BudgetSnapshot{Allowed: 1}},
				{at: 5 * time.Second, retries: 2, allowed: 1, want: BudgetSnapshot{Retries: 1, Allowed: 1}},
				// The retry was counted at 50 s, so at 70 s the reserve has
				// refilled only a third of it (had it been counted at 5 s, it
				// would be full again).
				{at: 70 * time.Second, retries: 1, allowed: 0, want: BudgetSnapshot{Retries: 1, Allowed: 1}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewRetryBudget(tt.cfg)
			for i, s := range tt.steps {
				now := budgetAt(s.at)
				for range s.requests {
					b.RecordRequest(now)
				}
				got := 0
				for range s.retries {
					if b.TryRetry(now) {
						got++
					}
				}
				if got != s.allowed {
					t.Errorf("step %d (t=%v): %d of %d retries allowed, want %d", i, s.at, got, s.retries, s.allowed)
				}
				if snap := b.Snapshot(now); snap != s.want {
					t.Errorf("step %d (t=%v): Snapshot = %+v, want %+v", i, s.at, snap, s.want)
				}
				if rem, want := b.Remaining(now), s.want.Remaining(); rem != want {
					t.Errorf("step %d (t=%v): Remaining = %d, want %d", i, s.at, rem, want)
				}
			}
		})
	}
}

// The healthy traffic before an incident banks at most the floor: after a
// minute of 10 healthy calls a second, a 10 s incident in which 6 of every
// 10 calls fail and want a retry gets at most floor + 10 % of its 100
// calls in retries (a sliding window of 10 % of the requests alone let it
// have 70).
func TestRetryBudgetBanksNoMoreThanTheFloor(t *testing.T) {
	b := NewRetryBudget(budgetConfig(time.Minute, 0.1, 10))
	for s := range 60 {
		for range 10 {
			b.RecordRequest(budgetAt(time.Duration(s) * time.Second))
		}
	}
	got := 0
	for s := 60; s < 70; s++ {
		now := budgetAt(time.Duration(s) * time.Second)
		for range 10 {
			b.RecordRequest(now)
		}
		for range 6 {
			if b.TryRetry(now) {
				got++
			}
		}
	}
	if got > 10+10 {
		t.Errorf("the incident's 100 calls got %d retries, want at most 20 (floor 10 + 10 %% of 100)", got)
	}
	if got < 18 {
		t.Errorf("the incident's 100 calls got %d retries, want the floor and most of their 10 %% (≥ 18)", got)
	}
}

// TestRetryBudgetHoldsTheBoundOnThinTraffic: retries in a window stay
// within floor + ratio × its requests however thin its traffic: a call a
// second, in bursts, and retries whenever the budget lets them, from the
// first second of the window. A trickle of floor per window in the
// seconds too thin to earn it (a bucket of fewer than floor ÷
// (windowBuckets × ratio) requests), on top of the full reserve the
// window starts with, paid 21 retries here where the bound is 16.
func TestRetryBudgetHoldsTheBoundOnThinTraffic(t *testing.T) {
	const floor = 10
	b := NewRetryBudget(budgetConfig(time.Minute, 0.1, floor))
	got, requests := 0, 0
	for ms := 0; ms < 60_000; ms += 100 {
		now := budgetAt(time.Duration(ms) * time.Millisecond)
		if ms%2000 < 1000 && ms%500 == 0 { // a call a second, in bursts: 1 s buckets of 2, then of none
			b.RecordRequest(now)
			requests++
		}
		for b.TryRetry(now) {
			got++
		}
	}
	if bound := float64(floor) + 0.1*float64(requests); float64(got) > bound+1e-9 {
		t.Errorf("%d requests in a window got %d retries, over floor + 10 %% = %.1f", requests, got, bound)
	}
	if got < floor+requests/10-1 {
		t.Errorf("%d requests in a window got %d retries, want about the floor and 10 %%", requests, got)
	}
}

// An incident whose calls wait instead of sending (every other second no
// request at all: open breakers) earns no idle refill while the window's
// traffic pays the floor: over 40 s its 200 requests get at most 10 % of
// them plus the floor in retries.
func TestRetryBudgetGivesAWaitingIncidentNoIdleRefill(t *testing.T) {
	b := NewRetryBudget(budgetConfig(time.Minute, 0.1, 10))
	got, requests := 0, 0
	for s := range 40 {
		now := budgetAt(time.Duration(s) * time.Second)
		if s%2 == 0 {
			for range 10 {
				b.RecordRequest(now)
				requests++
			}
		}
		for range 10 {
			if b.TryRetry(now) {
				got++
			}
		}
	}
	if limit := requests/10 + 10; got > limit {
		t.Errorf("%d requests got %d retries, want at most %d (10 %% and the floor)", requests, got, limit)
	}
	if got < requests/10 {
		t.Errorf("%d requests got %d retries, want their 10 %% at least", requests, got)
	}
}

// A share budget (the hedges') follows the traffic of the last window: a
// minute of 10 calls a second pays for 5 % of them in a burst after it,
// where a retry budget's reserve would allow only its floor.
func TestShareBudgetFollowsTheWindow(t *testing.T) {
	cfg := budgetConfig(time.Minute, 0.05, 1)
	share, retry := NewShareBudget(cfg), NewRetryBudget(cfg)
	for s := range 60 {
		for range 10 {
			share.RecordRequest(budgetAt(time.Duration(s) * time.Second))
			retry.RecordRequest(budgetAt(time.Duration(s) * time.Second))
		}
	}
	burst := budgetAt(59*time.Second + 500*time.Millisecond)
	shared, retried := 0, 0
	for range 100 {
		if share.TryRetry(burst) {
			shared++
		}
		if retry.TryRetry(burst) {
			retried++
		}
	}
	if shared != 31 {
		t.Errorf("the share budget allowed %d in the burst, want 31 (5 %% of 600 + 1)", shared)
	}
	if retried > 2 {
		t.Errorf("the retry budget allowed %d in the burst, want its reserve of 1 and this second's 5 %% of 10 (≤ 2)", retried)
	}
}

// The budget built from the default policy uses its ratio, floor and
// window as they are.
func TestRetryBudgetDefaultConfig(t *testing.T) {
	cfg := config.DefaultConfig().Budget
	b := NewRetryBudget(cfg)
	for range 100 {
		b.RecordRequest(budgetAt(0))
	}
	want := BudgetSnapshot{Requests: 100, Allowed: int(cfg.Ratio*100+1e-9) + cfg.Floor}
	if got := b.Snapshot(budgetAt(0)); got != want {
		t.Errorf("Snapshot = %+v, want %+v (ratio %v of 100 + floor %d)", got, want, cfg.Ratio, cfg.Floor)
	}
	if got := b.Snapshot(budgetAt(cfg.Window.D() - time.Nanosecond)); got.Requests != 100 {
		t.Errorf("requests left before the %v window ended: %+v", cfg.Window, got)
	}
	if got := b.Snapshot(budgetAt(cfg.Window.D())); got.Requests != 0 {
		t.Errorf("requests still counted after the %v window: %+v", cfg.Window, got)
	}
}

// NewRetryBudget refuses, loudly, exactly the settings config.Validate
// refuses, and accepts the zeros that mean something.
func TestNewRetryBudgetRefuses(t *testing.T) {
	tests := []struct {
		name    string
		set     func(*config.BudgetConfig)
		wantErr string // "" : accepted
	}{
		{"window 0", func(c *config.BudgetConfig) { c.Window = 0 }, "budget.window"},
		{"negative window", func(c *config.BudgetConfig) { c.Window = config.Duration(-time.Second) }, "budget.window"},
		{"negative ratio", func(c *config.BudgetConfig) { c.Ratio = -0.1 }, "budget.ratio"},
		{"ratio above 1", func(c *config.BudgetConfig) { c.Ratio = 1.5 }, "budget.ratio"},
		{"NaN ratio", func(c *config.BudgetConfig) { c.Ratio = math.NaN() }, "budget.ratio"},
		{"negative floor", func(c *config.BudgetConfig) { c.Floor = -1 }, "budget.floor"},
		{"ratio 0", func(c *config.BudgetConfig) { c.Ratio = 0 }, ""},
		{"floor 0", func(c *config.BudgetConfig) { c.Floor = 0 }, ""},
		{"ratio 0 and floor 0", func(c *config.BudgetConfig) { c.Ratio, c.Floor = 0, 0 }, ""},
		{"ratio 1", func(c *config.BudgetConfig) { c.Ratio = 1 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full := config.DefaultConfig()
			tt.set(&full.Budget)
			if err := full.Validate(); (err != nil) != (tt.wantErr != "") {
				t.Fatalf("config.Validate() = %v; guard must agree with it", err)
			}
			got := panicText(func() { NewRetryBudget(full.Budget) })
			switch {
			case tt.wantErr == "" && got != "":
				t.Errorf("NewRetryBudget panicked: %s", got)
			case tt.wantErr != "" && !strings.Contains(got, tt.wantErr):
				t.Errorf("NewRetryBudget panic = %q, want one naming %s", got, tt.wantErr)
			}
		})
	}
}

// panicText runs f and returns what it panicked with, or "".
func panicText(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
			if msg == "" {
				msg = "(empty panic)"
			}
		}
	}()
	f()
	return ""
}

// Many goroutines recording requests and retrying at once must never get
// more retries than the bound, and must get exactly the bound once all
// requests are in.
func TestRetryBudgetConcurrent(t *testing.T) {
	const (
		workers           = 64
		requestsPerWorker = 50
		retriesPerWorker  = 100
	)
	b := NewRetryBudget(budgetConfig(time.Minute, 0.1, 10))
	var granted atomic.Int64
	var wg sync.WaitGroup

	// Phase 1: requests and retries interleaved.
	for w := range workers {
		wg.Go(func() {
			now := budgetAt(time.Duration(w) * time.Millisecond)
			for i := range retriesPerWorker {
				if i < requestsPerWorker {
					b.RecordRequest(now)
				}
				if b.TryRetry(now) {
					granted.Add(1)
				}
				_ = b.Remaining(now)
			}
		})
	}
	wg.Wait()
	now := budgetAt(time.Second)
	snap := b.Snapshot(now)
	if snap.Requests != workers*requestsPerWorker {
		t.Fatalf("Requests = %d, want %d", snap.Requests, workers*requestsPerWorker)
	}
	bound := workers*requestsPerWorker/10 + 10
	if g := int(granted.Load()); g != snap.Retries || g > bound {
		t.Fatalf("granted %d retries, recorded %d, bound %d", g, snap.Retries, bound)
	}

	// Phase 2: all requests are in; the rest of the budget goes out exactly.
	for range workers {
		wg.Go(func() {
			for range retriesPerWorker {
				if b.TryRetry(now) {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if g := int(granted.Load()); g != bound {
		t.Errorf("granted %d retries in total, want exactly the bound %d", g, bound)
	}
	if got := b.Remaining(now); got != 0 {
		t.Errorf("Remaining = %d, want 0", got)
	}
}

func BenchmarkRetryBudgetTryRetry(b *testing.B) {
	budget := NewRetryBudget(config.DefaultConfig().Budget)
	now := budgetAt(0)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			budget.RecordRequest(now)
			budget.TryRetry(now)
		}
	})
}

// fleetBudgets returns the budgets of n workers, each joined to a sync
// whose fleet view counts n workers.
func fleetBudgets(t *testing.T, cfg config.BudgetConfig, n int) []*RetryBudget {
	t.Helper()
	bs := make([]*RetryBudget, n)
	for i := range bs {
		s := NewSync(fmt.Sprintf("w%d", i), time.Second)
		s.SetView(View{At: budgetT0, Workers: n}, budgetT0)
		if s.Workers() != n {
			t.Fatalf("worker %d counts a fleet of %d, want %d", i, s.Workers(), n)
		}
		all := NewBudgets(cfg)
		all.SetSync(s)
		bs[i] = all.For("http://up:8000")
	}
	return bs
}

// spend takes every retry b allows at now and returns how many.
func spend(t *testing.T, b *RetryBudget, now time.Time) int {
	t.Helper()
	n := 0
	for b.TryRetry(now) {
		if n++; n > 1000 {
			t.Fatal("a budget allowed more than 1000 retries at one instant")
		}
	}
	return n
}

// TestFloorSplitAddsUp: the workers of a fleet, each keeping 1/Workers of
// the floor in its own budget, add up to the policy's budget. With ratio
// 0, at one instant a fleet of at most floor workers gets N × ⌊floor/N⌋
// retries, never more than the floor. A retry cannot be split, so each
// worker's reserve holds at least one whole retry: a fleet larger than the
// floor keeps up to one per worker, and the bound at one instant is
// max(floor, N) (a fleet of 20 with a floor of 10 gets 20 at once, one per
// worker). With ratio 0.1 and each worker recording R requests, the
// fleet's retries stay within 0.1 × the fleet's requests + max(floor, N):
// at one instant, and over a window whose traffic earns each worker its
// share of the floor (0.1 × R ≥ floor/N; on thinner traffic each budget
// also refills its share per window, as a lone budget refills its floor).
func TestFloorSplitAddsUp(t *testing.T) {
	const floor = 10
	for _, n := range []int{1, 2, 4, 10, 20} {
		t.Run(fmt.Sprintf("%d workers", n), func(t *testing.T) {
			got := 0
			for _, b := range fleetBudgets(t, budgetConfig(time.Minute, 0, floor), n) {
				got += spend(t, b, budgetT0)
			}
			if n <= floor {
				if want := n * (floor / n); got != want {
					t.Errorf("ratio 0: the fleet got %d retries at one instant, want %d × %d = %d", got, n, floor/n, want)
				}
				if got > floor {
					t.Errorf("ratio 0: the fleet got %d retries at one instant, over the floor of %d", got, floor)
				}
			}
			if bound := max(floor, n); got > bound {
				t.Errorf("ratio 0: the fleet got %d retries at one instant, over max(floor, workers) = %d", got, bound)
			}

			for _, r := range []int{0, 1, 5, 10, 50, 200} {
				bound := 0.1*float64(n*r) + float64(max(floor, n))
				// At one instant: R requests each, then every retry allowed.
				got := 0
				for _, b := range fleetBudgets(t, budgetConfig(time.Minute, 0.1, floor), n) {
					for range r {
						b.RecordRequest(budgetT0)
					}
					got += spend(t, b, budgetT0)
				}
				if float64(got) > bound+1e-9 {
					t.Errorf("ratio 0.1, %d requests each at one instant: the fleet got %d retries, over %.1f", r, got, bound)
				}
				if r*n < 10*floor {
					continue // 0.1 × R < floor/N: too thin to earn the worker's share of the floor
				}
				// Over a window: R requests each, spread evenly, every
				// retry allowed taken every 100 ms.
				got = 0
				for _, b := range fleetBudgets(t, budgetConfig(time.Minute, 0.1, floor), n) {
					sent := 0
					for at := time.Duration(0); at < time.Minute; at += 100 * time.Millisecond {
						now := budgetAt(at)
						for ; sent < r && time.Duration(sent)*time.Minute/time.Duration(r) <= at; sent++ {
							b.RecordRequest(now)
						}
						got += spend(t, b, now)
					}
				}
				if float64(got) > bound+1e-9 {
					t.Errorf("ratio 0.1, %d requests each over a window: the fleet got %d retries, over %.1f", r, got, bound)
				}
			}
		})
	}
}
