package main

import (
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
	// PerClient are the connections one client address may have open;
	// beyond, its longest idle one is closed for the new one, and when
	// none is idle the new one is answered 429 and closed. Required (1 or
	// more).
	PerClient int
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
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: serveIdleTimeout, ConnState: g.track}
	return srv, g, nil
}

// connGuard is a listener that keeps the front door's connections for the
// clients that send requests:
//
//   - it accepts at most MaxConns connections at once (beyond, a client
//     waits in the kernel's queue until one closes), so no number of
//     clients can take more of the process's file descriptors and memory;
//   - at most PerClient of them from one client address: a new one beyond
//     takes the place of that address's longest idle connection, else it
//     is answered 429 too_many_connections and closed;
//   - under pressure, when the open connections reach 90 % of MaxConns, a
//     connection idle for PressureIdle is closed: between requests
//     (keep-alive) or before its first byte. Idle connections cost a
//     client nothing and would otherwise hold their place for the
//     server's IdleTimeout (2 minutes), so clients that only hold
//     connections open could keep every other client waiting.
//
// A connection is idle from its accept until its first request's first
// byte and after each answer (its http.ConnState, which the server reports
// to track); one being read or answered is never closed.
type connGuard struct {
	net.Listener
	o          connOptions
	pressureAt int
	slots      chan struct{} // one per open connection
	done       chan struct{} // closed by Close
	closeOnce  sync.Once
	refusing   chan struct{} // one per connection being refused
	overCap    string        // the 429 of a connection over PerClient

	mu     sync.Mutex
	conns  map[*guardedConn]struct{} // the server's connections
	byHost map[string]int            // of conns, by client address
	sweep  *time.Timer               // armed under pressure while a connection is idle
}

// guardedConn is a connection of a connGuard; closing it frees its place.
type guardedConn struct {
	net.Conn
	g    *connGuard
	host string
	once sync.Once
	// idle and since (when it became idle) are guarded by g.mu.
	idle  bool
	since time.Time
}

func newConnGuard(ln net.Listener, o connOptions) *connGuard {
	if o.PressureIdle <= 0 {
		o.PressureIdle = pressureIdleTimeout
	}
	body := fmt.Sprintf(`{"error":{"message":"Too many connections from this address: at most %d may be open at once at this front door. Reuse or close idle connections.","type":"requests","param":null,"code":"too_many_connections"}}`+"\n", o.PerClient)
	return &connGuard{
		Listener: ln, o: o,
		pressureAt: max(o.MaxConns-o.MaxConns/10, 1),
		slots:      make(chan struct{}, o.MaxConns),
		done:       make(chan struct{}),
		refusing:   make(chan struct{}, 64),
		overCap: "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body,
		conns:  map[*guardedConn]struct{}{},
		byHost: map[string]int{},
	}
}

// Accept waits for a place, then accepts the next connection whose
// client address is within its cap.
func (g *connGuard) Accept() (net.Conn, error) {
	for {
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
		if gc := g.admit(c); gc != nil {
			return gc, nil
		}
	}
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

// admit counts c, which holds a place, or refuses it (freeing the place)
// when its address is at its cap with no idle connection to give up.
func (g *connGuard) admit(c net.Conn) *guardedConn {
	host := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	now := time.Now()
	g.mu.Lock()
	var evict *guardedConn
	if g.byHost[host] >= g.o.PerClient {
		for gc := range g.conns {
			if gc.host == host && gc.idle && (evict == nil || gc.since.Before(evict.since)) {
				evict = gc
			}
		}
		if evict == nil {
			g.mu.Unlock()
			<-g.slots
			g.refuse(c)
			return nil
		}
		g.forget(evict)
	}
	gc := &guardedConn{Conn: c, g: g, host: host, idle: true, since: now}
	g.conns[gc] = struct{}{}
	g.byHost[host]++
	g.arm(now)
	g.mu.Unlock()
	if evict != nil {
		_ = evict.Close()
	}
	return gc
}

// refuse answers a connection over its address's cap 429 and closes it,
// in the background: it writes the answer, stops sending, and reads what
// the client sent (at most 64 KiB, for a second) so that closing does not
// reset the connection before the client has read the answer. At most
// cap(g.refusing) at once; beyond, a connection is just closed.
func (g *connGuard) refuse(c net.Conn) {
	select {
	case g.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-g.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, g.overCap); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// track is the server's ConnState: it follows which connections are idle.
func (g *connGuard) track(c net.Conn, s http.ConnState) {
	gc, ok := c.(*guardedConn)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch s {
	case http.StateActive:
		gc.idle = false
	case http.StateIdle:
		gc.idle, gc.since = true, time.Now()
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
	if g.byHost[gc.host]--; g.byHost[gc.host] <= 0 {
		delete(g.byHost, gc.host)
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
	c.once.Do(func() {
		c.g.mu.Lock()
		c.g.forget(c)
		c.g.mu.Unlock()
		<-c.g.slots
	})
	return err
}
