package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/store"
	"github.com/durable-llm/durable-llm/testkit/testenv"
)

var pg testenv.SharedPostgres

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

func open(t *testing.T) *store.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, pg.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestAnswerCache: an answer is served until it expires; a newer answer
// for the same key replaces it; the trim keeps the newest.
func TestAnswerCache(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, ok, err := s.GetAnswer(ctx, "k1", t0); ok || err != nil {
		t.Fatalf("an empty cache answered: %v %v", ok, err)
	}
	if err := s.PutAnswer(ctx, "k1", "acme", store.Answer{Content: "first", Model: "qwen-72b", At: t0}, time.Hour); err != nil {
		t.Fatal(err)
	}
	a, ok, err := s.GetAnswer(ctx, "k1", t0.Add(59*time.Minute))
	if err != nil || !ok || a.Content != "first" || a.Model != "qwen-72b" || !a.At.Equal(t0) {
		t.Fatalf("got %+v %v %v", a, ok, err)
	}
	if _, ok, _ := s.GetAnswer(ctx, "k1", t0.Add(61*time.Minute)); ok {
		t.Error("an expired answer was served")
	}
	if err := s.PutAnswer(ctx, "k1", "acme", store.Answer{Content: "second", Model: "qwen-14b", At: t0.Add(time.Minute)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := s.GetAnswer(ctx, "k1", t0.Add(2*time.Minute)); a.Content != "second" {
		t.Errorf("after a second put: %q", a.Content)
	}
	for i := range 5 {
		_ = s.PutAnswer(ctx, fmt.Sprintf("n%d", i), "acme", store.Answer{Content: "x", Model: "m", At: t0.Add(time.Duration(10+i) * time.Minute)}, time.Hour)
	}
	if err := s.TrimAnswers(ctx, t0.Add(15*time.Minute), 3); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountAnswers(ctx); n != 3 {
		t.Errorf("%d answers after a trim to 3", n)
	}
	if _, ok, _ := s.GetAnswer(ctx, "n4", t0.Add(15*time.Minute)); !ok {
		t.Error("the trim dropped the newest answer")
	}
}

// TestUsage: counts from several workers add up per minute, tenant, model
// and kind; Usage sums from a point in time on.
func TestUsage(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
	for range 2 { // two workers, the same minute
		if err := s.AddUsage(ctx, t0, []store.Tokens{{Tenant: "acme", Model: "qwen-72b", Kind: "prompt", Tokens: 100}, {Tenant: "acme", Model: "qwen-72b", Kind: "completion", Tokens: 40}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.AddUsage(ctx, t0.Add(-2*time.Hour), []store.Tokens{{Tenant: "acme", Model: "qwen-72b", Kind: "prompt", Tokens: 1000}})
	_ = s.AddUsage(ctx, t0.Add(time.Minute), []store.Tokens{{Tenant: "globex", Model: "llama-8b", Kind: "failed", Tokens: 7}})
	got, err := s.Usage(ctx, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Tokens{
		{Tenant: "acme", Model: "qwen-72b", Kind: "completion", Tokens: 80},
		{Tenant: "acme", Model: "qwen-72b", Kind: "prompt", Tokens: 200},
		{Tenant: "globex", Model: "llama-8b", Kind: "failed", Tokens: 7},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("usage %v, want %v", got, want)
	}
}

// TestOpenRefusesABadURL: the error names the problem and not the password.
func TestOpenRefusesABadURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "postgres://app:s3cret-pw@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("a server that is not there was opened")
	}
	if msg := err.Error(); !containsAll(msg, "127.0.0.1:1") || contains(msg, "s3cret-pw") {
		t.Errorf("error %q: want the server named and no password", msg)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !contains(s, x) {
			return false
		}
	}
	return true
}

// TestWorkersOpenTogether: workers that start at the same moment all open
// the store of an empty database (the tables are created once, not
// raced: a fleet brought up at once used to lose workers to a unique
// violation in PostgreSQL's catalogue).
func TestWorkersOpenTogether(t *testing.T) {
	dsn := pg.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const workers = 8
	errs := make(chan error, workers)
	start := make(chan struct{})
	for range workers {
		go func() {
			<-start
			s, err := store.Open(ctx, dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	close(start)
	for range workers {
		if err := <-errs; err != nil {
			t.Errorf("a worker could not open the store: %v", err)
		}
	}
}
