package stdio

import (
	"encoding/json"
	"fmt"
	"time"
)

// Requests a child may send its client that a call's caller can relay to its own MCP client.
// Kinds of requests name the client capability that accepts them.
const (
	MethodSampling    = "sampling/createMessage"
	MethodElicitation = "elicitation/create"
	MethodRoots       = "roots/list"
)

// Defaults of the relay options.
const (
	// DefaultMaxRelays bounds the requests of one child waiting for callers' clients.
	DefaultMaxRelays = 16
	// DefaultOrphanWindow is how long a call its caller gave up on still counts as in flight
	// for attribution (unless the child answers it first): a child that ignores
	// notifications/cancelled may still ask on its behalf, and that request must not reach
	// another caller.
	DefaultOrphanWindow = 30 * time.Second
)

// Hooks are what one call takes from the child besides its answer.
type Hooks struct {
	// OnProgress (may be nil) receives the call's progress notifications with the caller's
	// own progress token.
	OnProgress func([]byte)
	// Accepts reports whether the caller relays a request of method (MethodSampling,
	// MethodElicitation, MethodRoots) to its MCP client; nil accepts none.
	Accepts func(method string) bool
	// OnRequest receives a request of the child attributed to this call (see Conn.CallWith),
	// from the child's read loop: it must not block. reply answers the child.
	OnRequest func(method string, params json.RawMessage, reply Reply)
	// OnAnswer (may be nil) is called from the child's read loop when the call's answer (a
	// result or a JSON-RPC error) is read, before the call returns it: every message the
	// child wrote before its answer has been handled by then (OnNotification called). It
	// must not block.
	OnAnswer func()
}

// Reply answers a relayed request of the child with its own id: a result (a JSON value) or
// a JSON-RPC error. It reports false, and writes nothing, once the request was answered or
// its call has ended (the child then got an error).
type Reply func(result json.RawMessage, rpcErr *RPCError) bool

// relay is one request of the child waiting for a caller's client.
type relay struct {
	childID json.RawMessage
}

// relayable reports whether method is a request a caller's client may answer.
func relayable(method string) bool {
	return method == MethodSampling || method == MethodElicitation || method == MethodRoots
}

// attribute answers or relays one request of the child that a client could answer. The
// rule is sound and deterministic: the request goes to the caller of the one call in flight
// on the child, when that caller accepts its kind; with none or several in flight (a call
// given up on within OrphanWindow counts) nobody can be told for sure, and the tool host
// answers: roots/list with no roots, sampling and elicitation with an error that says why.
func (c *Conn) attribute(id json.RawMessage, method string, params json.RawMessage) {
	c.mu.Lock()
	c.pruneOrphans()
	n := len(c.pending) + len(c.orphans)
	var cl *call
	if len(c.pending) == 1 && len(c.orphans) == 0 {
		for _, p := range c.pending {
			cl = p
		}
	}
	accepted := cl != nil && cl.hooks.OnRequest != nil && cl.hooks.Accepts != nil && cl.hooks.Accepts(method)
	if accepted && c.relayCount >= c.opts.MaxRelays {
		c.mu.Unlock()
		c.relaysOver.Add(1)
		c.answer(id, nil, &RPCError{Code: -32603, Message: fmt.Sprintf(
			"Internal error: %d requests of this server already wait for their client (tool host limit %d, toolhost-max-relays); answer them first", c.opts.MaxRelays, c.opts.MaxRelays)})
		return
	}
	if !accepted {
		c.mu.Unlock()
		if method == MethodRoots {
			c.answer(id, json.RawMessage(`{"roots":[]}`), nil)
			return
		}
		why := fmt.Sprintf("no client of the call in flight accepts %s (it did not declare the capability, or the caller has no MCP client)", method)
		if n != 1 {
			why = fmt.Sprintf("%s cannot be attributed to one client: %d calls are in flight on this server, which the tool host shares between its callers", method, n)
		}
		c.answer(id, nil, &RPCError{Code: -32603, Message: "Internal error: " + why})
		return
	}
	r := &relay{childID: append(json.RawMessage(nil), id...)}
	if cl.relays == nil {
		cl.relays = map[*relay]struct{}{}
	}
	cl.relays[r] = struct{}{}
	c.relayCount++
	c.mu.Unlock()
	cl.hooks.OnRequest(method, append(json.RawMessage(nil), params...), func(result json.RawMessage, rpcErr *RPCError) bool {
		if !c.dropRelay(cl, r) {
			return false
		}
		if rpcErr == nil && len(result) == 0 {
			result = json.RawMessage(`{}`)
		}
		c.answer(r.childID, result, rpcErr)
		return true
	})
}

// dropRelay removes r from cl's waiting requests; false when it was no longer there.
func (c *Conn) dropRelay(cl *call, r *relay) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := cl.relays[r]; !ok {
		return false
	}
	delete(cl.relays, r)
	c.relayCount--
	return true
}

// endRelays answers the child's requests still waiting for cl's caller, now that cl has
// ended: their client can no longer answer.
func (c *Conn) endRelays(cl *call) {
	c.mu.Lock()
	waiting := cl.relays
	cl.relays = nil
	c.relayCount -= len(waiting)
	c.mu.Unlock()
	for r := range waiting {
		c.answer(r.childID, nil, &RPCError{Code: -32603, Message: "Internal error: the call that caused this request ended before its client answered"})
	}
}

// RelaysOverLimit counts the child's requests refused because MaxRelays were already waiting.
func (c *Conn) RelaysOverLimit() int64 { return c.relaysOver.Load() }

// Relays counts the requests of the child waiting for a caller's client.
func (c *Conn) Relays() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relayCount
}

// Orphans counts the calls given up on that the child has not answered yet and that still
// count as in flight for attribution (see Options.OrphanWindow).
func (c *Conn) Orphans() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneOrphans()
	return len(c.orphans)
}

// pruneOrphans forgets the calls given up on longer than OrphanWindow ago. Called with mu held.
func (c *Conn) pruneOrphans() {
	now := time.Now()
	for cid, until := range c.orphans {
		if now.After(until) {
			delete(c.orphans, cid)
		}
	}
}
