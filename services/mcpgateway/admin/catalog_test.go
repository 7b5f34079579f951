package admin

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// The tool list is the catalog's snapshot: read twice with nothing changed it is the same
// answer; once a server has listed other tools (here a refresh), the next read shows them;
// a disconnect and a delete show at once too.
func TestToolListFollowsTheNextChange(t *testing.T) {
	mcpSrv := server.NewMCPServer("growing", "1", server.WithToolCapabilities(true))
	add := func(name string) {
		mcpSrv.AddTool(mcp.NewTool(name, mcp.WithString("x", mcp.Enum("a", "b"))), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name), nil
		})
	}
	add("first")
	hs := httptest.NewServer(server.NewStreamableHTTPServer(mcpSrv))
	t.Cleanup(hs.Close)

	s := newService(t)
	ctx := t.Context()
	in := &mcpgatewayv1.ServerConfig{Id: "grow", Transport: "http", Url: hs.URL + "/mcp", AllowInsecureHttp: true}
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in}); err != nil {
		t.Fatal(err)
	}
	list := func() *mcpgatewayv1.ListToolsResponse {
		t.Helper()
		r, err := s.ListTools(ctx, &mcpgatewayv1.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := names(list().GetTools()); got != "" {
		t.Fatalf("before connecting: %q", got)
	}
	if _, err := s.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "grow"}); err != nil {
		t.Fatal(err)
	}
	first := list()
	if got := names(first.GetTools()); got != "first" {
		t.Fatalf("after connecting: %q", got)
	}
	if again := list(); again != first {
		t.Fatal("a second read with nothing changed built another answer")
	}
	add("second")
	r, err := s.RefreshTools(ctx, &mcpgatewayv1.RefreshToolsRequest{Id: "grow"})
	if err != nil || names(r.GetServer().GetTools()) != "first,second" {
		t.Fatalf("refresh: %v %v", r, err)
	}
	if got := names(list().GetTools()); got != "first,second" {
		t.Fatalf("the read after the refresh: %q", got)
	}
	if _, err := s.DisconnectServer(ctx, &mcpgatewayv1.DisconnectServerRequest{Id: "grow"}); err != nil {
		t.Fatal(err)
	}
	if got := names(list().GetTools()); got != "" {
		t.Fatalf("after disconnecting: %q", got)
	}
	if _, err := s.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "grow"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteServer(ctx, &mcpgatewayv1.DeleteServerRequest{Id: "grow"}); err != nil {
		t.Fatal(err)
	}
	if got := names(list().GetTools()); got != "" {
		t.Fatalf("after deleting: %q", got)
	}
}
