package mcpregistry

import "errors"

// Errors of the registry client and the mapping.
var (
	// ErrUnavailable means the registry could not be reached or answered an error status.
	ErrUnavailable = errors.New("the MCP Registry is unavailable")
	// ErrNotFound means the registry has no such server or version.
	ErrNotFound = errors.New("the MCP Registry has no such server")
	// ErrBadAnswer means the registry's answer is not what its API says (not JSON, too large,
	// no name).
	ErrBadAnswer = errors.New("the MCP Registry's answer is not understood")
	// ErrRefused means Zest cannot install the server as the server.json describes it.
	ErrRefused = errors.New("Zest cannot install this server")
	// ErrBadRequest means the request names no server, or a limit out of range.
	ErrBadRequest = errors.New("bad registry request")
)
