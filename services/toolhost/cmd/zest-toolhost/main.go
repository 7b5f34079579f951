// Command zest-toolhost runs the stdio MCP servers an admin registers, on the tool machine.
// Run with --zest-shim it is the small per-server shim of package shim; with --zest-sandbox
// and --zest-landlock, the outer and inner steps of package sandbox; with --zest-proxy-forward,
// the sandbox's forwarder to its filtering proxy.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"syscall"

	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/service"
	"github.com/zestmcp/zest/services/toolhost/host"
	"github.com/zestmcp/zest/services/toolhost/sandbox"
	"github.com/zestmcp/zest/services/toolhost/shim"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == shim.Flag {
		os.Exit(shim.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.Flag { // outside the sandbox, before bwrap
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.InnerFlag { // inside bwrap, before the server
		os.Exit(sandbox.InnerMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.ForwardFlag { // inside bwrap, network "proxy"
		os.Exit(sandbox.ForwardMain(os.Args[2:]))
	}
	// Before anything reads the environment: the tool host must not hold Lemonade's keys.
	if err := host.DropLemonadeKeys(syscall.Exec); err != nil {
		fmt.Fprintln(os.Stderr, "zest-toolhost:", err)
		os.Exit(2)
	}
	cfg := host.DefaultConfig()
	service.Main("zest-toolhost", &cfg, func(ctx context.Context, log *slog.Logger) error {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.ShimPath = exe // also the sandbox's steps
		// Metrics on their own port, stopped with ctx (lib/metrics).
		if _, err := metrics.Start(ctx, cfg.MetricsAddr, log); err != nil {
			return err
		}
		if cfg.Procs > 0 && os.Getenv("GOMAXPROCS") == "" {
			runtime.GOMAXPROCS(cfg.Procs)
		}
		return host.New(cfg, log).Run(ctx)
	}, service.GRPCHealth(&cfg.Addr)) // -healthcheck (deploy/compose.yaml)
}
