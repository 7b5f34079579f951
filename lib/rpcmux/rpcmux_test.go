package rpcmux

import (
	"context"
	"fmt"
	"github.com/zestmcp/zest/lib/grpctest"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/workpool"
	rpcmuxv1 "github.com/zestmcp/zest/proto/gen/zest/rpcmux/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// blocker is a one-method service that waits for its context and reports why it ended.
type blocker struct{ started, ended chan error }

var blockerDesc = grpc.ServiceDesc{
	ServiceName: "test.Blocker",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Block", Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		req := new(emptypb.Empty)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) {
			srv.(*blocker).started <- nil
			<-ctx.Done()
			srv.(*blocker).ended <- ctx.Err()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if in == nil {
			return h(ctx, req)
		}
		return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Blocker/Block"}, h)
	}}, {MethodName: "Now", Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		req := new(emptypb.Empty)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil }
		if in == nil {
			return h(ctx, req)
		}
		return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Blocker/Now"}, h)
	}}},
}

func start(t *testing.T, keys keyauth.Keys) (*grpc.ClientConn, *health.Server, *blocker) {
	t.Helper()
	guard := keyauth.Guard{Keys: keys, PerCall: func(m string) bool { return m == PipeMethod }}
	mux := NewServer(guard.Unary, workpool.New(8), nil)
	hs := health.NewServer()
	mux.Register(&healthpb.Health_ServiceDesc, hs)
	b := &blocker{started: make(chan error, 4), ended: make(chan error, 4)}
	mux.Register(&blockerDesc, b)
	cc := grpctest.Loopback(t, func(g *grpc.Server) { rpcmuxv1.RegisterRpcMuxServiceServer(g, mux) },
		grpc.ChainStreamInterceptor(guard.Stream))
	return cc, hs, b
}

// Many unary calls at once through one pipe each get their own answer, and a handler's error
// comes back as its status.
func TestConcurrentCallsAndStatuses(t *testing.T) {
	cc, hs, _ := start(t, keyauth.Keys{})
	for i := range 200 {
		st := healthpb.HealthCheckResponse_SERVING
		if i%2 == 1 {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		hs.SetServingStatus(fmt.Sprint("svc", i), st)
	}
	conn := NewConn(cc, "")
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: fmt.Sprint("svc", i)})
			want := healthpb.HealthCheckResponse_SERVING
			if i%2 == 1 {
				want = healthpb.HealthCheckResponse_NOT_SERVING
			}
			if err != nil || resp.GetStatus() != want {
				t.Errorf("svc%d: %v %v, want %v", i, resp.GetStatus(), err, want)
			}
		}()
	}
	wg.Wait()
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nobody"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v, want NotFound", err)
	}
	if err := conn.Invoke(context.Background(), "/no.Such/Method", &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
}

// Each call passes the same key check as an ordinary RPC: the connection's key, else the
// caller's own authorization metadata.
func TestCallsAreAuthorized(t *testing.T) {
	cc, _, _ := start(t, keyauth.Keys{API: "right"})
	withAuth := func(a string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", a)
	}
	for _, tc := range []struct {
		name string
		key  string
		ctx  context.Context
		want codes.Code
	}{
		{"connection key", "right", context.Background(), codes.OK},
		{"wrong connection key", "wrong", context.Background(), codes.Unauthenticated},
		{"caller's key", "", withAuth("Bearer right"), codes.OK},
		{"caller's wrong key", "", withAuth("Bearer wrong"), codes.Unauthenticated},
		{"no key", "", context.Background(), codes.Unauthenticated},
	} {
		conn := NewConn(cc, tc.key)
		err := conn.Invoke(tc.ctx, "/test.Blocker/Now", &emptypb.Empty{}, &emptypb.Empty{})
		conn.Close()
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// A caller's deadline reaches the handler's context, and a caller that gives up cancels the
// handler's context.
func TestDeadlineAndCancel(t *testing.T) {
	cc, _, b := start(t, keyauth.Keys{})
	conn := NewConn(cc, "")
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := conn.Invoke(ctx, "/test.Blocker/Block", &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("past the deadline: %v", err)
	}
	select {
	case err := <-b.ended:
		if err != context.DeadlineExceeded && err != context.Canceled {
			t.Fatalf("handler context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler outlived the caller's deadline")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- conn.Invoke(ctx2, "/test.Blocker/Block", &emptypb.Empty{}, &emptypb.Empty{}) }()
	<-b.started // the first call's
	<-b.started // this one's: it reached the handler
	cancel2()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
	select {
	case err := <-b.ended:
		if err != context.Canceled {
			t.Fatalf("handler context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
}

// A server without the pipe (an older build) is called with ordinary RPCs instead.
func TestServerWithoutThePipe(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	cc := grpctest.Loopback(t, func(g *grpc.Server) { healthpb.RegisterHealthServer(g, hs) })
	conn := NewConn(cc, "")
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for i := range 3 { // the first finds out, the next go straight
		resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
	}
	if !conn.direct.Load() {
		t.Fatal("the connection did not switch to ordinary RPCs")
	}
}
