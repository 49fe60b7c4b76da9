package guard

import (
	"github.com/durable-llm/durable-llm/policies/config"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var budgetT0 = time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC)

func budgetAt(d time.Duration) time.Time { return budgetT0.Add(d) }

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
			name: "floor lets a quiet system retry",
			cfg:  config.BudgetConfig{Floor: 2},
			steps: []budgetStep{
				{at: 0, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 2}},
			},
		},
		{
			name: "ratio of requests on top of the floor",
			cfg:  config.BudgetConfig{Floor: 2},
			steps: []budgetStep{
				{at: 0, requests: 30, retries: 6, allowed: 5, want: BudgetSnapshot{Requests: 30, Retries: 5, Allowed: 5}},
				{at: time.Second, requests: 10, retries: 2, allowed: 1, want: BudgetSnapshot{Requests: 40, Retries: 6, Allowed: 6}},
			},
		},
		{
			name: "the window slides: old requests and retries stop counting",
			cfg:  config.BudgetConfig{Floor: 2},
			steps: []budgetStep{
				{at: 0, requests: 30, retries: 5, allowed: 5, want: BudgetSnapshot{Requests: 30, Retries: 5, Allowed: 5}},
				{at: 30 * time.Second, requests: 20, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 50, Retries: 7, Allowed: 7}},
				{at: 59*time.Second + 999*time.Millisecond, retries: 1, allowed: 0, want: BudgetSnapshot{Requests: 50, Retries: 7, Allowed: 7}},
				// t=0 has left the window: 20 requests, 2 retries remain.
				{at: 60 * time.Second, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 20, Retries: 4, Allowed: 4}},
				// The 30 s requests have left too; the floor is used up by the 60 s retries.
				{at: 90 * time.Second, retries: 3, allowed: 0, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 2}},
				{at: 120 * time.Second, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 2}},
			},
		},
		{
			name: "a storm cannot retry more than 10 % plus the floor",
			cfg:  config.BudgetConfig{},
			steps: []budgetStep{
				// 500 calls time out in one second and all want to retry (the
				// latency spike of README "Benchmarks").
				{at: 0, requests: 500, retries: 500, allowed: 60, want: BudgetSnapshot{Requests: 500, Retries: 60, Allowed: 60}},
				{at: time.Second, requests: 500, retries: 500, allowed: 50, want: BudgetSnapshot{Requests: 1000, Retries: 110, Allowed: 110}},
			},
		},
		{
			name: "buckets: a request counts until its one-second bucket leaves the window",
			cfg:  config.BudgetConfig{Ratio: 1, Floor: -1},
			steps: []budgetStep{
				{at: 0, want: BudgetSnapshot{}}, // the bucket grid starts here
				{at: 500 * time.Millisecond, requests: 1, want: BudgetSnapshot{Requests: 1, Allowed: 1}},
				{at: 59*time.Second + 900*time.Millisecond, want: BudgetSnapshot{Requests: 1, Allowed: 1}},
				{at: 60 * time.Second, want: BudgetSnapshot{Requests: 0, Allowed: 0}},
			},
		},
		{
			name: "negative floor: no retries without requests",
			cfg:  config.BudgetConfig{Floor: -1},
			steps: []budgetStep{
				{at: 0, retries: 1, allowed: 0, want: BudgetSnapshot{}},
				{at: time.Second, requests: 10, retries: 2, allowed: 1, want: BudgetSnapshot{Requests: 10, Retries: 1, Allowed: 1}},
			},
		},
		{
			name: "float ratio does not lose a retry to rounding",
			cfg:  config.BudgetConfig{Ratio: 0.29, Floor: -1},
			steps: []budgetStep{
				{at: 0, requests: 100, retries: 30, allowed: 29, want: BudgetSnapshot{Requests: 100, Retries: 29, Allowed: 29}},
			},
		},
		{
			name: "custom window of 10 s",
			cfg:  config.BudgetConfig{Window: config.Duration(10 * time.Second), Floor: 1},
			steps: []budgetStep{
				{at: 0, requests: 10, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 10, Retries: 2, Allowed: 2}},
				{at: 10 * time.Second, retries: 2, allowed: 1, want: BudgetSnapshot{Requests: 0, Retries: 1, Allowed: 1}},
			},
		},
		{
			name: "a clock stepping back counts at the latest instant",
			cfg:  config.BudgetConfig{Floor: 1},
			steps: []budgetStep{
				{at: 0, requests: 10, want: BudgetSnapshot{Requests: 10, Allowed: 2}},
				{at: 50 * time.Second, want: BudgetSnapshot{Requests: 10, Allowed: 2}},
				{at: 5 * time.Second, retries: 3, allowed: 2, want: BudgetSnapshot{Requests: 10, Retries: 2, Allowed: 2}},
				// The retries were counted at 50 s, so at 70 s they still count
				// (at 5 s they would have left the window).
				{at: 70 * time.Second, retries: 1, allowed: 0, want: BudgetSnapshot{Requests: 0, Retries: 2, Allowed: 1}},
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

func TestRetryBudgetDefaults(t *testing.T) {
	b := NewRetryBudget(config.BudgetConfig{})
	for range 100 {
		b.RecordRequest(budgetAt(0))
	}
	if got, want := b.Snapshot(budgetAt(0)), (BudgetSnapshot{Requests: 100, Allowed: 20}); got != want {
		t.Errorf("Snapshot = %+v, want %+v (10 %% of 100 + floor 10)", got, want)
	}
	if got := b.Snapshot(budgetAt(DefaultBudgetWindow)); got.Requests != 0 {
		t.Errorf("requests still counted after the default 60 s window: %+v", got)
	}
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
	b := NewRetryBudget(config.BudgetConfig{Ratio: 0.1, Floor: 10})
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
	budget := NewRetryBudget(config.BudgetConfig{})
	now := budgetAt(0)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			budget.RecordRequest(now)
			budget.TryRetry(now)
		}
	})
}
