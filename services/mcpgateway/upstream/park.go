package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zestmcp/zest/lib/park"
)

// Parking a session-era HTTP server's call for a client of MCP 2026-07-28 (Hooks.Park): the
// server's request waits inside this replica's mcp-go transport, on the call's response
// stream, so the call runs apart from the client's request (package park) and waits here,
// parked, for the retry that carries the answers; a retry that reaches another replica finds
// nothing (ErrRelayUnknown). As the tool host does for stdio, one request ends a round, a park
// that passes cancels the call, and a caller that leaves with nothing asked cancels it at once.

// parkedItem is what the call produced: progress, a request for the client, or its result.
type parkedItem struct {
	progress []byte
	request  *ServerRequest
	result   json.RawMessage
}

func (it parkedItem) kind() park.Kind {
	switch {
	case it.progress != nil:
		return park.Progress
	case it.request != nil:
		return park.Request
	}
	return park.Last
}

// Parked counts the calls of HTTP servers run apart from their callers on this replica.
func (m *Manager) Parked() int { return m.waiting.parked.Len() }

// callParked runs the call apart from ctx and serves it to the caller (serveParked).
func (s *httpSession) callParked(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	p := s.waiting.parked.Start(ctx, hooks.Park, func(ctx context.Context, p *park.Call[parkedItem]) (parkedItem, error) {
		inner := Hooks{Relays: hooks.Relays, OnRequest: func(req ServerRequest) { p.Push(parkedItem{request: &req}) }}
		if hooks.OnProgress != nil {
			inner.OnProgress = func(n []byte) { p.Push(parkedItem{progress: n}) }
		}
		res, err := s.callWith(ctx, method, params, timeout, inner)
		return parkedItem{result: res}, err
	})
	return s.waiting.serveParked(ctx, p, hooks)
}

// serveParked hands the call's progress to the caller until its end, or until a request for
// the client, which ends the caller's wait with *InputRequiredError and parks the call.
func (w *waiters) serveParked(ctx context.Context, p *park.Call[parkedItem], hooks Hooks) (json.RawMessage, error) {
	var res json.RawMessage
	err := w.parked.Serve(ctx, p, func(it parkedItem) error {
		switch it.kind() {
		case park.Progress:
			if hooks.OnProgress != nil {
				hooks.OnProgress(it.progress)
			}
		case park.Request:
			return &InputRequiredError{Call: "h:" + p.ID(), Requests: []ServerRequest{*it.request}}
		default:
			res = it.result
		}
		return nil
	})
	return res, err
}

// resumeParked delivers the client's answers to a call parked on this replica and serves the
// rest of it.
func (w *waiters) resumeParked(ctx context.Context, id string, answers []ClientAnswer, hooks Hooks) (json.RawMessage, error) {
	p, err := w.parked.Resume(id)
	switch {
	case errors.Is(err, park.ErrUnknown):
		return nil, fmt.Errorf("%w on this mcpgateway replica: an HTTP server's call waits on the replica that gave the input_required result (the retry must reach that one), or it ended, or it waited longer than it may", ErrRelayUnknown)
	case err != nil:
		return nil, fmt.Errorf("%w: the call is being resumed by another retry", ErrRelayUnknown)
	}
	for _, a := range answers {
		kind, waiter, _ := splitRef(a.Ref)
		if kind != "h" {
			continue
		}
		_ = w.deliver(waiter, relayAnswer{result: a.Result, err: a.Err}) // gone: the call's end tells why
	}
	return w.serveParked(ctx, p, hooks)
}
