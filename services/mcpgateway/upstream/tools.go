package upstream

import (
	"encoding/json"
	"sync"
)

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
}

// get returns the cached tools and whether the server was listed at all.
func (c *toolCache) get() ([]json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools, c.listed
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
		c.tools, c.listed, c.stored = tools, true, ticket
	}
	return c.tools
}
