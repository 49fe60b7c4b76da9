package guard

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	p := NewPacer()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ep = "http://up:8000"
	if w, ok, _ := p.Reserve(ep, t0, 0, 0, 1000, 0); w != 0 || !ok {
		t.Fatalf("no limits: wait %v ok %v", w, ok)
	}
	// 60 rpm: one request a second.
	if w, ok, _ := p.Reserve(ep, t0, 60, 0, 0, time.Minute); w != 0 || !ok {
		t.Fatalf("first request waits %v (ok %v)", w, ok)
	}
	if w, ok, _ := p.Reserve(ep, t0, 60, 0, 0, time.Minute); w != time.Second || !ok {
		t.Errorf("second request at once: wait %v (ok %v), want 1 s", w, ok)
	}
	// A wait longer than the caller can afford books nothing.
	if w, ok, _ := p.Reserve(ep, t0, 60, 0, 0, 500*time.Millisecond); ok || w != 2*time.Second {
		t.Errorf("third request with 0.5 s to spare: wait %v ok %v, want 2 s, refused", w, ok)
	}
	if w, _, _ := p.Reserve(ep, t0, 60, 0, 0, time.Minute); w != 2*time.Second {
		t.Errorf("after a refused reservation the next waits %v, want 2 s (the refused one booked nothing)", w)
	}
	// 6,000 tpm: 100 tokens a second.
	const key = "http://up:8000 key K"
	if w, _, _ := p.Reserve(key, t0, 0, 6000, 100, time.Minute); w != 0 {
		t.Errorf("first 100 tokens wait %v", w)
	}
	if w, _, _ := p.Reserve(key, t0, 0, 6000, 50, time.Minute); w != 500*time.Millisecond {
		t.Errorf("next 50 tokens wait %v, want 0.5 s", w)
	}
	// One request above a second's worth still goes, after the bucket refills.
	if w, ok, _ := p.Reserve(key, t0.Add(10*time.Second), 0, 6000, 300, time.Minute); !ok || w != 2*time.Second {
		t.Errorf("300 tokens: wait %v ok %v, want 2 s", w, ok)
	}
}

// TestTurnIsTheWaitReserveBooks: Turn says how long a request would wait
// and books nothing; Reserve books that wait; its undo gives the turn back.
func TestTurnIsTheWaitReserveBooks(t *testing.T) {
	p := NewPacer()
	t0 := time.Unix(0, 0)
	if w, ok, _ := p.Reserve("ep", t0, 60, 6000, 100, time.Minute); !ok || w != 0 {
		t.Fatalf("the scope's first request waits %v (booked %v), want it to go at once", w, ok)
	}
	for range 3 {
		if w := p.Turn("ep", t0, 60, 6000, 100); w != time.Second {
			t.Fatalf("Turn = %v, want 1s (one request a second), and asking again books nothing", w)
		}
	}
	w, ok, undo := p.Reserve("ep", t0, 60, 6000, 100, time.Minute)
	if !ok || w != p.Turn("ep", t0, 60, 6000, 100)-time.Second {
		t.Fatalf("Reserve = %v, %v; want the 1s Turn said, after which the next turn is 2s away", w, ok)
	}
	undo()
	if got := p.Turn("ep", t0, 60, 6000, 100); got != time.Second {
		t.Errorf("after undo the next turn is %v away, want 1s: the turn was not given back", got)
	}
}
