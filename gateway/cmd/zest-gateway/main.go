// Command zest-gateway is the HTTP edge: /mcp, /internal/mcp/*, the OpenAI-compatible API.
package main

import (
	"context"
	"log/slog"

	"github.com/zestmcp/zest/gateway/edge"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/service"
)

func main() {
	cfg := edge.DefaultConfig()
	service.Main("zest-gateway", &cfg, func(ctx context.Context, log *slog.Logger) error {
		// Metrics on their own port, stopped with ctx (lib/metrics).
		if _, err := metrics.Start(ctx, cfg.MetricsAddr, log); err != nil {
			return err
		}
		e, err := edge.New(cfg, log)
		if err != nil {
			return err
		}
		return e.Run(ctx)
	}, service.HTTPHealth(&cfg.Addr, "/live")) // -healthcheck (deploy/compose.yaml)
}
