package stdio

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Errors of a child connection; the tool host maps them to gRPC codes in one place.
var (
	// ErrExited means the child exited (or was stopped); in-flight calls fail with it at once.
	ErrExited = errors.New("MCP server process exited")
	// ErrStopped is wrapped in the exit error of a child stopped on purpose (Stop).
	ErrStopped = errors.New("stopped")
	// ErrBusy means the bound on in-flight calls is reached.
	ErrBusy = errors.New("too many calls in flight")
	// ErrProtocol means the child broke the stdio transport (a non-JSON or over-long stdout line).
	ErrProtocol = errors.New("MCP stdio protocol violation")
	// ErrBadRequest means a call cannot be sent as given (params that are not a JSON object or
	// array, an empty method); nothing was written to the child.
	ErrBadRequest = errors.New("invalid JSON-RPC request")
	// ErrLaunch means the process could not be started.
	ErrLaunch = errors.New("could not start MCP server process")
)

// RPCError is a JSON-RPC error object answered by the child.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }
