// Package jsonrpcerr writes the error response of JSON-RPC with id null: the shape of every
// answer of the MCP endpoints that is not a server's own. mcpgateway's transport writes it,
// and the edge writes it for the refusals it gives in the endpoints' place (a body over the
// limit, a caller over its limits, no route): one shape, one home, whichever answers.
package jsonrpcerr

import (
	"encoding/json"
	"net/http"

	"github.com/zestmcp/zest/lib/ratelimit"
)

// Codes of JSON-RPC 2.0 the endpoints answer with.
const (
	ParseError     = -32700
	InvalidRequest = -32600
	InternalError  = -32603
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Write writes a JSON-RPC error response (id null) with an HTTP status.
func Write(w http.ResponseWriter, httpStatus, code int, msg string) {
	writeJSON(w, httpStatus, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
}

// WriteStatus is Write with the code of an HTTP status: Internal Error (-32603) for a failure
// (5xx), Invalid Request (-32600) for a refusal.
func WriteStatus(w http.ResponseWriter, httpStatus int, msg string) {
	code := InvalidRequest
	if httpStatus >= 500 {
		code = InternalError
	}
	Write(w, httpStatus, code, msg)
}

// WriteInvalidRequest is Write with Invalid Request (-32600).
func WriteInvalidRequest(w http.ResponseWriter, httpStatus int, msg string) {
	Write(w, httpStatus, InvalidRequest, msg)
}

// WriteLimited writes the answer over a limit (429): a JSON-RPC error (id null) with
// ratelimit.JSONRPCCode and the wait in data.retry_after_ms; the caller sets Retry-After.
func WriteLimited(w http.ResponseWriter, msg string, retryAfterMs int64) {
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": ratelimit.JSONRPCCode, "message": msg, "data": map[string]any{"retry_after_ms": retryAfterMs}}})
}
