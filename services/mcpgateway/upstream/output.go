package upstream

import (
	"encoding/json"
	"fmt"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// Output size limits. Every tools/call result reaches its caller through the manager (the
// admin API and the chat loop through CallTool, /mcp/servers/{id} and presets through
// CallWith and Resume), so the check sits here, right after the upstream answered, and no
// path can pass on a result larger than its server's max_output_bytes.

// SetMaxOutputBytes sets the limit of a tools/call result of servers whose config has no
// max_output_bytes (ZEST_TOOL_OUTPUT_MAX_BYTES); n <= 0 restores
// serverconfig.DefaultMaxOutputBytes.
func (m *Manager) SetMaxOutputBytes(n int) { m.maxOutput.Store(int64(n)) }

// MaxOutputBytes is the limit of one tools/call result of the server of cfg: its
// max_output_bytes, or the manager's default.
func (m *Manager) MaxOutputBytes(cfg *mcpgatewayv1.ServerConfig) int {
	if n := cfg.GetMaxOutputBytes(); n > 0 {
		return int(n)
	}
	if n := m.maxOutput.Load(); n > 0 {
		return int(n)
	}
	return serverconfig.DefaultMaxOutputBytes
}

// limitOutput returns the check of an answer to method on the server of cfg: a tools/call
// result larger than the server's limit becomes a CallToolResult with isError true that says
// so; anything else passes unchanged. (A function, so that it wraps a call's two results:
// m.limitOutput(cfg, method)(m.onSession(…)).)
func (m *Manager) limitOutput(cfg *mcpgatewayv1.ServerConfig, method string) func(json.RawMessage, error) (json.RawMessage, error) {
	return func(res json.RawMessage, err error) (json.RawMessage, error) {
		if err != nil || method != "tools/call" {
			return res, err
		}
		return LimitToolResult(cfg.GetId(), m.MaxOutputBytes(cfg), res), nil
	}
}

// LimitToolResult returns res when it is at most limit bytes, and otherwise a valid
// CallToolResult with isError true naming the size, the limit and how to raise it — never a
// cut JSON document, which a client could not parse or would take as the whole answer.
func LimitToolResult(server string, limit int, res json.RawMessage) json.RawMessage {
	if len(res) <= limit {
		return res
	}
	msg := fmt.Sprintf("The tool's output was %d bytes, over the limit of MCP server %q (max_output_bytes %d); it was not passed on. "+
		"Ask the tool for less (a narrower query, a page of the results), or have an admin raise max_output_bytes in the server's config "+
		"(up to %d) or ZEST_TOOL_OUTPUT_MAX_BYTES for servers that set none.", len(res), server, limit, serverconfig.MaxMaxOutputBytes)
	out, _ := json.Marshal(map[string]any{
		"content": []map[string]string{{"type": "text", "text": msg}},
		"isError": true,
	})
	return out
}
