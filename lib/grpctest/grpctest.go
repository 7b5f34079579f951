// Package grpctest starts gRPC servers for tests: on 127.0.0.1, stopped and closed when the
// test ends.
package grpctest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Loopback serves a gRPC server with opts, whose services register adds, on a free loopback
// port, and returns a plaintext client connection to it.
func Loopback(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+Listen(t, register, opts...), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Listen serves a gRPC server with opts, whose services register adds, on a free loopback
// port, and returns its address (for code under test that dials an address itself).
func Listen(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	g := grpc.NewServer(opts...)
	register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}
