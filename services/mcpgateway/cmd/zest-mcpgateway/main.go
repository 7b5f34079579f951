// Command zest-mcpgateway serves MCP semantics for /mcp and the admin registry over gRPC.
package main

import (
	"context"
	"log/slog"

	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/service"
	"github.com/zestmcp/zest/services/mcpgateway/server"
)

func main() {
	cfg := server.DefaultConfig()
	service.Main("zest-mcpgateway", &cfg, func(ctx context.Context, log *slog.Logger) error {
		// Metrics on their own port, stopped with ctx (lib/metrics).
		if _, err := metrics.Start(ctx, cfg.MetricsAddr, log); err != nil {
			return err
		}
		s, err := server.New(cfg, log)
		if err != nil {
			return err
		}
		return s.Run(ctx)
	}, service.GRPCHealth(&cfg.Addr)) // -healthcheck (deploy/compose.yaml)
}
