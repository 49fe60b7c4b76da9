package activities

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/livestream"
	"github.com/durable-llm/durable-llm/policies/config"
)

func liveActivities(t *testing.T, beat func(context.Context, Progress) error) *Activities {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Stream.BatchInterval = config.Duration(20 * time.Millisecond)
	a, err := New(Options{Config: cfg, Live: &Live{Registry: livestream.NewRegistry(), URL: "http://worker", Beat: beat}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pieces reads what a follower of l has been handed so far.
func handedPieces(l *liveAttempt) string {
	ps, _, _ := l.att.Pieces()
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}

// TestLiveTextIsHandedOnlyOnceAHeartbeatHoldsIt: a follower gets no text
// that the server's copy of the attempt's heartbeat does not hold, so the
// call continues exactly what a follower has after a lost worker; the
// last heartbeat at close holds the whole text.
func TestLiveTextIsHandedOnlyOnceAHeartbeatHoldsIt(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Value // the text of the last confirmed heartbeat
	held.Store("")
	a := liveActivities(t, func(ctx context.Context, p Progress) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !p.Live || p.Attempt != 2 {
			t.Errorf("heartbeat %+v, want a live one of attempt 2", p)
		}
		held.Store(p.Text)
		return nil
	})
	l := a.newLiveAttempt(context.Background(), 2, 3*time.Second, func() { t.Error("cancelled") })
	l.addText("Your parcel ", 1)
	time.Sleep(50 * time.Millisecond)
	if got := handedPieces(l); got != "" {
		t.Fatalf("handed %q before any heartbeat held it", got)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for handedPieces(l) != "Your parcel " && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := handedPieces(l); got != "Your parcel " || held.Load() != "Your parcel " {
		t.Fatalf("handed %q, heartbeat held %q", got, held.Load())
	}
	l.addText("ships today.", 2)
	if !l.close(context.Background()) {
		t.Fatal("close: not every piece handed over")
	}
	if got := handedPieces(l); got != "Your parcel ships today." || held.Load() != got {
		t.Fatalf("after close: handed %q, heartbeat held %q", got, held.Load())
	}
	if _, ended, _ := l.att.Pieces(); !ended {
		t.Fatal("the attempt did not end for its followers")
	}
}

// TestLiveHeartbeatCancelsTheAttempt: a heartbeat answered "cancel
// requested", or "not found" (the call's workflow closed: a cancelled
// call does not wait for a racing attempt), cuts the attempt, and the
// text it held back is not handed.
func TestLiveHeartbeatCancelsTheAttempt(t *testing.T) {
	for name, answer := range map[string]error{
		"cancel requested": temporal.NewCanceledError(),
		"workflow closed":  serviceerror.NewNotFound("workflow execution already completed"),
	} {
		t.Run(name, func(t *testing.T) {
			a := liveActivities(t, func(context.Context, Progress) error { return answer })
			cut := make(chan struct{})
			l := a.newLiveAttempt(context.Background(), 1, 3*time.Second, func() { close(cut) })
			l.addText("Your parcel", 1)
			select {
			case <-cut:
			case <-time.After(5 * time.Second):
				t.Fatal("the attempt was not cut")
			}
			if !l.cancelled() {
				t.Fatal("the attempt does not say it was cancelled")
			}
			if l.close(context.Background()) {
				t.Fatal("close reported the text handed over")
			}
			if got := handedPieces(l); got != "" {
				t.Fatalf("handed %q after the call cancelled the attempt", got)
			}
		})
	}
}

// TestLiveAttemptBeatsEverySecondBeforeItsText: an attempt waiting for its
// first token (a 10 s heartbeat timeout) still heartbeats every second,
// so a cancel reaches it in time to cut its request within 2 s; a
// transient error is no cancel.
func TestLiveAttemptBeatsEverySecondBeforeItsText(t *testing.T) {
	var beats atomic.Int32
	a := liveActivities(t, func(context.Context, Progress) error {
		beats.Add(1)
		return serviceerror.NewUnavailable("busy")
	})
	l := a.newLiveAttempt(context.Background(), 1, 10*time.Second, func() { t.Error("cut by a transient error") })
	time.Sleep(2500 * time.Millisecond)
	l.close(context.Background())
	if n := beats.Load(); n < 2 || n > 3 {
		t.Fatalf("%d heartbeats in 2.5 s without text, want one per second", n)
	}
}

// TestLiveCheckpointsYieldToASlowServer: against a server that takes
// 100 ms to answer each heartbeat, an attempt whose text keeps coming
// sends one at most every 5 round trips (checkpointShare), not one
// after another; its followers still get the whole text.
func TestLiveCheckpointsYieldToASlowServer(t *testing.T) {
	var beats atomic.Int32
	a := liveActivities(t, func(ctx context.Context, p Progress) error {
		beats.Add(1)
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	l := a.newLiveAttempt(context.Background(), 1, time.Minute, func() { t.Error("cancelled") })
	var want strings.Builder
	begin := time.Now()
	for i := 0; time.Since(begin) < 1500*time.Millisecond; i++ {
		w := "word" + strconv.Itoa(i) + " "
		want.WriteString(w)
		l.addText(w, i+1)
		time.Sleep(5 * time.Millisecond)
	}
	sent := beats.Load()
	// 1.5 s of text: the first heartbeat at once, then one per 500 ms
	// (4 × 100 ms after each, plus its own 100 ms) — not 15 back to back.
	if sent < 2 || sent > 5 {
		t.Fatalf("%d heartbeats in 1.5 s against a 100 ms server, want 2–5", sent)
	}
	if !l.close(context.Background()) {
		t.Fatal("close: not every piece handed over")
	}
	if got := handedPieces(l); got != want.String() {
		t.Fatalf("handed %q, want %q", got, want.String())
	}
}

// TestLiveWithdrawnBeforeItsText: an attempt that withdraws its live
// stream before any text (it is late: a hedge may race it) ends the first
// stream empty for its followers and hands its text on a new one; once
// it has text it keeps its stream.
func TestLiveWithdrawnBeforeItsText(t *testing.T) {
	a := liveActivities(t, func(context.Context, Progress) error { return nil })
	l := a.newLiveAttempt(context.Background(), 1, time.Minute, func() { t.Error("cancelled") })
	first := l.att
	id, ok := l.reopen()
	if !ok || id == first.ID || a.live.Registry.Len() != 2 {
		t.Fatalf("reopen: %q %v (first %q), %d attempts held", id, ok, first.ID, a.live.Registry.Len())
	}
	if ps, ended, _ := first.Pieces(); !ended || len(ps) != 0 {
		t.Fatalf("the withdrawn stream: %d pieces, ended %v; want none, ended", len(ps), ended)
	}
	l.addText("Your parcel", 1)
	if !l.close(context.Background()) {
		t.Fatal("close: not every piece handed over")
	}
	if got := handedPieces(l); got != "Your parcel" || l.att.ID != id {
		t.Fatalf("the new stream %q handed %q", l.att.ID, got)
	}
	l2 := a.newLiveAttempt(context.Background(), 2, time.Minute, func() { t.Error("cancelled") })
	l2.addText("Hello", 1)
	if _, ok := l2.reopen(); ok {
		t.Fatal("an attempt with text reopened its stream")
	}
	l2.close(context.Background())
	// A late note that comes after the attempt closed opens nothing that
	// none would end.
	l3 := a.newLiveAttempt(context.Background(), 3, time.Minute, func() { t.Error("cancelled") })
	l3.close(context.Background())
	held := a.live.Registry.Len()
	if _, ok := l3.reopen(); ok || a.live.Registry.Len() != held {
		t.Fatalf("a closed attempt reopened its stream (%d attempts held, %d before)", a.live.Registry.Len(), held)
	}
}
