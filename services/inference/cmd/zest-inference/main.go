// Command zest-inference serves models over gRPC (InferenceService).
package main

import (
	"context"
	"log/slog"

	"github.com/zestmcp/zest/lib/service"
	"github.com/zestmcp/zest/services/inference/node"
)

func main() {
	cfg := node.DefaultConfig()
	service.Main("zest-inference", &cfg, func(ctx context.Context, log *slog.Logger) error {
		return node.New(cfg, log).Run(ctx)
	})
}
