package guard

import (
	"testing"
	"time"
)

func TestHolds(t *testing.T) {
	h := NewHolds()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const ep = "http://up:8000"

	if left := h.Left(ep, t0); left != 0 {
		t.Fatalf("a scope never held is held for %v", left)
	}
	h.Hold(ep, t0, 2*time.Second)
	if left := h.Left(ep, at(500*time.Millisecond)); left != 1500*time.Millisecond {
		t.Errorf("left %v at 0.5 s, want 1.5 s", left)
	}
	if left := h.Left("http://other:8000", at(500*time.Millisecond)); left != 0 {
		t.Errorf("another scope is held for %v", left)
	}
	// A shorter hold never shortens a longer one.
	h.Hold(ep, at(time.Second), 100*time.Millisecond)
	if left := h.Left(ep, at(time.Second)); left != time.Second {
		t.Errorf("left %v after a shorter hold, want 1 s", left)
	}
	if left := h.Left(ep, at(2*time.Second)); left != 0 {
		t.Errorf("left %v when the hold ended, want 0", left)
	}
	// A hold after the last one ended holds the scope again.
	h.Hold(ep, at(10*time.Second), time.Second)
	if left := h.Left(ep, at(10500*time.Millisecond)); left != 500*time.Millisecond {
		t.Errorf("left %v half-way through a new hold, want 500 ms", left)
	}
}

// TestHoldRelease: the calls waiting for a hold are released spread over
// half the hold's length after its end, never before it.
func TestHoldRelease(t *testing.T) {
	h := NewHolds()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ep = "http://up:8000"
	if d := h.Release(ep, t0, 0.9); d != 0 {
		t.Fatalf("a free scope releases after %v", d)
	}
	h.Hold(ep, t0, 2*time.Second)
	for _, c := range []struct {
		at   time.Duration
		u    float64
		want time.Duration
	}{
		{0, 0, 2 * time.Second},                               // the earliest: the hold's end
		{0, 0.5, 2500 * time.Millisecond},                     // + u × ½ × 2 s
		{1500 * time.Millisecond, 0.5, 1 * time.Second},       // late arrivals spread as widely
		{1500 * time.Millisecond, 2, 1500 * time.Millisecond}, // u clamped to 1
		{2 * time.Second, 0.5, 0},                             // the hold is over
	} {
		if got := h.Release(ep, t0.Add(c.at), c.u); got != c.want {
			t.Errorf("at %v, u %v: release after %v, want %v", c.at, c.u, got, c.want)
		}
	}
	// Many waiters released together would send at once: their draws
	// spread them over a second after the hold's end.
	first, last := time.Hour, time.Duration(0)
	for i := range 100 {
		d := h.Release(ep, t0, float64(i)/100)
		first, last = min(first, d), max(last, d)
	}
	if first != 2*time.Second || last < 2980*time.Millisecond {
		t.Errorf("releases from %v to %v after the hold began, want 2 s to about 3 s", first, last)
	}
	if got := Jittered(time.Second, 0, 1); got != 1500*time.Millisecond {
		t.Errorf("Jittered without a known length: %v, want 1.5 s", got)
	}
}
