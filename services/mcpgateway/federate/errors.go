package federate

import "errors"

// ErrUnknownServer means /mcp/servers/{id} names no server this caller may reach: not
// registered, disabled, or not exposed (expose: false) to a caller without the admin key. The
// three answer alike, so that a hidden server's existence is not revealed (404).
var ErrUnknownServer = errors.New("no MCP server is served at /mcp/servers/{id} with this id: it is not registered, or not enabled")
