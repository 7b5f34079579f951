package grpcserve

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
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

	cc, err := grpcdial.Dial(lis.Addr().String(), "", 0)
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
