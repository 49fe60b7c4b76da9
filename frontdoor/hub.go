package frontdoor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
)

// A workflow admits only a few updates in flight (10 on the dev server), and
// every subscription to its stream keeps one poll update in flight. So the
// front door opens ONE subscription per streamed call, a hub, and every
// connection that streams that call reads the hub's items. A hub keeps the
// items so far (a connection that joins late, or reconnects, starts from
// any of them), lives while a connection reads it, and is dropped when the
// call ends or a grace period after its last connection left: a client
// that reconnects at once finds the same subscription, and its parked poll,
// instead of adding a poll the workflow would keep parked until the next
// item.

// follower subscribes to call id from its first item and hands yield every
// item until the call ends (llmclient.Client.Follow from offset 0).
type follower func(ctx context.Context, id string, yield func(llmclient.StreamItem) error) (workflows.CallResult, error)

// hubs are the open hubs, by workflow ID.
type hubs struct {
	follow follower
	grace  time.Duration // how long a hub outlives its last connection

	mu sync.Mutex
	m  map[string]*hub

	opened atomic.Int64 // subscriptions opened since the start
}

func newHubs(follow follower, grace time.Duration) *hubs {
	return &hubs{follow: follow, grace: grace, m: map[string]*hub{}}
}

// hubItem is a stream item and the bytes of the answer it covers:
// [start, end) of the concatenated deltas (start == end for an event).
type hubItem struct {
	llmclient.StreamItem
	start, end int
}

// hub is one subscription to a call's stream, shared by its connections.
type hub struct {
	reg    *hubs
	id     string
	cancel context.CancelFunc
	refs   int         // connections reading the hub; guarded by reg.mu
	idle   *time.Timer // the grace period after the last left; guarded by reg.mu

	mu      sync.Mutex
	items   []hubItem
	text    int           // bytes of answer text in items
	changed chan struct{} // closed (and replaced) when items or ended change
	ended   bool
	res     workflows.CallResult
	err     error
}

// join returns the hub of call id, opening its subscription when there is
// none; the caller must leave it.
func (r *hubs) join(id string) *hub {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m[id]
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		h = &hub{reg: r, id: id, cancel: cancel, changed: make(chan struct{})}
		r.m[id] = h
		r.opened.Add(1)
		go h.run(ctx)
	}
	h.refs++
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	return h
}

// leave ends a connection's use of the hub. The last one to leave a hub
// still subscribed closes its subscription, after the grace period.
func (h *hub) leave() {
	r := h.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	h.refs--
	if h.refs > 0 || r.m[h.id] != h {
		return
	}
	if r.grace <= 0 {
		r.dropLocked(h)
		return
	}
	h.idle = time.AfterFunc(r.grace, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if h.refs == 0 && r.m[h.id] == h {
			r.dropLocked(h)
		}
	})
}

// dropLocked forgets h and stops its subscription; r.mu is held.
func (r *hubs) dropLocked(h *hub) {
	delete(r.m, h.id)
	h.cancel()
}

// open is the number of hubs subscribed now.
func (r *hubs) open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// run follows the call to its end.
func (h *hub) run(ctx context.Context) {
	res, err := h.reg.follow(ctx, h.id, func(it llmclient.StreamItem) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		hi := hubItem{StreamItem: it, start: h.text, end: h.text}
		if it.Delta != nil {
			h.text += len(it.Delta.Text)
			hi.end = h.text
		}
		h.items = append(h.items, hi)
		h.notifyLocked()
		return nil
	})
	h.reg.mu.Lock()
	if h.reg.m[h.id] == h {
		delete(h.reg.m, h.id)
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.reg.mu.Unlock()

	h.mu.Lock()
	h.ended, h.res, h.err = true, res, err
	h.notifyLocked()
	h.mu.Unlock()
	h.cancel()
}

func (h *hub) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// hubState is what a connection reads of a hub: the items from its
// position on, whether the call has ended (then res and err), and a
// channel closed at the next change.
type hubState struct {
	items   []hubItem
	ended   bool
	res     workflows.CallResult
	err     error
	changed <-chan struct{}
}

// from returns the hub's state with the items from index pos on.
func (h *hub) from(pos int) hubState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := hubState{ended: h.ended, res: h.res, err: h.err, changed: h.changed}
	if pos < len(h.items) {
		st.items = h.items[pos:len(h.items):len(h.items)]
	}
	return st
}
