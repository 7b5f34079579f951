package upstream

import (
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/client/transport"
)

// Errors of upstream connections; the admin service maps them to gRPC codes.
var (
	// ErrDisabled means the server is registered but disabled.
	ErrDisabled = errors.New("server is disabled")
	// ErrNotConnected means the server has no open connection.
	ErrNotConnected = errors.New("server is not connected")
	// ErrUpstream means the upstream failed: it could not be started, reached, or answered badly.
	ErrUpstream = errors.New("MCP server failed")
	// ErrRelayUnknown means no request of a server waits for the answer a client sent.
	ErrRelayUnknown = errors.New("no request of the MCP server waits for this answer")
)

// DisabledError is a connect or a call of a server that is registered and disabled: a state
// of its configuration, which holds until an administrator enables it.
type DisabledError struct {
	// ID is the server's registry id.
	ID string
}

func (e *DisabledError) Error() string {
	return fmt.Sprintf(`MCP server %q is disabled: enable it (POST /internal/mcp/servers with {"id":%q,"enabled":true}, or the console's Servers view), then connect it`, e.ID, e.ID)
}

// Is makes the error an ErrDisabled.
func (e *DisabledError) Is(target error) bool { return target == ErrDisabled }

// HeldError is a call of a server an administrator disconnected: it stays disconnected until
// an administrator connects it again.
type HeldError struct {
	// ID is the server's registry id.
	ID string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("MCP server %q was disconnected by an administrator: connect it (POST /internal/mcp/servers/%s/connect, or the console's Servers view) to call it again", e.ID, e.ID)
}

// Is makes the error an ErrNotConnected.
func (e *HeldError) Is(target error) bool { return target == ErrNotConnected }

// RPCError is a JSON-RPC error answered by the upstream.
type RPCError struct {
	Code    int
	Message string
	Data    []byte
}

func (e *RPCError) Error() string { return e.Message }

// SessionExpiredError is the failure of a call to a Streamable HTTP server that answered
// HTTP 404 for the session: it has forgotten it (restarted, or expired it). The call that met
// the 404 fails with this error; the next call to the server initializes a new session.
type SessionExpiredError struct {
	// ID is the server's registry id.
	ID string
}

func (e *SessionExpiredError) Error() string {
	return fmt.Sprintf("MCP server %q forgot the session (HTTP 404 session expired); the next call starts a new session", e.ID)
}

// Unwrap makes the error an ErrUpstream (the admin API answers 502) and mcp-go's
// transport.ErrSessionTerminated.
func (e *SessionExpiredError) Unwrap() []error {
	return []error{ErrUpstream, transport.ErrSessionTerminated}
}
