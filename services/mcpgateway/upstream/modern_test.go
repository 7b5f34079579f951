package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestModernUpstreamWithoutSession: an HTTP server that answers server/discover with
// 2026-07-28 is driven without a session: no initialize, no Mcp-Session-Id, every request
// with the revision's _meta and Mcp-Method/Mcp-Name headers; a forwarded request keeps the
// client's own _meta members; an unknown method (HTTP 404) is -32601, not a lost session.
func TestModernUpstreamWithoutSession(t *testing.T) {
	srv := server.NewMCPServer("modern-up", "2.0.0", server.WithToolCapabilities(false), server.WithInstructions("be modern"))
	srv.AddTool(mcp.NewTool("who", mcp.WithString("x")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caps := "none"
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil {
			caps = "elicitation"
		}
		return mcp.NewToolResultText("caps " + caps), nil
	})
	var mu sync.Mutex
	var seen []string
	inner := server.NewStreamableHTTPServer(srv)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Mcp-Method")+" session="+r.Header.Get("Mcp-Session-Id")+" version="+r.Header.Get("MCP-Protocol-Version"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	m := New(nil, nil, nil)
	cfg := httpConfig("modern", hs.URL+"/mcp")
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(context.Background(), "modern") })
	inf, err := m.Info(t.Context(), cfg)
	if err != nil || inf.ProtocolVersion != ModernVersion || inf.ServerInfo["name"] != "modern-up" || inf.Instructions != "be modern" || inf.Capabilities["tools"] == nil {
		t.Fatalf("info %+v, %v", inf, err)
	}
	res, err := m.Call(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"who","arguments":{}}`), 0)
	if err != nil || !strings.Contains(string(res), "caps none") || !strings.Contains(string(res), `"resultType":"complete"`) {
		t.Fatalf("call: %s, %v", res, err)
	}
	res, err = m.Call(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"who","arguments":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`), 0)
	if err != nil || !strings.Contains(string(res), "caps elicitation") {
		t.Fatalf("a forwarded request lost the client's capabilities: %s, %v", res, err)
	}
	_, err = m.Call(t.Context(), cfg, "nope/nothing", nil, 0)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcp.METHOD_NOT_FOUND {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := m.Call(t.Context(), cfg, "tools/list", nil, 0); err != nil {
		t.Fatalf("after a 404 the connection must still serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, "initialize") || !strings.HasSuffix(s, "version=2026-07-28") || !strings.Contains(s, "session= ") || !strings.HasPrefix(s, "POST ") {
			t.Errorf("the upstream saw %q: want POSTs of 2026-07-28 without a session", s)
		}
	}
	if len(seen) == 0 || !strings.HasPrefix(seen[0], "POST server/discover") {
		t.Errorf("first request %v, want the server/discover probe", seen)
	}
}
