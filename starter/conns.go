package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/frontdoor"
)

// Connection limits of the front door (starter serve).
const (
	// defaultMaxConnsPerClient is --max-conns-per-client's default: far
	// more than a client's pool needs (Go keeps 2 idle connections per
	// host, browsers about 6), far fewer than --max-conns.
	defaultMaxConnsPerClient = 128
	// pressureIdleTimeout is how long a connection may stay idle while the
	// door is under pressure (see connGuard), instead of the server's
	// IdleTimeout.
	pressureIdleTimeout = time.Second
	// serveIdleTimeout is how long a keep-alive connection may stay idle
	// otherwise.
	serveIdleTimeout = 2 * time.Minute
)

// connOptions are the connection limits of doorServer.
type connOptions struct {
	// MaxConns are the connections open at once; beyond, a client waits
	// in the kernel's queue until one closes. Required (1 or more).
	MaxConns int
	// PerClient are the connections one client address may hold without
	// a tenant's request in flight (idle ones, and those serving a request
	// without a valid token); beyond, its longest idle one is closed for
	// the new one, and a request without a token when none is idle is
	// answered 429 and its connection closed. Connections serving a
	// tenant's request are the tenant's limits' to govern. Required (1 or
	// more).
	PerClient int
	// Authenticated reports whether a request carries a tenant's token
	// (frontdoor.Tenants.Authenticates); nil: none does.
	Authenticated func(*http.Request) bool
	// PressureIdle is the idle timeout while the door is under pressure;
	// default pressureIdleTimeout.
	PressureIdle time.Duration
}

// doorServer listens on addr and returns the listener and the HTTP server
// of the front door serving h, the two wired together: the listener
// counts the server's connections by client address and state
// (http.Server.ConnState) and closes idle ones under pressure (connGuard),
// and answers what net/http refuses by itself in OpenAI's error shape
// (frontdoor.ShapeErrors, beneath the guard: the server must see the
// guard's connections). Serve the listener as it is. No write timeout: a
// call may take as long as its deadline (up to the policy's
// max_deadline), and streams stay open while it retries.
func doorServer(addr string, h http.Handler, o connOptions) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	g := newConnGuard(frontdoor.ShapeErrors(ln), o)
	srv := &http.Server{Handler: g.handler(h), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: serveIdleTimeout,
		ConnState: g.track, ConnContext: g.connContext}
	return srv, g, nil
}

// connGuard is a listener that keeps the front door's connections for the
// clients that send requests (docs/security.md "Behind a proxy"):
//
//   - at most MaxConns open at once; beyond, a client waits in the kernel's
//     queue, so no number of clients can take more descriptors and memory;
//   - at most PerClient per address without a tenant's request in flight:
//     a new one replaces that address's longest idle connection, and a
//     request without a valid token beyond is answered 429;
//   - at 90 % of MaxConns, a connection idle for PressureIdle is closed.
//
// Idle is from accept to a request's first byte and after each answer
// (http.ConnState); a new connection has newGrace to send its first byte.
type connGuard struct {
	net.Listener
	o          connOptions
	pressureAt int
	slots      chan struct{} // one per open connection
	done       chan struct{} // closed by Close
	closeOnce  sync.Once
	overCap    string // the 429 body of a request over PerClient

	mu    sync.Mutex
	conns map[*guardedConn]struct{} // the server's connections
	// held counts, by client address, the conns that count against
	// PerClient: all but those serving a tenant's request.
	held  map[string]int
	sweep *time.Timer // armed under pressure while a connection is idle
}

// guardedConn is a connection of a connGuard; closing it frees its place.
type guardedConn struct {
	net.Conn
	g        *connGuard
	host     string
	freeOnce sync.Once // its place is freed once, however often it is closed
	// The rest is guarded by g.mu: whether it is idle and since when,
	// whether it is new (no request yet), whether the request it serves
	// carries a tenant's token, and whether a request of it was let
	// through (served).
	idle   bool
	since  time.Time
	fresh  bool
	authed bool
	served bool
}

// newGrace is how long a new connection that has sent nothing may hold
// its place when its address is over its cap.
const newGrace = time.Second

// counts reports whether gc counts against its address's cap: all but a
// connection serving a tenant's request. g.mu is held.
func (gc *guardedConn) counts() bool { return gc.idle || !gc.authed }

// connKey is the context key of a request's guardedConn.
type connKey struct{}

func newConnGuard(ln net.Listener, o connOptions) *connGuard {
	if o.PressureIdle <= 0 {
		o.PressureIdle = pressureIdleTimeout
	}
	overCap := fmt.Sprintf(`{"error":{"message":"Too many connections from this address: at most %d may be open at once at this front door without a request with a valid API key in flight. Reuse or close idle connections.","type":"requests","param":null,"code":"too_many_connections"}}`+"\n", o.PerClient)
	return &connGuard{
		Listener: ln, o: o,
		pressureAt: max(o.MaxConns-o.MaxConns/10, 1),
		slots:      make(chan struct{}, o.MaxConns),
		done:       make(chan struct{}),
		overCap:    overCap,
		conns:      map[*guardedConn]struct{}{},
		held:       map[string]int{},
	}
}

// Accept waits for a place, then accepts the next connection.
func (g *connGuard) Accept() (net.Conn, error) {
	select {
	case g.slots <- struct{}{}:
	case <-g.done:
		return nil, net.ErrClosed
	}
	c, err := g.Listener.Accept()
	if err != nil {
		<-g.slots
		return nil, err
	}
	return g.admit(c), nil
}

// Close closes the listener; an Accept waiting for a place returns.
func (g *connGuard) Close() error {
	g.closeOnce.Do(func() {
		close(g.done)
		g.mu.Lock()
		if g.sweep != nil {
			g.sweep.Stop()
		}
		g.mu.Unlock()
	})
	return g.Listener.Close()
}

// admit counts c, which holds a place. When its address is at its cap,
// the address's longest idle connection is closed for it; when none may
// be, c is admitted all the same, and its first request decides (serve):
// it may be one of many a busy client opened at once.
func (g *connGuard) admit(c net.Conn) *guardedConn {
	host := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	now := time.Now()
	g.mu.Lock()
	var evict *guardedConn
	if g.held[host] >= g.o.PerClient {
		evict = g.longestIdle(host, now)
	}
	gc := &guardedConn{Conn: c, g: g, host: host, idle: true, since: now, fresh: true}
	g.conns[gc] = struct{}{}
	g.held[host]++
	g.arm(now)
	g.mu.Unlock()
	if evict != nil {
		_ = evict.Close()
	}
	return gc
}

// longestIdle forgets and returns the longest idle connection of host
// that may be closed for another (nil for none): idle after a request, or
// new and silent for newGrace. g.mu is held.
func (g *connGuard) longestIdle(host string, now time.Time) *guardedConn {
	var evict *guardedConn
	for gc := range g.conns {
		if gc.host == host && gc.idle && (!gc.fresh || now.Sub(gc.since) >= newGrace) && (evict == nil || gc.since.Before(evict.since)) {
			evict = gc
		}
	}
	if evict != nil {
		g.forget(evict)
	}
	return evict
}

// connContext puts the request's connection in its context, for handler.
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// handler serves h under the per-address cap: a request with a tenant's
// token takes its connection out of its address's count while it is
// served; one without, when the address holds more than PerClient
// connections that count, has the address's longest idle one closed for
// it, else it is answered 429 too_many_connections and its connection
// closed.
func (g *connGuard) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gc, _ := r.Context().Value(connKey{}).(*guardedConn)
		if gc != nil && !g.serve(gc, g.o.Authenticated != nil && g.o.Authenticated(r)) {
			hd := w.Header()
			hd.Set("Content-Type", "application/json")
			hd.Set("Retry-After", "1")
			hd.Set("Connection", "close")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, g.overCap)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serve notes whether the request gc is serving carries a tenant's token,
// and reports whether it may be served.
func (g *connGuard) serve(gc *guardedConn, authed bool) bool {
	g.mu.Lock()
	if _, ok := g.conns[gc]; !ok {
		g.mu.Unlock()
		return true // closed for another in between: it ends with this answer
	}
	g.recount(gc, func() { gc.authed = authed })
	if authed {
		gc.served = true
		g.mu.Unlock()
		return true
	}
	// Only connections a request was let through on count here, and this
	// one: a new one that has sent nothing yet may be a busy client's
	// burst, each about to send a token, and one whose request is not yet
	// judged, or was refused and is closing, holds no request open.
	n := 0
	for c := range g.conns {
		if c.host == gc.host && c.counts() && (c.served || c == gc) {
			n++
		}
	}
	var evict *guardedConn
	if n > g.o.PerClient {
		if evict = g.longestIdle(gc.host, time.Now()); evict == nil {
			g.mu.Unlock()
			return false
		}
	}
	gc.served = true
	g.mu.Unlock()
	if evict != nil {
		_ = evict.Close()
	}
	return true
}

// recount applies change to gc and keeps held in step. g.mu is held.
func (g *connGuard) recount(gc *guardedConn, change func()) {
	before := gc.counts()
	change()
	switch after := gc.counts(); {
	case before && !after:
		g.release(gc.host)
	case !before && after:
		g.held[gc.host]++
	}
}

// release takes one connection of host off held. g.mu is held.
func (g *connGuard) release(host string) {
	if g.held[host]--; g.held[host] <= 0 {
		delete(g.held, host)
	}
}

// track is the server's ConnState: it follows which connections are idle.
func (g *connGuard) track(c net.Conn, s http.ConnState) {
	gc, ok := c.(*guardedConn)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.conns[gc]; !ok {
		return // closed for another, or forgotten under pressure
	}
	switch s {
	case http.StateActive:
		g.recount(gc, func() { gc.idle, gc.fresh = false, false })
	case http.StateIdle:
		g.recount(gc, func() { gc.idle, gc.since, gc.authed = true, time.Now(), false })
		g.arm(gc.since)
	case http.StateHijacked, http.StateClosed:
		// Hijacked: no longer the server's to close; its place is freed
		// when its new owner closes it.
		g.forget(gc)
	}
}

// forget stops counting gc (its place is freed when it is closed). g.mu
// is held.
func (g *connGuard) forget(gc *guardedConn) {
	if _, ok := g.conns[gc]; !ok {
		return
	}
	delete(g.conns, gc)
	if gc.counts() {
		g.release(gc.host)
	}
}

// arm starts the sweep of idle connections, due when the longest idle
// one reaches PressureIdle, if the door is under pressure and it is not
// armed yet. g.mu is held.
func (g *connGuard) arm(now time.Time) {
	if g.sweep != nil || len(g.slots) < g.pressureAt {
		return
	}
	var oldest time.Time
	for gc := range g.conns {
		if gc.idle && (oldest.IsZero() || gc.since.Before(oldest)) {
			oldest = gc.since
		}
	}
	if oldest.IsZero() {
		return // none idle: armed again when one becomes idle
	}
	select {
	case <-g.done:
		return
	default:
	}
	g.sweep = time.AfterFunc(max(oldest.Add(g.o.PressureIdle).Sub(now), 0), g.sweepIdle)
}

// sweepIdle closes the connections idle for PressureIdle while the door
// is under pressure, and arms the next sweep.
func (g *connGuard) sweepIdle() {
	g.mu.Lock()
	g.sweep = nil
	now := time.Now()
	var idle []*guardedConn
	if len(g.slots) >= g.pressureAt {
		for gc := range g.conns {
			if gc.idle && now.Sub(gc.since) >= g.o.PressureIdle {
				idle = append(idle, gc)
				g.forget(gc)
			}
		}
	}
	if len(g.slots)-len(idle) >= g.pressureAt {
		g.arm(now)
	}
	g.mu.Unlock()
	for _, gc := range idle {
		_ = gc.Close()
	}
}

// Close closes the connection and frees its place.
func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.freeOnce.Do(func() {
		c.g.mu.Lock()
		c.g.forget(c)
		c.g.mu.Unlock()
		<-c.g.slots
	})
	return err
}
