package livestream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFollowReadsAnAttemptLiveAndFromAnyPiece: a follower gets the pieces
// as they are handed over, tool calls included, then the end; one that
// comes back with from=N gets the pieces from N on; an unknown attempt is
// a 404 that names it.
func TestFollowReadsAnAttemptLiveAndFromAnyPiece(t *testing.T) {
	reg := NewRegistry()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	a := reg.Open()
	url := srv.URL + "/live/" + a.ID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got := make(chan Piece, 10)
	done := make(chan error, 1)
	go func() {
		ended, err := Follow(ctx, nil, url, 0, func(p Piece) error { got <- p; return nil })
		if err == nil && !ended {
			err = context.Canceled
		}
		done <- err
	}()
	a.Text("Your parcel ")
	if p := <-got; p.Text != "Your parcel " || p.Index != 0 {
		t.Fatalf("first piece %+v", p)
	}
	a.Text("ships today.")
	a.ToolCalls([]byte(`[{"id":"c1"}]`))
	if p := <-got; p.Text != "ships today." || p.Index != 1 {
		t.Fatalf("second piece %+v", p)
	}
	if p := <-got; string(p.ToolCalls) != `[{"id":"c1"}]` {
		t.Fatalf("tool calls %+v", p)
	}
	a.End()
	a.Text("after the end") // dropped
	if err := <-done; err != nil {
		t.Fatalf("follow: %v", err)
	}

	var again []string
	ended, err := Follow(ctx, nil, url, 1, func(p Piece) error { again = append(again, p.Text); return nil })
	if err != nil || !ended {
		t.Fatalf("follow from 1 of an ended attempt: ended %v, %v", ended, err)
	}
	if strings.Join(again, "|") != "ships today.|" {
		t.Fatalf("from 1: %q", again)
	}

	_, err = Follow(ctx, nil, srv.URL+"/live/0123456789abcdef0123456789abcdef", 0, func(Piece) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown attempt: %v, want a 404", err)
	}
	resp, err := http.Get(url + "?from=-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("from=-1: %s, want 400", resp.Status)
	}
}
