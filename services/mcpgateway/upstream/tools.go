package upstream

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// declaresTools reports whether a server's handshake (or discovery) declared the tools
// capability. A server that did not has no tools and is not asked for them: it answers
// tools/list with an error (-32601, or mcp-go's "tools not supported"), which must not fail
// the connection of a prompts-only or resources-only server.
func declaresTools(inf Info) bool {
	c, ok := inf.Capabilities["tools"]
	return ok && c != nil
}

// listings numbers the tool lists kept by every session, so that a version names one list.
var listings atomic.Uint64

// toolCache is the last tools/list answer of one session. Listings may overlap (a refresh
// from the admin API, one after notifications/tools/list_changed): each takes a ticket when
// it starts, and an answer is kept only if no later-started listing was kept already, so an
// older listing never overwrites a newer one.
type toolCache struct {
	mu     sync.Mutex
	tools  []json.RawMessage
	listed bool
	issued uint64
	stored uint64
	// version is the process-wide number of the list kept (see Manager.Listed).
	version uint64
	// admit leaves out of a complete list the tools it does not serve (Manager.PinTools); nil:
	// all of them.
	admit func(ctx context.Context, tools []json.RawMessage) []json.RawMessage
}

// admitted is the part of tools, a complete list the server just sent, that is served.
func (c *toolCache) admitted(ctx context.Context, tools []json.RawMessage) []json.RawMessage {
	if c.admit == nil || tools == nil {
		return tools
	}
	return c.admit(ctx, tools)
}

// get returns the cached tools and whether the server was listed at all.
func (c *toolCache) get() ([]json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools, c.listed
}

// listing returns the cached tools, their version and whether the server was listed at all.
func (c *toolCache) listing() ([]json.RawMessage, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools, c.version, c.listed
}

// begin returns the ticket of a listing that starts now.
func (c *toolCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.issued++
	return c.issued
}

// put keeps tools listed under ticket unless a later listing was kept already; it returns
// what the cache holds afterwards.
func (c *toolCache) put(ticket uint64, tools []json.RawMessage) []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tools == nil {
		tools = []json.RawMessage{}
	}
	if ticket > c.stored {
		c.tools, c.listed, c.stored, c.version = tools, true, ticket, listings.Add(1)
	}
	return c.tools
}

// relister runs a re-listing after notifications/tools/list_changed: one at a time per
// session, and one more after it when notifications arrived while it ran (a burst of
// notifications costs at most two listings, and the last listing starts after the last
// notification).
type relister struct {
	mu      sync.Mutex
	running bool
	again   bool
}

// trigger runs list in a goroutine of its own unless one runs already.
func (r *relister) trigger(list func()) {
	r.mu.Lock()
	if r.running {
		r.again = true
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	go func() {
		for {
			list()
			r.mu.Lock()
			if !r.again {
				r.running = false
				r.mu.Unlock()
				return
			}
			r.again = false
			r.mu.Unlock()
		}
	}()
}
