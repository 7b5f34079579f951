// Command zest-toolhost runs the stdio MCP servers an admin registers, on the tool machine.
package main

import (
	"context"
	"log/slog"

	"github.com/zestmcp/zest/lib/service"
	"github.com/zestmcp/zest/services/toolhost/host"
)

func main() {
	cfg := host.DefaultConfig()
	service.Main("zest-toolhost", &cfg, func(ctx context.Context, log *slog.Logger) error {
		return host.New(cfg, log).Run(ctx)
	})
}
