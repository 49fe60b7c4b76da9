package livestream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Linger is how long an ended attempt stays readable: a follower that
// comes late (a front door restarted, a reconnecting client) still reads
// it whole; later ones read the call's result.
const Linger = time.Minute

// Piece is one piece of an attempt's answer: text, or its tool calls
// (JSON, whole).
type Piece struct {
	Index     int             `json:"i"`
	Text      string          `json:"text,omitempty"`
	ToolCalls json.RawMessage `json:"tool_calls,omitempty"`
	// End closes the stream: Pieces pieces were handed over in all.
	End    bool `json:"end,omitempty"`
	Pieces int  `json:"pieces,omitempty"`
}

// Registry holds the attempts a worker runs, by id.
type Registry struct {
	mu sync.Mutex
	m  map[string]*Attempt
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]*Attempt{}} }

// Attempt is one attempt's pieces so far.
type Attempt struct {
	ID  string
	reg *Registry

	mu      sync.Mutex
	pieces  []Piece
	ended   bool
	changed chan struct{}
}

// Open registers a new attempt under a fresh random id.
func (r *Registry) Open() *Attempt {
	var b [16]byte
	_, _ = rand.Read(b[:])
	a := &Attempt{ID: hex.EncodeToString(b[:]), reg: r, changed: make(chan struct{})}
	r.mu.Lock()
	r.m[a.ID] = a
	r.mu.Unlock()
	return a
}

// Len is the number of attempts held (open or lingering).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

func (r *Registry) get(id string) *Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

// Text hands a piece of text to the followers.
func (a *Attempt) Text(t string) {
	if t != "" {
		a.add(Piece{Text: t})
	}
}

// ToolCalls hands the answer's tool calls (JSON) to the followers.
func (a *Attempt) ToolCalls(calls json.RawMessage) {
	if len(calls) > 0 {
		a.add(Piece{ToolCalls: calls})
	}
}

func (a *Attempt) add(p Piece) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return
	}
	p.Index = len(a.pieces)
	a.pieces = append(a.pieces, p)
	a.notifyLocked()
}

func (a *Attempt) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// End closes the attempt: its followers get the end line, and it is
// forgotten after Linger.
func (a *Attempt) End() {
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		return
	}
	a.ended = true
	a.notifyLocked()
	a.mu.Unlock()
	time.AfterFunc(Linger, func() {
		a.reg.mu.Lock()
		delete(a.reg.m, a.ID)
		a.reg.mu.Unlock()
	})
}

// Pieces returns the pieces handed over so far, whether the attempt
// ended, and a channel closed at the next change.
func (a *Attempt) Pieces() ([]Piece, bool, <-chan struct{}) { return a.from(0) }

// from returns the pieces from index i on, whether the attempt ended, and
// a channel closed at the next change.
func (a *Attempt) from(i int) ([]Piece, bool, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Piece
	if i < len(a.pieces) {
		out = a.pieces[i:len(a.pieces):len(a.pieces)]
	}
	return out, a.ended, a.changed
}

// ServeHTTP serves GET /live/{id}?from=N.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	a := r.get(id)
	if a == nil {
		http.Error(w, "livestream: no attempt "+strconv.Quote(id)+" here (ended long ago, or another worker's)", http.StatusNotFound)
		return
	}
	next := 0
	if v := req.URL.Query().Get("from"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("livestream: from must be a piece index ≥ 0, got %q", v), http.StatusBadRequest)
			return
		}
		next = n
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for {
		ps, ended, changed := a.from(next)
		for _, p := range ps {
			if enc.Encode(p) != nil {
				return
			}
		}
		next += len(ps)
		if ended {
			_ = enc.Encode(Piece{End: true, Pieces: next})
			return
		}
		if fl != nil {
			fl.Flush()
		}
		select {
		case <-changed:
		case <-req.Context().Done():
			return
		}
	}
}

// Handler serves the registry's attempts under /live/.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /live/{id}", r)
	return mux
}

// Follow reads an attempt at url (<base>/live/{id}) from piece from on and
// hands yield each piece, until the end line (returned true) or an error
// (the worker is gone: the attempt's pieces after the last one yielded
// are not known here).
func Follow(ctx context.Context, hc *http.Client, url string, from int, yield func(Piece) error) (ended bool, err error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?from="+strconv.Itoa(from), nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("livestream: %s: %s", url, resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var p Piece
		if err := dec.Decode(&p); err != nil {
			return false, fmt.Errorf("livestream: %s: %w", url, err)
		}
		if p.End {
			return true, nil
		}
		if err := yield(p); err != nil {
			return false, err
		}
	}
}
