package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Parking a session-era HTTP server's call for a client of MCP 2026-07-28 (Hooks.Park): the
// server's request waits inside this replica's mcp-go transport, on the call's response
// stream, so the call runs apart from the client's request and waits here, parked, for the
// retry that carries the answers; a retry that reaches another replica finds nothing
// (ErrRelayUnknown). As the tool host does for stdio, one request ends a round, a park that
// passes cancels the call, and a caller that leaves with nothing asked cancels it at once.

// parkedCall is one call run apart from its caller.
type parkedCall struct {
	id     string
	park   time.Duration
	cancel context.CancelFunc

	mu       sync.Mutex
	queue    []parkedItem
	wake     chan struct{}
	attached bool
	timer    *time.Timer
}

// parkedItem is what the call produced: progress, a request for the client, or its end.
type parkedItem struct {
	progress []byte
	request  *ServerRequest
	done     bool
	result   json.RawMessage
	err      error
}

func (p *parkedCall) push(it parkedItem) {
	p.mu.Lock()
	p.queue = append(p.queue, it)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (w *waiters) park(p *parkedCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parked == nil {
		w.parked = map[string]*parkedCall{}
	}
	w.parked[p.id] = p
}

func (w *waiters) parkedCall(id string) *parkedCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parked[id]
}

func (w *waiters) unpark(p *parkedCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parked[p.id] == p {
		delete(w.parked, p.id)
	}
}

// Parked counts the calls of HTTP servers run apart from their callers on this replica.
func (m *Manager) Parked() int {
	m.waiting.mu.Lock()
	defer m.waiting.mu.Unlock()
	return len(m.waiting.parked)
}

// callParked runs the call apart from ctx and serves it to the caller (serveParked).
func (s *httpSession) callParked(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &parkedCall{id: hex.EncodeToString(b), park: hooks.Park, cancel: cancel, wake: make(chan struct{}, 1), attached: true}
	inner := Hooks{Relays: hooks.Relays, OnRequest: func(req ServerRequest) { p.push(parkedItem{request: &req}) }}
	if hooks.OnProgress != nil {
		inner.OnProgress = func(n []byte) { p.push(parkedItem{progress: n}) }
	}
	s.waiting.park(p)
	go func() {
		defer cancel()
		res, err := s.callWith(cctx, method, params, timeout, inner)
		p.push(parkedItem{done: true, result: res, err: err})
	}()
	return s.waiting.serveParked(ctx, p, hooks)
}

// serveParked hands the call's progress to the caller until its end, or until a request for
// the client, which ends the caller's wait with *InputRequiredError and parks the call.
func (w *waiters) serveParked(ctx context.Context, p *parkedCall, hooks Hooks) (json.RawMessage, error) {
	for {
		p.mu.Lock()
		var it *parkedItem
		if len(p.queue) > 0 {
			it = &p.queue[0]
			p.queue = p.queue[1:]
		}
		p.mu.Unlock()
		switch {
		case it == nil:
			select {
			case <-p.wake:
			case <-ctx.Done():
				w.leave(p, false)
				return nil, ctx.Err()
			}
		case it.progress != nil:
			if hooks.OnProgress != nil {
				hooks.OnProgress(it.progress)
			}
		case it.request != nil:
			w.leave(p, true)
			return nil, &InputRequiredError{Call: "h:" + p.id, Requests: []ServerRequest{*it.request}}
		default:
			w.unpark(p)
			return it.result, it.err
		}
	}
}

// leave detaches the call from its caller: parked for its park time when it asked the
// client something, else cancelled.
func (w *waiters) leave(p *parkedCall, asked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attached = false
	if !asked {
		p.cancel()
		w.unpark(p)
		return
	}
	p.timer = time.AfterFunc(p.park, func() {
		p.mu.Lock()
		attached := p.attached
		p.mu.Unlock()
		if !attached {
			p.cancel()
			w.unpark(p)
		}
	})
}

// resumeParked delivers the client's answers to a call parked on this replica and serves the
// rest of it.
func (w *waiters) resumeParked(ctx context.Context, id string, answers []ClientAnswer, hooks Hooks) (json.RawMessage, error) {
	p := w.parkedCall(id)
	if p == nil {
		return nil, fmt.Errorf("%w on this mcpgateway replica: an HTTP server's call waits on the replica that gave the input_required result (the retry must reach that one), or it ended, or it waited longer than it may", ErrRelayUnknown)
	}
	p.mu.Lock()
	if p.attached {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: the call is being resumed by another retry", ErrRelayUnknown)
	}
	p.attached = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	for _, a := range answers {
		kind, waiter, _ := splitRef(a.Ref)
		if kind != "h" {
			continue
		}
		_ = w.deliver(waiter, relayAnswer{result: a.Result, err: a.Err}) // gone: the call's end tells why
	}
	return w.serveParked(ctx, p, hooks)
}
