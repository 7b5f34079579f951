// Package service is the common frame of every Zest binary: one Config parsed from flags and
// environment variables of the same name, one slog logger, one root context cancelled by
// SIGINT or SIGTERM.
package service

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/logging"
)

// EnvPprofAddr, when set (e.g. 127.0.0.1:6060), serves Go's profiler at /debug/pprof/ on that
// address. For diagnosis only: it has no authentication, so keep it on loopback.
const EnvPprofAddr = "ZEST_PPROF_ADDR"

func servePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		log.Warn("profiler listening (no authentication)", "addr", addr)
		if err := srv.ListenAndServe(); err != nil {
			log.Error("profiler stopped", "err", err)
		}
	}()
}

// Common holds the settings every service shares.
type Common struct {
	LogLevel     string
	LogFormat    string
	DrainTimeout time.Duration
}

// DefaultCommon returns the shared defaults.
func DefaultCommon() Common {
	return Common{LogLevel: "info", LogFormat: "text", DrainTimeout: grpcserve.DefaultDrainTimeout}
}

// RegisterFlags adds the shared flags.
func (c *Common) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: text or json")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "how long in-flight requests may finish on shutdown")
}

// Config is what a service's own Config offers to Main.
type Config interface {
	RegisterFlags(fs *flag.FlagSet)
	Validate() error
	Shared() *Common
}

// Main parses cfg from os.Args and the environment, then runs run until SIGINT or SIGTERM.
// It exits the process with status 2 on bad configuration and 1 when run fails.
func Main(name string, cfg Config, run func(ctx context.Context, log *slog.Logger) error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	cfg.RegisterFlags(fs)
	fs.Usage = envflag.Usage(fs)
	if err := envflag.Parse(fs, os.Args[1:], nil); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration: %v\n", name, err)
		os.Exit(2)
	}
	c := cfg.Shared()
	log, err := logging.New(os.Stderr, name, c.LogLevel, c.LogFormat)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if addr := os.Getenv(EnvPprofAddr); addr != "" {
		servePprof(addr, log)
	}
	if err := run(ctx, log); err != nil {
		log.Error("service failed", "err", err)
		stop()
		os.Exit(1)
	}
	log.Info("service stopped")
}
