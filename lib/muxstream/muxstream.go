// Package muxstream multiplexes many calls over one long-lived bidirectional gRPC stream:
// each request carries a call id, each response names it, and responses are routed back to
// their caller. One stream costs far less per call than one RPC per call. The stream opens
// on first use and again after it breaks; calls in flight when it breaks get Config.Broken.
package muxstream

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Stream is the client side of a bidirectional stream.
type Stream[Req, Resp any] interface {
	Send(Req) error
	Recv() (Resp, error)
}

// Config says how to open the stream and read its messages.
type Config[Req, Resp any] struct {
	// Open opens a new stream; ctx lives as long as the stream.
	Open func(ctx context.Context) (Stream[Req, Resp], error)
	// CallID is the call a response belongs to.
	CallID func(Resp) uint64
	// Last reports whether a response ends its call.
	Last func(Resp) bool
	// Keep reports whether a response that does not end its call must not be lost: when its
	// caller is too far behind, the call fails rather than lose it (false: it is dropped).
	Keep func(Resp) bool
	// Broken is the response given to calls in flight when the stream breaks with err.
	Broken func(err error) Resp
	// Cancel is the request that abandons a call.
	Cancel func(id uint64) Req
}

// Client multiplexes calls over one stream at a time.
type Client[Req, Resp any] struct {
	cfg Config[Req, Resp]

	mu      sync.Mutex
	st      *stream[Req, Resp]
	next    uint64
	closed  bool
	pending map[uint64]chan Resp
}

type stream[Req, Resp any] struct {
	s      Stream[Req, Resp]
	cancel context.CancelFunc
	sendMu sync.Mutex
}

// New returns a client; Close ends its stream.
func New[Req, Resp any](cfg Config[Req, Resp]) *Client[Req, Resp] {
	return &Client[Req, Resp]{cfg: cfg, pending: map[uint64]chan Resp{}}
}

// ErrClosed is returned after Close.
var ErrClosed = context.Canceled

func (c *Client[Req, Resp]) open() (*stream[Req, Resp], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.st != nil {
		return c.st, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.cfg.Open(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &stream[Req, Resp]{s: s, cancel: cancel}
	c.st = st
	go c.recvLoop(st)
	return st, nil
}

func (c *Client[Req, Resp]) recvLoop(st *stream[Req, Resp]) {
	for {
		r, err := st.s.Recv()
		if err != nil {
			broken := c.cfg.Broken(err)
			c.mu.Lock()
			if c.st == st {
				c.st = nil
			}
			for id, ch := range c.pending {
				delete(c.pending, id)
				ch <- broken // a slot is always kept free for the last response
			}
			c.mu.Unlock()
			st.cancel()
			return
		}
		id, last := c.cfg.CallID(r), c.cfg.Last(r)
		c.mu.Lock()
		ch := c.pending[id]
		if last {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		if ch == nil {
			continue
		}
		// One slot is always kept for the last response, so the stream never blocks on a
		// caller: a response that does not fit is dropped or, when it must be kept, the call
		// fails (the caller gets Broken) and the server is told to cancel it.
		switch {
		case last, len(ch) < cap(ch)-1:
			ch <- r
		case c.cfg.Keep != nil && c.cfg.Keep(r):
			c.forget(id)
			ch <- c.cfg.Broken(ErrSlowCaller)
			st.sendMu.Lock()
			_ = st.s.Send(c.cfg.Cancel(id))
			st.sendMu.Unlock()
		}
	}
}

// ErrSlowCaller is the cause given to a call that fell too far behind its responses.
var ErrSlowCaller = errors.New("the caller fell behind its responses")

// Call sends the request made by req (given the call id) and returns the channel of its
// responses, which ends with a response for which Last is true. buf is the channel's room
// (at least 2). A caller that stops reading before the last response must Abandon the call.
func (c *Client[Req, Resp]) Call(req func(id uint64) Req, buf int) (uint64, <-chan Resp, error) {
	st, err := c.open()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan Resp, max(buf, 2))
	c.mu.Lock()
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	st.sendMu.Lock()
	err = st.s.Send(req(id))
	st.sendMu.Unlock()
	if err != nil {
		c.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

// CallWhenOpen is Call, waiting while the stream cannot be opened (the server is restarting,
// or the connection is in its reconnect backoff): the request was not sent then, so trying
// again is safe. It gives up when ctx ends, returning the last open error, or after Close
// (ErrClosed).
func (c *Client[Req, Resp]) CallWhenOpen(ctx context.Context, req func(id uint64) Req, buf int) (uint64, <-chan Resp, error) {
	id, ch, err := c.Call(req, buf)
	for wait := 50 * time.Millisecond; err != nil && !errors.Is(err, ErrClosed); wait = min(2*wait, time.Second) {
		select {
		case <-ctx.Done():
			return 0, nil, err
		case <-time.After(wait):
		}
		id, ch, err = c.Call(req, buf)
	}
	return id, ch, err
}

// Abandon forgets a call and tells the server to cancel it.
func (c *Client[Req, Resp]) Abandon(id uint64) {
	c.forget(id)
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	if st != nil {
		st.sendMu.Lock()
		_ = st.s.Send(c.cfg.Cancel(id))
		st.sendMu.Unlock()
	}
}

func (c *Client[Req, Resp]) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Close ends the stream; calls in flight get Broken.
func (c *Client[Req, Resp]) Close() {
	c.mu.Lock()
	c.closed = true
	st := c.st
	c.mu.Unlock()
	if st != nil {
		st.cancel()
	}
}
