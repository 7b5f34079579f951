package toolcall

import (
	"encoding/json"
	"fmt"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// MaxOutputBytes is the limit of one result of the server of cfg: its max_output_bytes, or
// the pipeline's default (ZEST_TOOL_OUTPUT_MAX_BYTES).
func (p *Pipeline) MaxOutputBytes(cfg *mcpgatewayv1.ServerConfig) int {
	if n := cfg.GetMaxOutputBytes(); n > 0 {
		return int(n)
	}
	return p.cfg.MaxOutputBytes
}

// limitOutput is the output cap: a result larger than its server's limit becomes a
// CallToolResult with isError true that says so; an error passes unchanged.
func (p *Pipeline) limitOutput(cfg *mcpgatewayv1.ServerConfig, res json.RawMessage, err error) (json.RawMessage, error) {
	if err != nil {
		return res, err
	}
	return LimitToolResult(cfg.GetId(), p.MaxOutputBytes(cfg), res), nil
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
