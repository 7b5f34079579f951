package metrics

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// LatencyBuckets are the latency histograms' buckets in seconds: from a cached catalog read
// (~0.1 ms) to a model's long answer or a slow tool (minutes).
var LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

var (
	// GRPCServer counts the calls a service handles: grpc_server_started_total,
	// grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code},
	// grpc_server_msg_{received,sent}_total and grpc_server_handling_seconds, with
	// go-grpc-middleware's names, labels and semantics (TestGRPCMetricsAsGoGRPCMiddleware holds
	// them). Labels are bounded by the registered methods: gRPC answers an unknown method
	// before any interceptor.
	GRPCServer = newGRPCMetrics("server", grpcHelp{
		started:  "Total number of RPCs started on the server.",
		handled:  "Total number of RPCs completed on the server, regardless of success or failure.",
		received: "Total number of RPC stream messages received on the server.",
		sent:     "Total number of gRPC stream messages sent by the server.",
		handling: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
	})
	// GRPCClient counts the calls a service makes to another (grpc_client_*).
	GRPCClient = newGRPCMetrics("client", grpcHelp{
		started:  "Total number of RPCs started on the client.",
		handled:  "Total number of RPCs completed by the client, regardless of success or failure.",
		received: "Total number of RPC stream messages received by the client.",
		sent:     "Total number of gRPC stream messages sent by the client.",
		handling: "Histogram of response latency (seconds) of the gRPC until it is finished by the application.",
	})
	// GRPCInFlight is the calls being handled now, per method (a stream counts until it ends).
	GRPCInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "grpc_server_in_flight",
		Help: "gRPC calls being handled now (a stream counts until it ends)."}, []string{"grpc_service", "grpc_method"})
	// GRPCRefused counts the calls refused from their headers, before their message was read
	// (a missing or wrong key: grpcserve's tap), which the interceptors above never see; a
	// method the server does not serve counts as "unknown", so callers cannot add labels.
	GRPCRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "grpc_server_refused_total",
		Help: "gRPC calls refused before their message was read (a missing or wrong key), per method and code."},
		[]string{"grpc_service", "grpc_method", "grpc_code"})
)

func init() {
	GRPCServer.inFlight = GRPCInFlight
	Registry.MustRegister(GRPCServer, GRPCClient, GRPCInFlight, GRPCRefused)
}

// UnaryServer and StreamServer count every call a server handles and keep it in flight while
// it runs (grpcserve chains them).
var (
	UnaryServer  = GRPCServer.unaryServer()
	StreamServer = GRPCServer.streamServer()
)

// UnaryClient and StreamClient count every call a service makes (grpcdial chains them).
var (
	UnaryClient  = GRPCClient.unaryClient()
	StreamClient = GRPCClient.streamClient()
)

// InitializeServer creates the series of every method registered on g at zero, so that a rate
// or an absent call reads 0 instead of nothing (grpcserve calls it before serving).
func InitializeServer(g *grpc.Server) { GRPCServer.initialize(g) }

// SplitMethod splits a full method name ("/pkg.Service/Method") into its service and method.
func SplitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", full
}

// The grpc_type label's values.
const (
	typeUnary        = "unary"
	typeClientStream = "client_stream"
	typeServerStream = "server_stream"
	typeBidiStream   = "bidi_stream"
)

// allCodes are the codes whose handled series InitializeServer creates at zero, in
// go-grpc-middleware's order: 0 … codes.Unauthenticated (16), each indexing methodSeries.handled.
var allCodes = []codes.Code{
	codes.OK, codes.Canceled, codes.Unknown, codes.InvalidArgument, codes.DeadlineExceeded, codes.NotFound,
	codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted,
	codes.FailedPrecondition, codes.Aborted, codes.OutOfRange, codes.Unimplemented, codes.Internal,
	codes.Unavailable, codes.DataLoss,
}

// grpcMetrics is one side's (server or client) series. A call used to look every series up by
// its labels (hashing them, and allocating the label slices) on each message; the series of
// a method and type are now resolved once, at their first use, and kept in methods: a call
// then only increments. A series is still created at its first use, never before, so what a
// scrape shows is what go-grpc-middleware showed.
type grpcMetrics struct {
	help                             grpcHelp
	started, handled, received, sent *prometheus.CounterVec
	handling                         *prometheus.HistogramVec
	inFlight                         *prometheus.GaugeVec // the server's; nil on the client
	methods                          sync.Map             // methodKey → *methodSeries
}

type methodKey struct{ typ, fullMethod string }

// methodSeries is one method's series, each resolved at its first use.
type methodSeries struct {
	m                    *grpcMetrics
	typ, service, method string
	inFlight             lazy[prometheus.Gauge]
	started, recv, sent  lazy[prometheus.Counter]
	handling             lazy[prometheus.Observer]
	handled              [codes.Unauthenticated + 1]lazy[prometheus.Counter] // by code, codes.OK (0) … codes.Unauthenticated (16)
}

// lazy is a series resolved once; a race resolves it twice, to the same child.
type lazy[T any] struct{ p atomic.Pointer[T] }

func (l *lazy[T]) get(resolve func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := resolve()
	l.p.Store(&v)
	return v
}

// grpcHelp is the help of one side's metrics, go-grpc-middleware's words.
type grpcHelp struct{ started, handled, received, sent, handling string }

func newGRPCMetrics(side string, help grpcHelp) *grpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_" + side + "_" + name, Help: help}, labels)
	}
	return &grpcMetrics{
		help:     help,
		started:  counter("started_total", help.started, labels),
		handled:  counter("handled_total", help.handled, append(labels[:3:3], "grpc_code")),
		received: counter("msg_received_total", help.received, labels),
		sent:     counter("msg_sent_total", help.sent, labels),
		handling: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "grpc_" + side + "_handling_seconds", Help: help.handling, Buckets: LatencyBuckets}, labels),
	}
}

// Describe and Collect make grpcMetrics one prometheus.Collector.
func (g *grpcMetrics) Describe(ch chan<- *prometheus.Desc) {
	g.started.Describe(ch)
	g.handled.Describe(ch)
	g.received.Describe(ch)
	g.sent.Describe(ch)
	g.handling.Describe(ch)
}

func (g *grpcMetrics) Collect(ch chan<- prometheus.Metric) {
	g.started.Collect(ch)
	g.handled.Collect(ch)
	g.received.Collect(ch)
	g.sent.Collect(ch)
	g.handling.Collect(ch)
}

// series returns the series of fullMethod called as typ.
func (g *grpcMetrics) series(typ, fullMethod string) *methodSeries {
	k := methodKey{typ, fullMethod}
	if s, ok := g.methods.Load(k); ok {
		return s.(*methodSeries)
	}
	s := &methodSeries{m: g, typ: typ}
	s.service, s.method = splitMiddleware(fullMethod)
	got, _ := g.methods.LoadOrStore(k, s)
	return got.(*methodSeries)
}

// splitMiddleware splits a full method name as go-grpc-middleware's labels did: at its first
// "/" (SplitMethod, which zest_* metrics use, splits at the last).
func splitMiddleware(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.IndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", "unknown"
}

// gauge is the server's calls in flight of the method.
func (s *methodSeries) gauge(fullMethod string) prometheus.Gauge {
	return s.inFlight.get(func() prometheus.Gauge { return s.m.inFlight.WithLabelValues(SplitMethod(fullMethod)) })
}

func (s *methodSeries) incStarted() {
	s.started.get(func() prometheus.Counter { return s.m.started.WithLabelValues(s.typ, s.service, s.method) }).Inc()
}

func (s *methodSeries) incReceived() {
	s.recv.get(func() prometheus.Counter { return s.m.received.WithLabelValues(s.typ, s.service, s.method) }).Inc()
}

func (s *methodSeries) incSent() {
	s.sent.get(func() prometheus.Counter { return s.m.sent.WithLabelValues(s.typ, s.service, s.method) }).Inc()
}

// done counts a call's end: its code (a context error as the gRPC server reports it) and how
// long it took.
func (s *methodSeries) done(err error, start time.Time) {
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	code := st.Code()
	resolve := func() prometheus.Counter {
		return s.m.handled.WithLabelValues(s.typ, s.service, s.method, code.String())
	}
	if int(code) < len(s.handled) {
		s.handled[code].get(resolve).Inc()
	} else {
		resolve().Inc()
	}
	s.handling.get(func() prometheus.Observer { return s.m.handling.WithLabelValues(s.typ, s.service, s.method) }).Observe(time.Since(start).Seconds())
}

// initialize creates every series of g's methods (each code of handled) at zero.
func (g *grpcMetrics) initialize(srv *grpc.Server) {
	for service, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			typ := streamType(m.IsClientStream, m.IsServerStream)
			if !m.IsClientStream && !m.IsServerStream {
				typ = typeUnary
			}
			s := g.series(typ, "/"+service+"/"+m.Name)
			s.started.get(func() prometheus.Counter { return g.started.WithLabelValues(typ, service, m.Name) })
			s.recv.get(func() prometheus.Counter { return g.received.WithLabelValues(typ, service, m.Name) })
			s.sent.get(func() prometheus.Counter { return g.sent.WithLabelValues(typ, service, m.Name) })
			s.handling.get(func() prometheus.Observer { return g.handling.WithLabelValues(typ, service, m.Name) })
			for _, c := range allCodes {
				s.handled[c].get(func() prometheus.Counter { return g.handled.WithLabelValues(typ, service, m.Name, c.String()) })
			}
		}
	}
}

// streamType is a streaming method's grpc_type.
func streamType(clientStreams, serverStreams bool) string {
	switch {
	case clientStreams && !serverStreams:
		return typeClientStream
	case !clientStreams && serverStreams:
		return typeServerStream
	}
	return typeBidiStream
}

func (g *grpcMetrics) unaryServer() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		s := g.series(typeUnary, info.FullMethod)
		inFlight := s.gauge(info.FullMethod)
		inFlight.Inc()
		defer inFlight.Dec()
		s.incStarted()
		s.incReceived()
		resp, err := h(ctx, req)
		if err == nil {
			s.incSent()
		}
		s.done(err, start)
		return resp, err
	}
}

func (g *grpcMetrics) streamServer() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		s := g.series(streamType(info.IsClientStream, info.IsServerStream), info.FullMethod)
		inFlight := s.gauge(info.FullMethod)
		inFlight.Inc()
		defer inFlight.Dec()
		s.incStarted()
		err := h(srv, &countedServerStream{ServerStream: ss, s: s})
		s.done(err, start)
		return err
	}
}

// countedServerStream counts the messages a stream handler sends and receives.
type countedServerStream struct {
	grpc.ServerStream
	s *methodSeries
}

func (c *countedServerStream) SendMsg(m any) error {
	err := c.ServerStream.SendMsg(m)
	if err == nil {
		c.s.incSent()
	}
	return err
}

func (c *countedServerStream) RecvMsg(m any) error {
	err := c.ServerStream.RecvMsg(m)
	if err == nil {
		c.s.incReceived()
	}
	return err
}

func (g *grpcMetrics) unaryClient() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		s := g.series(typeUnary, method)
		s.incStarted()
		s.incSent()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			s.incReceived()
		}
		s.done(err, start)
		return err
	}
}

func (g *grpcMetrics) streamClient() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		start := time.Now()
		s := g.series(streamType(desc.ClientStreams, desc.ServerStreams), method)
		s.incStarted()
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			s.done(err, start)
			return nil, err
		}
		return &countedClientStream{ClientStream: cs, s: s, start: start, serverStreams: desc.ServerStreams}, nil
	}
}

// countedClientStream counts the messages of a client's stream, and the call's end at the
// first failed receive (io.EOF is OK when the server streams), as go-grpc-middleware did.
type countedClientStream struct {
	grpc.ClientStream
	s             *methodSeries
	start         time.Time
	serverStreams bool
}

func (c *countedClientStream) SendMsg(m any) error {
	err := c.ClientStream.SendMsg(m)
	if err == nil {
		c.s.incSent()
	}
	return err
}

func (c *countedClientStream) RecvMsg(m any) error {
	err := c.ClientStream.RecvMsg(m)
	if err == nil {
		c.s.incReceived()
		if c.serverStreams {
			return nil
		}
	}
	end := err
	if c.serverStreams && errors.Is(err, io.EOF) {
		end = nil
	}
	c.s.done(end, c.start)
	return err
}
