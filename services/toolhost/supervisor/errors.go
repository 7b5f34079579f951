package supervisor

import (
	"errors"

	"github.com/zestmcp/zest/lib/envref"
)

// Errors of the supervisor; the gRPC layer maps them (and stdio's and envref's) to codes.
var (
	// ErrUnknownServer means no server with the id was started (or it was stopped).
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrBadSpec means the launch spec is invalid.
	ErrBadSpec = errors.New("invalid server spec")
	// ErrCrashLoop means the server keeps crashing and the next restart is not due yet.
	ErrCrashLoop = errors.New("MCP server is crash-looping")
	// ErrHandshake means the MCP initialize handshake failed.
	ErrHandshake = errors.New("MCP handshake failed")
	// ErrReservedVariable means a spec refers to, or the operator's allow-list names, a
	// variable of Zest's own services (ZEST_*, LEMONADE_*), which no server gets.
	ErrReservedVariable = envref.ErrReserved
	// ErrStopped means the server was stopped while its child started.
	ErrStopped = errors.New("MCP server was stopped")
	// ErrMoving means the server is draining to stop on this tool host (StopDrained: it moved
	// to another); the call was refused before it reached the child.
	ErrMoving = errors.New("MCP server is moving off this tool host")
	// ErrClosed means the supervisor is shutting down.
	ErrClosed = errors.New("tool host is shutting down")
)
