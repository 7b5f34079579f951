package grpcserve

import (
	"context"
	"encoding/json"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/logging"
	"github.com/zestmcp/zest/lib/logging/logtest"
	"github.com/zestmcp/zest/lib/requestid"
	"github.com/zestmcp/zest/lib/waitfor"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
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

// TestFailedCallsAreLoggedWithTheirRequestID: a failing call is logged with its method, code
// and the request id its caller sent; a successful one is not logged.
func TestFailedCallsAreLoggedWithTheirRequestID(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	log, err := logging.New(&logs, "test", "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Logger: log, DrainTimeout: time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	cc, err := grpcdial.Dial(lis.Addr().String(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	if _, err := hc.Check(requestid.With(t.Context(), "rid-ok"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Check(requestid.With(t.Context(), "rid-failed"), &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v", err)
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "rpc failed" {
			if line != nil {
				t.Fatalf("more than one failure logged:\n%s", logs.String())
			}
			line = m
		}
	}
	if line == nil || line["request_id"] != "rid-failed" || line["method"] != "/grpc.health.v1.Health/Check" ||
		line["code"] != "NotFound" || line["level"] != "INFO" {
		t.Fatalf("failure line %v; log:\n%s", line, logs.String())
	}
}

// TestUnavailableIsExpectedOnlyWhileDraining: a call failing UNAVAILABLE is a warning while
// the server serves, and expected (info) once draining is closed.
func TestUnavailableIsExpectedOnlyWhileDraining(t *testing.T) {
	var logs logtest.Buffer
	log, err := logging.New(&logs, "test", "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	draining := make(chan struct{})
	f := failures{log: log, draining: draining}
	level := func() any {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil || m["code"] != "Unavailable" {
			t.Fatalf("no failure line: %q", logs.String())
		}
		return m["level"]
	}
	f.logged(t.Context(), "/x/Y", status.Error(codes.Unavailable, "gone"), time.Now())
	if l := level(); l != "WARN" {
		t.Fatalf("serving: level %v", l)
	}
	close(draining)
	f.logged(t.Context(), "/x/Y", status.Error(codes.Unavailable, "gone"), time.Now())
	if l := level(); l != "INFO" {
		t.Fatalf("draining: level %v", l)
	}
}

// TestStreamWorkers: a server keeps StreamWorkers goroutines to run calls (at least 8 per
// CPU), or as many as Options.StreamWorkers says, and they end with the server.
func TestStreamWorkers(t *testing.T) {
	for _, tc := range []struct{ set, want int }{{0, max(StreamWorkers, 8*runtime.NumCPU())}, {5, 5}} {
		got, left := make(chan int, 1), make(chan func() int, 1)
		go func() { // a goroutine of its own, so that its workers are told from any others
			id := grpctest.GoroutineID()
			s := New(Options{StreamWorkers: tc.set})
			got <- grpctest.WorkersStartedBy(id)
			s.GRPC.Stop()
			left <- func() int { return grpctest.WorkersStartedBy(id) }
		}()
		if n := <-got; n != tc.want {
			t.Errorf("StreamWorkers %d: %d workers, want %d", tc.set, n, tc.want)
		}
		count := <-left
		waitfor.True(t, 5*time.Second, "the workers to end with the server", func() bool { return count() == 0 })
	}
}
