package activities

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
)

func pooled(t *testing.T) (*Activities, config.ModelConfig) {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Models[0].APIKeyEnv, cfg.Models[0].APIKeyEnvs = "", []string{"KEY_A", "KEY_B", "KEY_C"}
	a, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return a, cfg.Models[0]
}

// TestPickKey: calls rotate over the pool; a held key is passed by, a
// parked one left out until its park ends; with every key parked the
// model has none.
func TestPickKey(t *testing.T) {
	a, m := pooled(t)
	now := time.Unix(1_000_000, 0)
	var got []string
	for range 4 {
		k, ok := a.pickKey(m, now)
		if !ok {
			t.Fatal("no key")
		}
		got = append(got, k)
	}
	if want := []string{"KEY_A", "KEY_B", "KEY_C", "KEY_A"}; !equal(got, want) {
		t.Errorf("rotation %v, want %v", got, want)
	}
	// KEY_B is rate-limited (held), KEY_C parked: only KEY_A is free.
	a.holds.Hold(m.WithKey("KEY_B").Scope(config.ScopeKey), now, 10*time.Second)
	a.keys.park(m.WithKey("KEY_C"), now, now.Add(time.Minute))
	for range 3 {
		if k, _ := a.pickKey(m, now); k != "KEY_A" {
			t.Errorf("picked %s with B held and C parked", k)
		}
	}
	if k := a.otherKey(m, "KEY_A", now); k != "" {
		t.Errorf("otherKey = %q, want none free", k)
	}
	if !a.unparkedOther(m, "KEY_A", now) {
		t.Error("KEY_B is held, not parked: it is still a key of the pool")
	}
	// The park ends; another model on the endpoint that lists the key
	// also leaves it out while parked.
	if k := a.otherKey(m, "KEY_A", now.Add(2*time.Minute)); k != "KEY_B" && k != "KEY_C" {
		t.Errorf("after the park and the hold: otherKey = %q", k)
	}
	other := m
	other.Name = "another-model"
	a.keys.park(m.WithKey("KEY_A"), now, now.Add(time.Hour))
	if !a.keys.isParked(other.WithKey("KEY_A"), now) {
		t.Error("a key refused on the endpoint is still used by another model there")
	}
	a.keys.park(m.WithKey("KEY_B"), now, now.Add(time.Hour))
	a.keys.park(m.WithKey("KEY_C"), now, now.Add(time.Hour))
	if k, ok := a.pickKey(m, now); ok {
		t.Errorf("every key parked, yet picked %s", k)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFingerprintAndSeen: the same request is the same fingerprint,
// another user's or other parameters are not; a fingerprint is a
// duplicate within the window only.
func TestFingerprintAndSeen(t *testing.T) {
	r := request.Request{Tenant: "acme", UserID: "u1", SessionID: "s1"}
	msgs := []request.Message{{Role: "user", Content: "hi"}}
	sh := callstate.Shape{MaxTokens: 100}
	fp := fingerprint(r, "m", msgs, sh)
	if fp != fingerprint(r, "m", msgs, sh) {
		t.Fatal("not deterministic")
	}
	other := r
	other.UserID = "u2"
	hot := 0.9
	withTools := r
	withTools.Tools = []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "f"}}}
	for name, f := range map[string]string{
		"another user":  fingerprint(other, "m", msgs, sh),
		"another model": fingerprint(r, "m2", msgs, sh),
		"max_tokens":    fingerprint(r, "m", msgs, callstate.Shape{MaxTokens: 200}),
		"temperature":   fingerprint(r, "m", msgs, callstate.Shape{MaxTokens: 100, Temperature: &hot}),
		"tools":         fingerprint(withTools, "m", msgs, sh),
	} {
		if f == fp {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	keyed := r
	keyed.IdempotencyKey, keyed.Stream = "k", true
	if fingerprint(keyed, "m", msgs, sh) != fp {
		t.Error("the idempotency key or streaming changed the fingerprint of the same upstream request")
	}

	s := newBilledRequests()
	now := time.Unix(1_000_000, 0)
	if s.repeat(fp, now) {
		t.Error("first send is a duplicate")
	}
	if !s.repeat(fp, now.Add(59*time.Minute)) {
		t.Error("a send 59 minutes later is not a duplicate")
	}
	if s.repeat(fp, now.Add(59*time.Minute+DuplicateWindow)) {
		t.Error("a send more than an hour after the last is a duplicate")
	}
	for i := range 3 * maxFingerprints / 2 {
		s.repeat(strconv.Itoa(i), now.Add(3*time.Hour))
	}
	if len(s.at) > maxFingerprints || len(s.queue) > maxFingerprints {
		t.Errorf("%d fingerprints kept, bound %d", len(s.at), maxFingerprints)
	}
}

// TestParkedKeyIsSharedByTheFleet: a key one worker parked after a quota
// refusal is left out by another worker once the fleet's guard has the
// first's report, and is back when the park ends.
func TestParkedKeyIsSharedByTheFleet(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Models[0].APIKeyEnvs = []string{"KEY_A", "KEY_B"}
	cfg.Models[0].APIKeyEnv = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := cfg.Models[0]
	now := time.Unix(1_000_000, 0)
	fleet := guard.NewFleet(cfg.Breaker)
	worker := func(name string) (*Activities, *guard.Sync) {
		s := guard.NewSync(name, 5*time.Second)
		a, err := New(Options{Config: cfg, Now: func() time.Time { return now }, Sync: s})
		if err != nil {
			t.Fatal(err)
		}
		return a, s
	}
	a1, s1 := worker("w1")
	a2, s2 := worker("w2")
	a1.keys.park(m.WithKey("KEY_A"), now, now.Add(5*time.Minute))
	r, _ := s1.Cut()
	fleet.Apply(r)
	s2.SetView(fleet.View(now), now)
	for range 4 {
		if k, _ := a2.pickKey(m, now); k != "KEY_B" {
			t.Fatalf("worker 2 picked %s, which worker 1 parked", k)
		}
	}
	later := now.Add(6 * time.Minute)
	s2.SetView(fleet.View(later), later)
	if !a2.unparkedOther(m, "KEY_B", later) {
		t.Error("KEY_A is still parked after its park ended")
	}
}

// TestPickKeyByHeadroom: of the free keys, the one whose last response
// reported the most of its rate limit left is chosen (a key never heard
// from counts as full); each pick takes one request off that estimate, so
// calls picked together spread; an old report counts for nothing.
func TestPickKeyByHeadroom(t *testing.T) {
	a, m := pooled(t)
	now := time.Unix(1_000_000, 0)
	a.now = func() time.Time { return now }
	hdr := func(remaining, limit int) http.Header {
		h := http.Header{}
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remaining))
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(limit))
		return h
	}
	a.headroom(m.WithKey("KEY_A"), hdr(1, 10))
	a.headroom(m.WithKey("KEY_B"), hdr(8, 10))
	a.headroom(m.WithKey("KEY_C"), hdr(7, 10))
	var got []string
	for range 4 {
		k, _ := a.pickKey(m, now)
		got = append(got, k)
	}
	// B (0.8) first; then B and C by what is left of them, each pick a
	// tenth less; A, nearly spent, is spared.
	if want := "KEY_B,KEY_B,KEY_C,KEY_B"; strings.Join(got, ",") != want {
		t.Errorf("picks %v, want %s", got, want)
	}
	later := now.Add(2 * time.Minute)
	got = got[:0]
	for range 3 {
		k, _ := a.pickKey(m, later)
		got = append(got, k)
	}
	if counts := strings.Join(got, ","); !strings.Contains(counts, "KEY_A") {
		t.Errorf("picks %v after the reports aged: want the rotation, A included", got)
	}
}

// TestFingerprintGolden pins the fingerprint's bytes: a request's
// fingerprint is the same on every replay and every build, so a resend on
// another worker of the fleet is known as the same request. A change here
// is a change of scheme (and of its "fp" tag), never a silent one.
func TestFingerprintGolden(t *testing.T) {
	warm := 0.3
	r := request.Request{Tenant: "acme", UserID: "u1", SessionID: "s1",
		Tools: []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "lookup"}}}}
	msgs := []request.Message{
		{Role: "system", Content: "You are a support agent."},
		{Role: "user", Parts: []request.Part{{Type: "text", Text: "what is this?"}, {Type: "image_url", ImageURL: &request.ImageURL{URL: "https://example.com/a.png"}}}},
		{Role: "assistant", ToolCalls: []request.ToolCall{{ID: "c1", Type: "function", Function: request.FunctionCall{Name: "lookup", Arguments: `{"q":"a"}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: "found"},
	}
	for _, c := range []struct {
		name string
		fp   string
	}{
		{"whole", fingerprint(r, "qwen-72b", msgs, callstate.Shape{MaxTokens: 512, Temperature: &warm})},
		{"bare", fingerprint(request.Request{}, "m", []request.Message{{Role: "user", Content: "hi"}}, callstate.Shape{})},
	} {
		want := map[string]string{
			"whole": "50d4687a3af63a75a72968758f37948240dfd64ebc3a44471b20e75f5e3be865",
			"bare":  "585f31b04aa0f8e0aff6df65bfe09c66777f70bf16d0ef417c691422f9abb0d0",
		}[c.name]
		if c.fp != want {
			t.Errorf("%s: fingerprint %s, want %s", c.name, c.fp, want)
		}
	}
	// Lengths in front: moving text from one field to the next is
	// another request.
	a := fingerprint(request.Request{UserID: "ab", SessionID: "c"}, "m", nil, callstate.Shape{})
	b := fingerprint(request.Request{UserID: "a", SessionID: "bc"}, "m", nil, callstate.Shape{})
	if a == b {
		t.Error("fields run into each other")
	}
}
