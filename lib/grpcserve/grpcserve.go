// Package grpcserve runs a Zest gRPC server the same way in every service: key checks,
// gRPC health and reflection, and a shutdown that drains (health NOT_SERVING, GracefulStop,
// then a hard Stop when draining takes too long).
package grpcserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/rpcmux"
	"github.com/zestmcp/zest/lib/workpool"
	rpcmuxv1 "github.com/zestmcp/zest/proto/gen/zest/rpcmux/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// DefaultDrainTimeout bounds how long in-flight calls may finish after shutdown starts.
const DefaultDrainTimeout = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Guard checks the bearer key of every call except health and reflection.
	Guard keyauth.Guard
	// Logger receives lifecycle events; nil means slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds graceful shutdown; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// ServerOptions are added to the grpc.Server.
	ServerOptions []grpc.ServerOption
}

// Server is a grpc.Server with health, reflection and the unary-call pipe (lib/rpcmux)
// registered.
type Server struct {
	GRPC   *grpc.Server
	Health *health.Server
	Mux    *rpcmux.Server
	// Pool runs the calls that arrive on multiplexed streams (this server's pipes, and a
	// service's own, such as mcpgateway's PipeService and the tool host's Pipe).
	Pool *workpool.Pool
	opts Options
	// draining is closed when shutdown starts, before the graceful stop: long-lived streams
	// (pipes) end once their calls in flight have answered.
	draining chan struct{}
	log      *slog.Logger
}

// StreamWorkers is the least number of goroutines kept to run calls.
const StreamWorkers = 256

// New builds a Server. Register services on s.GRPC before Serve.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	// The pipe opens without a key: each call on it is checked by the same Unary guard.
	perCall := o.Guard.PerCall
	o.Guard.PerCall = func(m string) bool { return m == rpcmux.PipeMethod || (perCall != nil && perCall(m)) }
	sopts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(o.Guard.Unary),
		grpc.ChainStreamInterceptor(o.Guard.Stream),
		// Reuse handler goroutines: a fresh goroutine per call spends ~10% of the CPU of a
		// small call growing its stack (measured on the tool host's echo benchmark and on
		// mcpgateway's tool calls). gRPC starts a goroutine for a call when every worker is
		// busy, and calls that wait on an MCP server keep workers busy, so there are enough
		// for the concurrency the benchmarks run (64) with room to spare; an idle worker is
		// a parked goroutine of a few KiB.
		grpc.NumStreamWorkers(uint32(max(StreamWorkers, 8*runtime.NumCPU()))),
	}, o.ServerOptions...)
	g := grpc.NewServer(sopts...)
	h := health.NewServer()
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	pool := workpool.New(StreamWorkers)
	draining := make(chan struct{})
	mux := rpcmux.NewServer(o.Guard.Unary, pool, draining)
	rpcmuxv1.RegisterRpcMuxServiceServer(g, mux)
	return &Server{GRPC: g, Health: h, Mux: mux, Pool: pool, opts: o, log: o.Logger, draining: draining}
}

// Draining is closed when shutdown starts; a service's own long-lived streams end on it.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// RegisterService registers impl for desc as an ordinary gRPC service and makes its unary
// methods callable through the pipe too.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.GRPC.RegisterService(desc, impl)
	s.Mux.Register(desc, impl)
}

// Serve serves on lis until ctx is done, then drains and returns. Every registered service
// reports SERVING while it runs.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	for name := range s.GRPC.GetServiceInfo() {
		s.Health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	errc := make(chan error, 1)
	go func() { errc <- s.GRPC.Serve(lis) }()
	s.log.Info("grpc serving", "addr", lis.Addr().String())

	select {
	case err := <-errc:
		if errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	s.log.Info("grpc draining", "timeout", s.opts.DrainTimeout.String())
	s.Health.Shutdown()
	close(s.draining)
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opts.DrainTimeout):
		s.log.Warn("grpc drain timed out; stopping hard")
		s.GRPC.Stop()
		<-done
	}
	<-errc
	s.log.Info("grpc stopped")
	return nil
}
