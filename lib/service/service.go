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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/healthcheck"
	"github.com/zestmcp/zest/lib/listen"
	"github.com/zestmcp/zest/lib/logging"
	"github.com/zestmcp/zest/lib/tracing"
)

// GCPercent is the Go garbage collector's target that a Zest service runs with unless GOGC
// is set in its environment (Common.GCPercent; the tool host keeps Go's 100 to stay small).
// Go's default collects whenever the heap doubles; the edge's and mcpgateway's live heaps are a
// few MB, so collecting at 5× costs ~10 MB more per process and gave the tool-call chain
// ~30% more calls/s (docs/dev/benchmarks.md, "Tuning"). GOGC=100 restores Go's default; GOMEMLIMIT caps
// the heap.
const GCPercent = 400

// tuneGC applies percent unless the operator chose with GOGC.
func tuneGC(percent int) {
	if _, set := os.LookupEnv("GOGC"); !set && percent > 0 {
		debug.SetGCPercent(percent)
	}
}

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
	// GCPercent is the GC target used when GOGC is not set (not a flag: GOGC is the knob).
	GCPercent int
	// PprofAddr, when set (e.g. 127.0.0.1:6060), serves Go's profiler at /debug/pprof/ on that
	// address (ZEST_PPROF_ADDR). For diagnosis only: it has no authentication, so an address
	// that is not loopback is refused unless PprofPublic (ZEST_PPROF_PUBLIC) says so.
	PprofAddr   string
	PprofPublic bool
	// MetricsPublic (ZEST_METRICS_PUBLIC) lets the service's metrics address (each service's
	// own setting, checked by metrics.ValidateAddr) be other than loopback: metrics have no
	// authentication, and a scraper on another machine is a choice the operator makes.
	MetricsPublic bool
	// GRPCMaxMessageBytes bounds every gRPC message a service sends or receives, as server and
	// as client (ZEST_GRPC_MAX_MESSAGE_BYTES); set the same value on every service.
	GRPCMaxMessageBytes int
}

// DefaultCommon returns the shared defaults.
func DefaultCommon() Common {
	return Common{LogLevel: "info", LogFormat: "text", DrainTimeout: grpcserve.DefaultDrainTimeout, GCPercent: GCPercent,
		GRPCMaxMessageBytes: grpcdial.DefaultMaxMessageBytes}
}

// RegisterFlags adds the shared flags.
func (c *Common) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: text or json")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "how long in-flight requests may finish on shutdown")
	fs.StringVar(&c.PprofAddr, "pprof-addr", c.PprofAddr, "serve Go's profiler at /debug/pprof/ on this address (no authentication: loopback only, unless pprof-public)")
	fs.BoolVar(&c.PprofPublic, "pprof-public", c.PprofPublic, "let pprof-addr be an address other than loopback (the profiler has no authentication)")
	fs.BoolVar(&c.MetricsPublic, "metrics-public", c.MetricsPublic, "let the metrics address be other than loopback (metrics have no authentication), for a scraper on another machine")
	fs.IntVar(&c.GRPCMaxMessageBytes, "grpc-max-message-bytes", c.GRPCMaxMessageBytes, "largest gRPC message sent or received between services (set the same on every service)")
}

// ValidateCommon checks the shared settings.
func (c *Common) ValidateCommon() error {
	if c.GRPCMaxMessageBytes < 4<<20 {
		return fmt.Errorf("grpc-max-message-bytes %d: want at least 4194304 (4 MiB)", c.GRPCMaxMessageBytes)
	}
	if c.DrainTimeout <= 0 {
		return fmt.Errorf("drain-timeout %v: want more than 0", c.DrainTimeout)
	}
	if c.PprofAddr == "" {
		return nil
	}
	return listen.ValidateUnauthenticated("pprof-addr", c.PprofAddr, "pprof-public", c.PprofPublic,
		"the profiler has no authentication and shows the process's memory")
}

// Config is what a service's own Config offers to Main.
type Config interface {
	RegisterFlags(fs *flag.FlagSet)
	Validate() error
	Shared() *Common
}

// Main parses cfg from os.Args and the environment, then runs run until SIGINT or SIGTERM.
// It exits the process with status 2 on bad configuration and 1 when run fails. With
// -version it prints the version; with -healthcheck (given an Option such as GRPCHealth) it
// probes the service this configuration would start and exits 0 when healthy, 1 when not.
func Main(name string, cfg Config, run func(ctx context.Context, log *slog.Logger) error, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	args, health, version := modes(os.Args[1:])
	if version {
		fmt.Println(name, VersionString())
		os.Exit(0)
	}
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	cfg.RegisterFlags(fs)
	usage := envflag.Usage(fs)
	fs.Usage = func() { usage(); fmt.Fprint(fs.Output(), modesUsage) }
	if err := envflag.Parse(fs, args, nil); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration: %v\n", name, err)
		os.Exit(2)
	}
	if health {
		if o.health == nil {
			fmt.Fprintf(os.Stderr, "%s: -healthcheck: this binary has no health check\n", name)
			os.Exit(2)
		}
		os.Exit(healthcheck.Run(name, os.Stdout, healthcheck.Timeout, o.health))
	}
	c := cfg.Shared()
	log, err := logging.New(os.Stderr, name, c.LogLevel, c.LogFormat)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if err := nonDumpable(); err != nil {
		log.Warn("cannot make the process non-dumpable: other processes of its user may read its environment and memory", "err", err)
	}
	// Tracing (OTEL_* variables, off unless asked for) before run builds its gRPC servers and
	// clients, which trace only when it is on; stopTracing flushes within a bounded time.
	stopTracing, err := tracing.Setup(name, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration: %v\n", name, err)
		os.Exit(2)
	}
	defer stopTracing()
	tuneGC(c.GCPercent)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.PprofAddr != "" {
		servePprof(c.PprofAddr, log)
	}
	if err := run(ctx, log); err != nil {
		log.Error("service failed", "err", err)
		stop()
		stopTracing()
		os.Exit(1) //nolint:gocritic // the deferred calls are made just above, in their order
	}
	log.Info("service stopped")
}
