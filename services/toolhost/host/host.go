// Package host is the tool host service as a library. In this build it serves gRPC health
// and reflection on its address; the ToolHostService API (supervised stdio MCP servers) is
// not registered yet, so its calls answer Unimplemented.
package host

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/service"
)

// Config is the tool host's configuration; flag names map to ZEST_* variables.
type Config struct {
	service.Common
	// Addr is the gRPC listen address (ZEST_TOOLHOST_ADDR).
	Addr string
	// Keys guard the gRPC API.
	Keys keyauth.Keys
}

// DefaultConfig binds loopback only.
func DefaultConfig() Config {
	return Config{Common: service.DefaultCommon(), Addr: "127.0.0.1:13312", Keys: keyauth.FromEnv(nil)}
}

// RegisterFlags adds the tool host's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Common.RegisterFlags(fs)
	fs.StringVar(&c.Addr, "toolhost-addr", c.Addr, "gRPC listen address of the tool host")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("toolhost-addr %q: want host:port, e.g. 127.0.0.1:13312", c.Addr)
	}
	return nil
}

// Shared returns the common settings.
func (c *Config) Shared() *service.Common { return &c.Common }

// Host is the tool host service.
type Host struct {
	cfg Config
	srv *grpcserve.Server
}

// New builds the tool host; log nil means slog.Default().
func New(cfg Config, log *slog.Logger) *Host {
	return &Host{cfg: cfg, srv: grpcserve.New(grpcserve.Options{Guard: keyauth.Guard{Keys: cfg.Keys}, Logger: log, DrainTimeout: cfg.DrainTimeout})}
}

// Run listens on cfg.Addr and serves until ctx is done.
func (h *Host) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", h.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", h.cfg.Addr, err)
	}
	return h.srv.Serve(ctx, lis)
}
