package mcpserve

import "errors"

// Errors the edge turns into HTTP statuses (through gRPC codes, mapped in toStatus).
var (
	// ErrSessionRequired means a request other than initialize came without Mcp-Session-Id (400).
	ErrSessionRequired = errors.New("Mcp-Session-Id header is required: send initialize first and repeat the id it returns")
	// ErrSessionUnknown means the id is not one this gateway issued, has expired, or was ended (404).
	ErrSessionUnknown = errors.New("session not found: it ended, expired or was never issued; send initialize again")
	// ErrProtocolMismatch means MCP-Protocol-Version names another version than the session negotiated (400).
	ErrProtocolMismatch = errors.New("MCP-Protocol-Version header contradicts the session")
)
