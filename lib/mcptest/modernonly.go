package mcptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// ModernOnly wraps the handler of a Streamable HTTP MCP server so that it serves MCP
// 2026-07-28 alone, as a server that has dropped the session era does: initialize is answered
// with HTTP 400 and a JSON-RPC error -32602 that lists the versions served (the answer the
// specification gives an unsupported version). Every other request reaches h unchanged.
// Pair it with a handler whose server/discover lists only 2026-07-28.
func ModernOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method == "initialize" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
				"code": -32602, "message": "Unsupported protocol version: this server serves 2026-07-28 only (no initialize)",
				"data": map[string]any{"supported": []string{"2026-07-28"}}}})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}
