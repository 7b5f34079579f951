// Package grpctest starts gRPC servers for tests: on 127.0.0.1, stopped and closed when the
// test ends; and counts the stream workers a server keeps (WorkersStartedBy).
package grpctest

import (
	"net"
	"runtime"
	"strconv"
	"strings"
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

// WorkersStartedBy counts the goroutines gRPC keeps to run calls (grpc.NumStreamWorkers) of
// the servers that goroutine made: start a server in a goroutine of the test's own and pass
// its GoroutineID.
func WorkersStartedBy(goroutine uint64) int {
	buf := make([]byte, 1<<22)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "created by google.golang.org/grpc.(*Server).initServerWorkers in goroutine "+strconv.FormatUint(goroutine, 10)+"\n")
}

// GoroutineID is the id of the calling goroutine, as stack traces name it.
func GoroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf)) // "goroutine 7 [running]:"
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}
