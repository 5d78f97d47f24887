package http

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"lookout/store"
)

// Default caps on open runtime WebSockets (--ws-max-conns, --ws-max-conns-per-client). Each
// socket may buffer a message of up to 10 MB, so the caps bound that memory too.
const (
	DefaultWSMaxConns      = 1000
	DefaultWSMaxConnsPerID = 100
)

// sockets tracks the open runtime WebSockets: it caps them overall and per client, and at
// shutdown sends each a close frame (1001 going away) after the message it is handling.
type sockets struct {
	max, perClient int

	mu       sync.Mutex
	open     map[*socket]struct{}
	byClient map[string]int
	closing  bool
	wg       sync.WaitGroup
}

// socket is one open WebSocket; mu is held while a message is handled and answered, so
// shutdown closes it between messages, never between a commit and its ack. conn and
// cancel are also reachable without mu: when the shutdown deadline passes, a socket stuck
// in a message (a client that stopped reading its acks) is cut without waiting for it.
type socket struct {
	conn      atomic.Pointer[websocket.Conn]
	cancel    atomic.Pointer[context.CancelFunc] // ends the handler's context; set by attach
	client    string
	mu        sync.Mutex
	goingAway bool
}

func newSockets(max, perClient int) *sockets {
	if max <= 0 {
		max = DefaultWSMaxConns
	}
	if perClient <= 0 {
		perClient = DefaultWSMaxConnsPerID
	}
	return &sockets{max: max, perClient: perClient, open: map[*socket]struct{}{}, byClient: map[string]int{}}
}

// reserve takes a slot for a client's new socket before the handshake is accepted.
// Errors: unavailable (shutting down, or the server-wide cap) and rate_limited (the
// client's cap), both to be answered with Retry-After.
func (ss *sockets) reserve(client string) (*socket, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.closing:
		return nil, retryAfter{err: errf(store.CodeUnavailable, "the server is shutting down"), after: 5 * time.Second}
	case len(ss.open) >= ss.max:
		return nil, retryAfter{err: errf(store.CodeUnavailable, "the server has %d WebSockets open, the most --ws-max-conns allows; retry later", ss.max), after: 5 * time.Second}
	case ss.byClient[client] >= ss.perClient:
		return nil, retryAfter{err: errf(store.CodeRateLimited, "this client has %d WebSockets open, the most --ws-max-conns-per-client allows; close one first", ss.perClient), after: 5 * time.Second}
	}
	sk := &socket{client: client}
	ss.open[sk] = struct{}{}
	ss.byClient[client]++
	ss.wg.Add(1)
	return sk, nil
}

// release gives a socket's slot back when its handler ends.
func (ss *sockets) release(sk *socket) {
	ss.mu.Lock()
	delete(ss.open, sk)
	if ss.byClient[sk.client]--; ss.byClient[sk.client] <= 0 {
		delete(ss.byClient, sk.client)
	}
	ss.mu.Unlock()
	ss.wg.Done()
}

// count is how many runtime WebSockets are open.
func (ss *sockets) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.open)
}

// goAway refuses new sockets, sends every open one a close frame (1001) once the message
// it is handling has been answered, and waits for their handlers until ctx ends; then it
// drops the rest without a handshake.
func (ss *sockets) goAway(ctx context.Context) {
	ss.mu.Lock()
	ss.closing = true
	open := make([]*socket, 0, len(ss.open))
	for sk := range ss.open {
		open = append(open, sk)
	}
	ss.mu.Unlock()
	for _, sk := range open {
		go func(sk *socket) {
			sk.mu.Lock()
			sk.goingAway = true
			sk.mu.Unlock()
			if conn := sk.conn.Load(); conn != nil {
				conn.Close(websocket.StatusGoingAway, "server shutting down")
			}
		}(sk)
	}
	done := make(chan struct{})
	go func() { ss.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// No lock here: a handler stuck in a message holds its socket's. Its context ends
		// and its connection drops; it finishes on its own, and the writers answer it.
		for _, sk := range open {
			if cancel := sk.cancel.Load(); cancel != nil {
				(*cancel)()
			}
			if conn := sk.conn.Load(); conn != nil {
				conn.CloseNow()
			}
		}
	}
}

// attach records the accepted connection and its handler's cancel; false when shutdown
// began in between, in which case the caller closes it with 1001 itself.
func (sk *socket) attach(conn *websocket.Conn, cancel context.CancelFunc) bool {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	sk.conn.Store(conn)
	sk.cancel.Store(&cancel)
	return !sk.goingAway
}
