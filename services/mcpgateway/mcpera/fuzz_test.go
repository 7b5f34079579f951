package mcpera

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzClassify: any header and body: Classify never panics; its cheap byte scan never hides
// a modern request: a body that is a JSON object
// naming a 2026-07-28-or-later version in params._meta, or any non-batch body under such a
// header, is modern, and nothing else is; Check answers a modern request with nothing or one
// JSON-RPC error response that keeps the request's id.
func FuzzClassify(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct{ header, method, name, body string }{
		{"2026-07-28", "tools/list", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`},
		{"2026-07-28", "tools/call", "echo", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo",` + meta + `}}`},
		{"", "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`},
		{"2025-11-25", "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`},
		{"2026-07-28", "", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
		{"2025-11-25", "", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"2026-07-28", "tools/list", "", `{"jsonrpc":"2.0","id":null,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":2026}}}`},
		{"2099-01-01", "x", "y", `{"params":[]}`},
		// The key spelled with JSON escapes: the same key once decoded.
		{"", "tools/list", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`},
		{"", "tools/list", "", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/\u0070rotocolVersion":"2026-07-28"}}}`},
	} {
		f.Add(c.header, c.method, c.name, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, header, method, name string, body []byte) {
		r := Classify(header, body)
		trimmed := bytes.TrimSpace(body)
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(trimmed, &env)
		// The version in params._meta, read as the gateway reads a message (encoding/json:
		// member names of the envelope matched without regard to case, _meta's keys exactly).
		var metaVersion string
		if len(trimmed) > 0 && trimmed[0] == '{' {
			var outer struct {
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			var params struct {
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(trimmed, &params) == nil && json.Unmarshal(params.Params, &outer.Params) == nil {
				_ = json.Unmarshal(outer.Params.Meta[mcp.MetaKeyProtocolVersion], &metaVersion)
			}
		}
		want := mcp.IsModernProtocol(header) && len(trimmed) > 0 && trimmed[0] != '[' || mcp.IsModernProtocol(metaVersion)
		if r.Modern != want {
			t.Fatalf("Classify(%q, %q).Modern = %v, want %v (meta version %q)", header, body, r.Modern, want, metaVersion)
		}
		if !r.Modern {
			return
		}
		req := http.Header{"Mcp-Method": {method}, "Mcp-Name": {name}, "Mcp-Protocol-Version": {header}}
		id := env.ID
		out := r.Check(req, id, env.Method, []string{Version})
		if out == nil {
			return
		}
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *struct {
				Code    *int    `json:"code"`
				Message *string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || resp.JSONRPC != "2.0" || resp.Error == nil || resp.Error.Code == nil || resp.Error.Message == nil {
			t.Fatalf("Check answered %s (%v)", out, err)
		}
		wantID := "null"
		if len(id) > 0 {
			var b bytes.Buffer
			if json.Compact(&b, id) == nil {
				wantID = b.String()
			}
		}
		var gotID bytes.Buffer
		_ = json.Compact(&gotID, resp.ID)
		if gotID.String() != wantID {
			t.Fatalf("Check answered id %s for request id %s", resp.ID, id)
		}
	})
}
