package upstream

import "errors"

// Errors of upstream connections; the admin service maps them to gRPC codes.
var (
	// ErrDisabled means the server is registered but disabled.
	ErrDisabled = errors.New("server is disabled")
	// ErrNotConnected means the server has no open connection.
	ErrNotConnected = errors.New("server is not connected")
	// ErrUpstream means the upstream failed: it could not be started, reached, or answered badly.
	ErrUpstream = errors.New("MCP server failed")
)

// RPCError is a JSON-RPC error answered by the upstream.
type RPCError struct {
	Code    int
	Message string
	Data    []byte
}

func (e *RPCError) Error() string { return e.Message }
