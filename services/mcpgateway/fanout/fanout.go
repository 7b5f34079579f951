// Package fanout carries the notifications of MCP servers to the GET streams of the sessions
// that use them, and runs those streams until their session ends: for /mcp/servers/{id} (one
// server a stream) and /mcp/presets/{id} (a preset's servers a stream).
package fanout

import (
	"context"
	"sync"
	"time"
)

// Buffer is how many notifications wait for one slow GET stream; beyond it the newest are
// dropped for that stream alone (MCP notifications are hints: a client that missed a
// list_changed lists again when it next looks).
const Buffer = 256

// Hub hands each server's notifications to the listeners that follow it.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*Listener]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[string]map[*Listener]struct{}{}} }

// Listener is one GET stream's queue.
type Listener struct {
	ch      chan []byte
	servers []string
}

// NewListener returns a listener that follows no server yet.
func NewListener() *Listener { return &Listener{ch: make(chan []byte, Buffer)} }

// C is l's queue, for a stream served by other means than Serve.
func (l *Listener) C() <-chan []byte { return l.ch }

// Follow makes l receive the notifications of servers, and no others (none: l leaves).
func (h *Hub) Follow(l *Listener, servers []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range l.servers {
		delete(h.subs[s], l)
		if len(h.subs[s]) == 0 {
			delete(h.subs, s)
		}
	}
	l.servers = servers
	for _, s := range servers {
		if h.subs[s] == nil {
			h.subs[s] = map[*Listener]struct{}{}
		}
		h.subs[s][l] = struct{}{}
	}
}

// Publish queues msg for every listener of server, and returns how many were too far behind
// to take it. It never blocks.
func (h *Hub) Publish(server string, msg []byte) (dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.subs[server] {
		select {
		case l.ch <- msg:
		default:
			dropped++
		}
	}
	return dropped
}

// Stream is how one GET stream is served.
type Stream struct {
	// Send sends one message to the client.
	Send func(msg []byte) error
	// Expires is when the session expires (zero: never); the stream ends then.
	Expires time.Time
	// Every is how often Check runs.
	Every time.Duration
	// Check is run every Every, and at once when Wake delivers: it reports whether the stream
	// goes on (false when the session was ended elsewhere), and may send messages of its own
	// through Send.
	Check func() (bool, error)
	// Wake, when not nil, runs Check at once (Bell.Listen): a change that Check looks for
	// was made.
	Wake <-chan struct{}
	// Pass reports whether a queued message goes out (nil: all do).
	Pass func(msg []byte) bool
}

// Serve sends l's messages through s until ctx is done, the session expires or Check ends
// it; it returns the error of a send that failed.
func (l *Listener) Serve(ctx context.Context, s Stream) error {
	var expired <-chan time.Time
	if !s.Expires.IsZero() {
		t := time.NewTimer(time.Until(s.Expires))
		defer t.Stop()
		expired = t.C
	}
	tick := time.NewTicker(s.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return nil
		case <-tick.C:
			if on, err := s.Check(); !on || err != nil {
				return err
			}
		case <-s.Wake:
			if on, err := s.Check(); !on || err != nil {
				return err
			}
		case msg := <-l.ch:
			if s.Pass != nil && !s.Pass(msg) {
				continue
			}
			if err := s.Send(msg); err != nil {
				return err
			}
		}
	}
}

// Bell wakes the streams that listen to it (Stream.Wake): a change their Check looks for was
// made (a preset or a server written, through this replica or another one), so that they
// need not wait for their next Every to see it. The zero Bell is ready to use.
type Bell struct {
	mu sync.Mutex
	m  map[chan struct{}]struct{}
}

// Listen returns a channel for Stream.Wake, and the function that stops it (call it when the
// stream ends).
func (b *Bell) Listen() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	b.mu.Lock()
	if b.m == nil {
		b.m = map[chan struct{}]struct{}{}
	}
	b.m[c] = struct{}{}
	b.mu.Unlock()
	return c, func() {
		b.mu.Lock()
		delete(b.m, c)
		b.mu.Unlock()
	}
}

// Ring wakes every listener once. It never blocks: a listener already woken and not yet
// checking is woken once.
func (b *Bell) Ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.m {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
