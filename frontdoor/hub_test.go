package frontdoor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
)

func TestParseLastEventID(t *testing.T) {
	for v, want := range map[string]resumePoint{
		"":       {offset: -1},
		"12:345": {set: true, offset: 12, bytes: 345},
		" 0:0 ":  {set: true, offset: 0, bytes: 0},
		"-1:80":  {set: true, offset: -1, bytes: 80},
	} {
		got, err := parseLastEventID(v)
		if err != nil || got != want {
			t.Errorf("%q: got %+v, %v; want %+v", v, got, err, want)
		}
		if want.set && got.id() != strings.TrimSpace(v) {
			t.Errorf("%q: id() %q", v, got.id())
		}
	}
	for _, v := range []string{"12", "a:1", "1:b", "-2:0", "1:-1", "1:2:3"} {
		if _, err := parseLastEventID(v); err == nil {
			t.Errorf("%q: no error", v)
		}
	}
}

func TestRuneStart(t *testing.T) {
	s := "a订b" // 'a', 3 bytes, 'b'
	for i, want := range map[int]int{-5: 0, 0: 0, 1: 1, 2: 4, 3: 4, 4: 4, 5: 5, 9: 5} {
		if got := runeStart(s, i); got != want {
			t.Errorf("runeStart(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestHubsShareOneFollow: connections to one call share one follow, which
// stops a grace period after the last leaves; a call that ends drops its
// hub.
func TestHubsShareOneFollow(t *testing.T) {
	var follows, stopped atomic.Int32
	release := make(chan struct{})
	follow := func(ctx context.Context, id string, yield func(llmclient.StreamItem) error) (workflows.CallResult, error) {
		follows.Add(1)
		_ = yield(llmclient.StreamItem{Offset: 0, Delta: &workflows.Delta{Text: "héllo "}})
		select {
		case <-release:
			_ = yield(llmclient.StreamItem{Offset: 1, Delta: &workflows.Delta{Text: "world"}})
			return workflows.CallResult{Content: "héllo world"}, nil
		case <-ctx.Done():
			stopped.Add(1)
			return workflows.CallResult{}, ctx.Err()
		}
	}
	r := newHubs(follow, 50*time.Millisecond)
	a := r.join("c1")
	b := r.join("c1")
	if a != b || r.opened.Load() != 1 {
		t.Fatalf("two hubs or %d follows for one call", r.opened.Load())
	}
	waitFor(t, func() bool { return len(a.from(0).items) == 1 })
	if it := a.from(0).items[0]; it.start != 0 || it.end != len("héllo ") {
		t.Errorf("item covers [%d, %d)", it.start, it.end)
	}

	// The last leaves: the follow stops after the grace period, unless
	// someone joins again within it.
	a.leave()
	b.leave()
	c := r.join("c1")
	if c != a {
		t.Fatal("a join within the grace period opened a new hub")
	}
	c.leave()
	waitFor(t, func() bool { return stopped.Load() == 1 && r.open() == 0 })

	// A new hub; the call ends: the hub is dropped, its readers see the end.
	d := r.join("c1")
	if d == a || r.opened.Load() != 2 {
		t.Fatal("no new hub after the old one closed")
	}
	close(release)
	waitFor(t, func() bool { return d.from(0).ended })
	st := d.from(1)
	if len(st.items) != 1 || st.items[0].start != len("héllo ") || st.res.Content != "héllo world" || st.err != nil {
		t.Errorf("end state %+v", st)
	}
	if r.open() != 0 {
		t.Error("an ended hub stayed open")
	}
	d.leave()
	if follows.Load() != 2 {
		t.Errorf("%d follows", follows.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
