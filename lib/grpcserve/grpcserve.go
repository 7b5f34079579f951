// Package grpcserve runs a Zest gRPC server the same way in every service: request ids, panic
// recovery, key checks, message size limits, gRPC health and reflection, and a shutdown that
// drains (health NOT_SERVING, GracefulStop, then a hard Stop when draining takes too long).
package grpcserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/requestid"
	"github.com/zestmcp/zest/lib/tracing"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// DefaultDrainTimeout bounds how long in-flight calls may finish after shutdown starts.
const DefaultDrainTimeout = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Guard checks the bearer key of every call except health and reflection, from the call's
	// headers, before its message is read (Tap).
	Guard keyauth.Guard
	// Logger receives lifecycle events and recovered panics; nil means slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds graceful shutdown; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// MaxMessageBytes bounds each message received or sent; 0 means
	// grpcdial.DefaultMaxMessageBytes. A larger message fails its own call only.
	MaxMessageBytes int
	// StreamWorkers is how many goroutines are kept to run calls; 0 means StreamWorkers, at
	// least 8 per CPU. A service whose calls are fewer at once keeps fewer (the tool host's
	// host.StreamWorkers): gRPC hands a call to the worker idle the longest, and a worker idle
	// through a garbage collection has had its stack halved and grows it again.
	StreamWorkers int
	// ServerOptions are added to the grpc.Server.
	ServerOptions []grpc.ServerOption
}

// Server is a grpc.Server with health and reflection registered.
type Server struct {
	GRPC     *grpc.Server
	Health   *health.Server
	opts     Options
	log      *slog.Logger
	draining chan struct{} // closed when shutdown starts
	// served are the methods registered when Serve began, the labels a refused call may
	// count under (a made-up method name counts as "unknown"); read-only once serving.
	served map[string]bool
}

// Draining is closed when shutdown starts, before the graceful stop waits for calls: a
// service ends its long-lived streams on it (a stream so ended is logged as expected).
func (s *Server) Draining() <-chan struct{} { return s.draining }

// StreamWorkers is the least number of goroutines kept to run calls unless
// Options.StreamWorkers says otherwise.
const StreamWorkers = 256

// New builds a Server. Register services on s.GRPC before Serve.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = grpcdial.DefaultMaxMessageBytes
	}
	if o.StreamWorkers <= 0 {
		o.StreamWorkers = max(StreamWorkers, 8*runtime.NumCPU())
	}
	rec := recoverer{log: o.Logger}
	tokensUnary, tokensStream := o.Guard.Interceptors()
	draining := make(chan struct{})
	fl := failures{log: o.Logger, draining: draining}
	s := &Server{opts: o, log: o.Logger, draining: draining}
	sopts := append([]grpc.ServerOption{
		// The key first, from the headers, before gRPC reads the message: a caller without
		// the key never has a request of up to MaxMessageBytes read and decoded for it.
		grpc.InTapHandle(s.tap(fl)),
		// Outermost first: the request id is known to everything after it, a panic anywhere
		// fails its own call, no status leaves with a message that is not UTF-8, and every
		// failed call is logged. Metrics (lib/metrics) come before the recoverer, so that a
		// panic counts as the INTERNAL its caller gets.
		// An access token Tap let through is verified last, before the handler.
		grpc.ChainUnaryInterceptor(requestid.UnaryServer, metrics.UnaryServer, rec.unary, fl.unary, tokensUnary),
		grpc.ChainStreamInterceptor(requestid.StreamServer, metrics.StreamServer, rec.stream, fl.stream, tokensStream),
		grpc.MaxRecvMsgSize(o.MaxMessageBytes),
		grpc.MaxSendMsgSize(o.MaxMessageBytes),
		// Reuse handler goroutines: a fresh goroutine per call spends ~10% of the CPU of a
		// small call growing its stack. gRPC starts a goroutine for a call when every worker
		// is busy, so this bounds nothing; an idle worker is a parked goroutine of a few KiB.
		grpc.NumStreamWorkers(uint32(o.StreamWorkers)),
		// Clients (lib/grpcdial) ping a silent connection every KeepaliveTime to find a
		// vanished peer; gRPC's default policy would close a connection pinged more often
		// than every 5 minutes.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcdial.KeepaliveTime / 2, PermitWithoutStream: true}),
	}, o.ServerOptions...)
	// A span per call, child of the caller's (W3C traceparent), when tracing is on: a stats
	// handler, so the span is in the context before the interceptors above run and every line
	// they log carries its trace id.
	sopts = append(sopts, tracing.ServerOptions()...)
	s.GRPC = grpc.NewServer(sopts...)
	s.Health = health.NewServer()
	healthpb.RegisterHealthServer(s.GRPC, s.Health)
	reflection.Register(s.GRPC)
	return s
}

// tap checks a call's key (Options.Guard) when its headers arrive. A refused call is logged
// as failures logs the others (with the request id its caller sent) and counted in
// metrics.GRPCRefused; it never reaches the interceptors or the handler.
func (s *Server) tap(fl failures) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		start := time.Now()
		ctx, err := s.opts.Guard.Tap(ctx, info)
		if err == nil {
			return ctx, nil
		}
		id := ""
		if v := info.Header.Get(requestid.MetadataKey); len(v) > 0 {
			id = v[0]
		}
		fl.logged(requestid.With(ctx, requestid.Ensure(id)), info.FullMethodName, err, start)
		service, method := "unknown", "unknown"
		if s.served[info.FullMethodName] {
			service, method = metrics.SplitMethod(info.FullMethodName)
		}
		metrics.GRPCRefused.WithLabelValues(service, method, status.Code(err).String()).Inc()
		return ctx, err
	}
}

// RegisterService registers impl for desc (so *Server is a grpc.ServiceRegistrar, and the
// services register on it directly).
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.GRPC.RegisterService(desc, impl)
}

// recoverer turns a panic in a handler into an INTERNAL status for that call alone, logged
// with its stack and an incident id that the status names, and makes every status message
// valid UTF-8 (a child's stderr line may not be).
type recoverer struct{ log *slog.Logger }

func (r recoverer) recovered(ctx context.Context, method string, p any) error {
	incident := requestid.New()
	r.log.ErrorContext(ctx, "handler panicked", "method", method, "incident", incident, "panic", p, "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "internal error (incident %s): an administrator can find it in the service's log", incident)
}

func (r recoverer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, r.recovered(ctx, info.FullMethod, p)
		}
		err = validUTF8(err)
	}()
	return h(ctx, req)
}

func (r recoverer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.recovered(ss.Context(), info.FullMethod, p)
		}
		err = validUTF8(err)
	}()
	return h(srv, ss)
}

// failures logs each call that fails, with its request id (from the context), so that an
// operator can find, in this service's log, the call behind an error a client reported with
// its X-Request-Id. Refusals a caller can fix (a bad argument, an unknown id, a wrong key) and
// streams a shutdown ends (UNAVAILABLE once draining is closed) are logged at info, failures of
// the service at warn; a call the caller cancelled is not logged.
type failures struct {
	log      *slog.Logger
	draining <-chan struct{}
}

func (f failures) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	f.logged(ctx, info.FullMethod, err, start)
	return resp, err
}

func (f failures) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	f.logged(ss.Context(), info.FullMethod, err, start)
	return err
}

func (f failures) logged(ctx context.Context, method string, err error, start time.Time) {
	if err == nil {
		return
	}
	st := status.Convert(err)
	level := slog.LevelWarn
	switch st.Code() {
	case codes.Canceled:
		return
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.OutOfRange,
		codes.Unauthenticated, codes.PermissionDenied, codes.ResourceExhausted:
		level = slog.LevelInfo
	case codes.Unavailable:
		select {
		case <-f.draining:
			level = slog.LevelInfo
		default:
		}
	}
	f.log.LogAttrs(ctx, level, "rpc failed", slog.String("method", method), slog.String("code", st.Code().String()),
		slog.String("err", st.Message()), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
}

// validUTF8 rebuilds a status whose message is not valid UTF-8.
func validUTF8(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(codes.Unknown, err.Error())
	}
	if utf8.ValidString(st.Message()) {
		return err
	}
	p := st.Proto()
	p.Message = strings.ToValidUTF8(p.Message, "\uFFFD")
	return status.ErrorProto(p)
}

// Serve serves on lis until ctx is done, then drains and returns. Every registered service
// reports SERVING while it runs.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.served = map[string]bool{}
	for name, info := range s.GRPC.GetServiceInfo() {
		s.Health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
		for _, m := range info.Methods {
			s.served["/"+name+"/"+m.Name] = true
		}
	}
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	metrics.InitializeServer(s.GRPC)
	errc := make(chan error, 1)
	go func() { errc <- s.GRPC.Serve(lis) }()
	s.log.Info("grpc serving", "addr", lis.Addr().String(), "max_message_bytes", s.opts.MaxMessageBytes)

	select {
	case err := <-errc:
		if errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	s.log.Info("grpc draining", "timeout", s.opts.DrainTimeout.String())
	close(s.draining)
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opts.DrainTimeout):
		s.log.Warn("grpc drain timed out; stopping hard")
		s.GRPC.Stop()
		<-done
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	s.log.Info("grpc stopped")
	return nil
}
