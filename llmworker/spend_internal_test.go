package llmworker

import (
	"testing"
	"time"
)

// TestSpendMeterAlone: without a store the meter counts this worker's
// calls, priced per kind, per tenant; at midnight UTC the day starts
// again from nothing.
func TestSpendMeterAlone(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)
	u := NewUsage(nil, time.Hour, nil)
	defer u.Close()
	u.now = func() time.Time { return now }
	u.PriceWith(func(model, kind string, n int64) float64 {
		if kind == "completion" {
			return float64(n) * 2
		}
		return float64(n)
	})
	u.add(map[string]string{"tenant": "acme", "model": "m", "kind": "prompt"}, 10)
	u.add(map[string]string{"tenant": "acme", "model": "m", "kind": "completion"}, 5)
	u.add(map[string]string{"tenant": "globex", "model": "m", "kind": "failed"}, 3)
	if got := u.Spent("acme", now); got != 20 {
		t.Errorf("acme spent %v, want 10 + 2 × 5 = 20", got)
	}
	if got := u.Spent("globex", now); got != 3 {
		t.Errorf("globex spent %v, want 3", got)
	}
	if len(u.pending) != 0 {
		t.Errorf("a meter without a store keeps %d usage rows to write", len(u.pending))
	}
	now = now.Add(2 * time.Minute) // 00:01 the next day
	if got := u.Spent("acme", now); got != 0 {
		t.Errorf("acme's spend after midnight is %v, want 0", got)
	}
}
