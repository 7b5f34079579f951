// Command zest-inference serves models over gRPC (InferenceService).
package main

import (
	"context"
	"log/slog"

	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/service"
	"github.com/zestmcp/zest/services/inference/node"
)

func main() {
	cfg := node.DefaultConfig()
	service.Main("zest-inference", &cfg, func(ctx context.Context, log *slog.Logger) error {
		// Metrics on their own port, stopped with ctx (lib/metrics).
		if _, err := metrics.Start(ctx, cfg.MetricsAddr, log); err != nil {
			return err
		}
		n, err := node.New(cfg, log)
		if err != nil {
			return err
		}
		return n.Run(ctx)
	}, service.GRPCHealth(&cfg.Addr)) // -healthcheck (deploy/compose.yaml)
}
