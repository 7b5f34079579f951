package healthcheck

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpctest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:13310":   "127.0.0.1:13310",
		":13310":          "127.0.0.1:13310",
		"[::]:13310":      "[::1]:13310",
		"127.0.0.1:13310": "127.0.0.1:13310",
		"10.0.0.7:1":      "10.0.0.7:1",
		"toolhost:13312":  "toolhost:13312",
	} {
		if got, err := DialAddr(in); err != nil || got != want {
			t.Errorf("DialAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"13310", "127.0.0.1:0", "127.0.0.1:"} {
		if _, err := DialAddr(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("DialAddr(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestGRPC(t *testing.T) {
	h := health.NewServer()
	addr := grpctest.Listen(t, func(g *grpc.Server) { healthpb.RegisterHealthServer(g, h) })
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if err := GRPC(t.Context(), addr); err != nil {
		t.Fatalf("serving: %v", err)
	}
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING) // draining
	if err := GRPC(t.Context(), addr); err == nil || !strings.Contains(err.Error(), "NOT_SERVING") {
		t.Fatalf("draining: %v, want NOT_SERVING", err)
	}
}

func TestHTTP(t *testing.T) {
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/live" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	if err := HTTP(t.Context(), addr, "/live"); err != nil {
		t.Fatalf("live: %v", err)
	}
	code = http.StatusServiceUnavailable
	if err := HTTP(t.Context(), addr, "/live"); err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("503: %v", err)
	}
}

// A stopped address fails at once; a service that accepts but never answers fails at the
// timeout, and the report says so.
func TestRunStoppedAndHung(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopped := lis.Addr().String()
	lis.Close()
	var out bytes.Buffer
	start := time.Now()
	if code := Run("svc", &out, Timeout, func(ctx context.Context) error { return GRPC(ctx, stopped) }); code != 1 {
		t.Fatalf("stopped: exit %d (%s)", code, out.String())
	}
	if took := time.Since(start); took > Timeout {
		t.Fatalf("stopped address took %v, want a quick refusal", took)
	}
	if !strings.Contains(out.String(), "svc: unhealthy:") {
		t.Fatalf("report %q", out.String())
	}

	hung, err := net.Listen("tcp", "127.0.0.1:0") // accepts (backlog), never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	for name, check := range map[string]func(context.Context) error{
		"grpc": func(ctx context.Context) error { return GRPC(ctx, hung.Addr().String()) },
		"http": func(ctx context.Context) error { return HTTP(ctx, hung.Addr().String(), "/live") },
	} {
		out.Reset()
		start := time.Now()
		if code := Run("svc", &out, 300*time.Millisecond, check); code != 1 {
			t.Fatalf("%s hung: exit %d", name, code)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("%s hung: took %v with a 300ms timeout", name, took)
		}
		if !strings.Contains(out.String(), "no healthy answer within 300ms") {
			t.Fatalf("%s hung: report %q", name, out.String())
		}
	}
	out.Reset()
	if code := Run("svc", &out, 0, func(context.Context) error { return nil }); code != 0 || out.String() != "svc: healthy\n" {
		t.Fatalf("healthy: exit %d, %q", code, out.String())
	}
	if code := Run("svc", &out, 0, func(context.Context) error { return errors.New("x") }); code != 1 {
		t.Fatalf("error: exit %d", code)
	}
}
