package metrics

import (
	"context"
	"strings"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// LatencyBuckets are the latency histograms' buckets in seconds: from a cached catalog read
// (~0.1 ms) to a model's long answer or a slow tool (minutes).
var LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

var (
	// GRPCServer counts the calls a service handles: grpc_server_started_total,
	// grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code},
	// grpc_server_msg_{received,sent}_total and grpc_server_handling_seconds. Labels are bounded
	// by the registered methods: gRPC answers an unknown method before any interceptor.
	GRPCServer = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(LatencyBuckets)))
	// GRPCClient counts the calls a service makes to another (grpc_client_*).
	GRPCClient = grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(grpcprom.WithHistogramBuckets(LatencyBuckets)))
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
	Registry.MustRegister(GRPCServer, GRPCClient, GRPCInFlight, GRPCRefused)
}

// UnaryServer and StreamServer count every call a server handles and keep it in flight while
// it runs (grpcserve chains them).
var (
	UnaryServer  = chainUnary(inFlightUnary, GRPCServer.UnaryServerInterceptor())
	StreamServer = chainStream(inFlightStream, GRPCServer.StreamServerInterceptor())
)

// UnaryClient and StreamClient count every call a service makes (grpcdial chains them).
var (
	UnaryClient  = GRPCClient.UnaryClientInterceptor()
	StreamClient = GRPCClient.StreamClientInterceptor()
)

// InitializeServer creates the series of every method registered on g at zero, so that a rate
// or an absent call reads 0 instead of nothing (grpcserve calls it before serving).
func InitializeServer(g *grpc.Server) { GRPCServer.InitializeMetrics(g) }

func chainUnary(outer, inner grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return outer(ctx, req, info, func(ctx context.Context, req any) (any, error) { return inner(ctx, req, info, h) })
	}
}

func chainStream(outer, inner grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return outer(srv, ss, info, func(srv any, ss grpc.ServerStream) error { return inner(srv, ss, info, h) })
	}
}

// SplitMethod splits a full method name ("/pkg.Service/Method") into its service and method.
func SplitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", full
}

func inFlightUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	g := GRPCInFlight.WithLabelValues(SplitMethod(info.FullMethod))
	g.Inc()
	defer g.Dec()
	return h(ctx, req)
}

func inFlightStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	g := GRPCInFlight.WithLabelValues(SplitMethod(info.FullMethod))
	g.Inc()
	defer g.Dec()
	return h(srv, ss)
}
