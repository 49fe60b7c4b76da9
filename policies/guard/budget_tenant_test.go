package guard

import (
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// TestTenantShareOfTheRetryBudget: with tenant_share 0.5 and other
// tenants calling, a tenant whose calls all fail gets at most half of
// the window's retries and the other tenant still retries; a tenant
// alone in the window has the whole budget; share 0 is first come,
// first served.
func TestTenantShareOfTheRetryBudget(t *testing.T) {
	cfg := config.BudgetConfig{Window: config.Duration(time.Minute), Ratio: 0.1, Floor: 10, TenantShare: 0.5}
	now := time.Unix(1_000_000, 0)

	b := NewRetryBudget(cfg)
	for range 10 {
		b.RecordRequestFor(now, "acme")
		b.RecordRequestFor(now, "globex")
	}
	// 20 requests: 2 + 10 = 12 retries allowed; acme may take 6.
	got := 0
	for range 20 {
		ok, capped := b.TryRetryFor(now, "acme")
		if ok {
			got++
		} else if !capped {
			t.Fatalf("acme refused for want of budget after %d retries: the cap should refuse it first", got)
		}
	}
	if got != 6 {
		t.Errorf("acme took %d retries of 12 while globex calls, want 6", got)
	}
	left := 0
	for range 20 {
		if ok, _ := b.TryRetryFor(now, "globex"); ok {
			left++
		}
	}
	if left != 6 {
		t.Errorf("globex retried %d times after acme's flood, want the other 6", left)
	}

	alone := NewRetryBudget(cfg)
	for range 20 {
		alone.RecordRequestFor(now, "acme")
	}
	n := 0
	for range 20 {
		if ok, _ := alone.TryRetryFor(now, "acme"); ok {
			n++
		}
	}
	if n != 12 {
		t.Errorf("a tenant alone took %d retries, want the whole 12", n)
	}

	cfg.TenantShare = 0
	fcfs := NewRetryBudget(cfg)
	for range 10 {
		fcfs.RecordRequestFor(now, "acme")
		fcfs.RecordRequestFor(now, "globex")
	}
	n = 0
	for range 20 {
		if ok, _ := fcfs.TryRetryFor(now, "acme"); ok {
			n++
		}
	}
	if n != 12 {
		t.Errorf("with no share acme took %d retries, want all 12", n)
	}
	// A minute later the window has moved on: acme's flood is forgotten.
	later := now.Add(2 * time.Minute)
	b.RecordRequestFor(later, "acme")
	b.RecordRequestFor(later, "globex")
	if ok, _ := b.TryRetryFor(later, "acme"); !ok {
		t.Error("acme's share did not come back once its flood left the window")
	}
}
