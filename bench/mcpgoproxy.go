package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// mcpgoProxyRole, set in ZEST_BENCH_ROLE, makes the bench binary the one-process proxy of the
// federation scenario: an mcp-go stdio client to the server whose entry point is in
// ZEST_BENCH_ENTRY, its tools re-exposed by an mcp-go Streamable HTTP server on the listening
// socket handed over as fd 3. It is the smallest Go proxy one would write with the SDK Zest
// itself uses, run as its own process so its CPU is counted apart from the load generator's.
const mcpgoProxyRole = "mcpgo-proxy"

func serveMCPGoProxy() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	t := transport.NewStdio("node", nil, os.Getenv("ZEST_BENCH_ENTRY"))
	up := client.NewClient(t, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if err := up.Start(ctx); err != nil {
		return err
	}
	defer up.Close() // closes the child's stdin and waits for it
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpgo-proxy", Version: "1"}
	if _, err := up.Initialize(ctx, init); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	tools, err := up.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	s := server.NewMCPServer("mcpgo-proxy", "1", server.WithToolCapabilities(false))
	for _, tool := range tools.Tools {
		s.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return up.CallTool(ctx, req)
		})
	}
	l, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: server.NewStreamableHTTPServer(s,
		server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...))}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return err
	}
	return nil
}
