package pins

import (
	"errors"
	"fmt"

	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// HeldError is a call of a tool whose definition is held: it changed since it was pinned, or
// the tool appeared after the server's tools were pinned; or of a tool no listing showed
// (StateUnlisted). It names the tool and how an administrator accepts it.
type HeldError struct {
	Server string
	Tool   string
	// State is StatePending, StateRefused or StateUnlisted.
	State string
}

func (e *HeldError) Error() string {
	if e.State == StateUnlisted {
		return fmt.Sprintf("tool %q of MCP server %q is refused: the server never listed it, so its definition was never pinned (a server that answers a call of a tool it does not list may be pulling a rug); it becomes callable once the server lists it and an administrator accepts it (zestctl servers pins list %s, or the console's Pins tab)", e.Tool, e.Server, e.Server)
	}
	if e.State == StateRefused {
		return fmt.Sprintf("tool %q of MCP server %q is held: an administrator refused its current definition, which changed since it was pinned; it stays unavailable until an administrator accepts it (zestctl servers pins accept %s %s, or the console's Pins tab)", e.Tool, e.Server, e.Server, e.Tool)
	}
	return fmt.Sprintf("tool %q of MCP server %q is held: its definition changed since it was pinned (or it is new), and it is unavailable until an administrator accepts the change (zestctl servers pins accept %s %s, or the console's Pins tab)", e.Tool, e.Server, e.Server, e.Tool)
}

// ErrNotHeld means a decision names a server or a tool with no held change. It is a
// registry.ErrNotFound for errors.Is.
var ErrNotHeld = fmt.Errorf("no held change: %w", registry.ErrNotFound)

// ErrNoStore means the registry keeps no pins (a store that does not implement registry.Pins).
var ErrNoStore = errors.New("this registry keeps no tool pins")
