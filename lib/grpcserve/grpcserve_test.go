package grpcserve

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/rpcmux"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// TestServeHealthReflectionAndDrain starts a real server on loopback, checks health and
// reflection answer without a key while a key is configured, then stops it by cancelling.
func TestServeHealthReflectionAndDrain(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Guard: keyauth.Guard{Keys: keyauth.Keys{API: "secret"}}, DrainTimeout: time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()

	cc, err := grpcdial.Dial(lis.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status = %v", resp.GetStatus())
	}
	sctx, scancel := context.WithCancel(t.Context())
	defer scancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if len(rr.GetListServicesResponse().GetService()) == 0 {
		t.Fatal("reflection lists no services")
	}

	scancel()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

// TestDrainEndsOpenPipes: a client holding the unary-call pipe open does not hold the
// graceful stop until the drain timeout: the pipe ends once its calls have answered.
func TestDrainEndsOpenPipes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{DrainTimeout: 20 * time.Second})
	hs := health.NewServer()
	s.Mux.Register(&healthpb.Health_ServiceDesc, hs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	cc, err := grpcdial.Dial(lis.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	conn := rpcmux.NewConn(cc, "")
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call through the pipe: %v", err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("drain took %v with a pipe open", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the open pipe held the graceful stop")
	}
}
