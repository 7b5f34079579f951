package metrics_test

import (
	"context"
	"testing"

	"github.com/zestmcp/zest/lib/metrics"
	"google.golang.org/grpc"
)

const benchMethod = "/zest.test.v1.BenchService/Call"

var benchInfo = &grpc.UnaryServerInfo{FullMethod: benchMethod}

func unaryServerCall(b testing.TB) {
	_, err := metrics.UnaryServer(context.Background(), nil, benchInfo,
		func(context.Context, any) (any, error) { return nil, nil })
	if err != nil {
		b.Fatal(err)
	}
}

func unaryClientCall(b testing.TB) {
	err := metrics.UnaryClient(context.Background(), benchMethod, nil, nil, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
}

// TestGRPCMetricsDoNotAllocate: counting a unary call, on either side, allocates nothing once
// its method has been seen (go-grpc-middleware's interceptors allocated ~10 times a call: a
// reporter and the label slices of each series looked up).
func TestGRPCMetricsDoNotAllocate(t *testing.T) {
	unaryServerCall(t)
	unaryClientCall(t)
	if n := testing.AllocsPerRun(100, func() { unaryServerCall(t) }); n != 0 {
		t.Errorf("a unary call counted by the server allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { unaryClientCall(t) }); n != 0 {
		t.Errorf("a unary call counted by the client allocates %v times", n)
	}
}

// BenchmarkGRPCMetrics measures counting one unary call, server and client side (the handler
// and the invoker do nothing).
func BenchmarkGRPCMetrics(b *testing.B) {
	b.Run("server", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			unaryServerCall(b)
		}
	})
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			unaryClientCall(b)
		}
	})
}
