package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mcpWords are what the edge would name if it spoke MCP: the transport's headers, the
// protocol's methods, JSON-RPC's fields and codes, and the contract the edge once tunnelled
// MCP through. Matched without regard to case, in code and comments alike.
var mcpWords = []string{
	"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "mcp-param-",
	`"initialize"`, `"ping"`, `"tools/`, `"resources/`, `"prompts/`, `"notifications/`, `"subscriptions/`,
	`"completion/`, `"logging/`, `"sampling/`, `"elicitation/`, `"roots/`,
	`"jsonrpc"`, "-32600", "-32601", "-32602", "-32603", "-32700", "lib/mcpbatch",
	"mcpservice", "exchangerequest", "listenrequest", "endsessionrequest",
}

// TestEdgeSpeaksNoMCP: the edge (gateway/, its Go code outside tests) hands the MCP endpoints
// to mcpgateway as generic HTTP (HttpService) and names no MCP header, method or JSON-RPC
// field: a new MCP revision changes mcpgateway alone. The JSON-RPC error body of the edge's
// own refusals under /mcp comes from lib/jsonrpcerr, which mcpgateway's transport writes too.
func TestEdgeSpeaksNoMCP(t *testing.T) {
	for _, hit := range mcpNamedIn(t, "../gateway") {
		t.Error(hit)
	}
}

// mcpNamedIn lists, for each Go file under root (tests aside), the MCP words it names.
func mcpNamedIn(t *testing.T, root string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := strings.ToLower(string(b))
		for _, w := range mcpWords {
			if strings.Contains(text, w) {
				hits = append(hits, path+" names "+w+": MCP belongs to mcpgateway (services/mcpgateway/streamable); the edge passes requests on as HTTP")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
