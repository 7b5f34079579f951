package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/metrics"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// TestServerServesAndStops starts the metrics server on a free loopback port, scrapes the Go
// runtime and process collectors, and stops it with its context.
func TestServerServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, err := metrics.Start(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	body := scrape(t, s.Addr())
	for _, want := range []string{"go_goroutines ", "go_memstats_heap_alloc_bytes ", "process_open_fds ", "zest_http_requests_in_flight 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	resp, err := http.Post("http://"+s.Addr()+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics = %d, want 405", resp.StatusCode)
	}
	cancel()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("metrics server did not stop with its context")
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("metrics port still accepts connections after stop")
	}
}

func TestDisabledAndValidate(t *testing.T) {
	for _, addr := range []string{"", "off", "OFF"} {
		s, err := metrics.Start(t.Context(), addr, nil)
		if s != nil || err != nil {
			t.Errorf("Start(%q) = %v, %v; want disabled", addr, s, err)
		}
		if err := metrics.ValidateAddr("x-metrics-addr", addr, false); err != nil {
			t.Errorf("ValidateAddr(%q) = %v", addr, err)
		}
	}
	err := metrics.ValidateAddr("inference-metrics-addr", "13320", false)
	if err == nil || !strings.Contains(err.Error(), "inference-metrics-addr") || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("ValidateAddr(13320) = %v, want an error naming the flag and the form", err)
	}
	// Metrics have no authentication: an address other than loopback is refused, naming the
	// setting that allows it, unless that setting is given.
	for _, addr := range []string{"0.0.0.0:13320", ":13320", "[::]:13320", "192.0.2.7:13320", "metrics.example:13320"} {
		err := metrics.ValidateAddr("inference-metrics-addr", addr, false)
		if err == nil || !strings.Contains(err.Error(), "ZEST_INFERENCE_METRICS_ADDR") || !strings.Contains(err.Error(), "ZEST_METRICS_PUBLIC=true") {
			t.Errorf("ValidateAddr(%q) = %v, want a refusal naming ZEST_METRICS_PUBLIC", addr, err)
		}
		if err := metrics.ValidateAddr("inference-metrics-addr", addr, true); err != nil {
			t.Errorf("ValidateAddr(%q, public) = %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:13320", "127.0.0.2:0", "[::1]:13320", "localhost:13320"} {
		if err := metrics.ValidateAddr("inference-metrics-addr", addr, false); err != nil {
			t.Errorf("ValidateAddr(%q) = %v, want loopback accepted", addr, err)
		}
	}
	if err := metrics.ValidateApart("edge-metrics-addr", "127.0.0.1:13305", "edge-addr", "127.0.0.1:13305"); err == nil ||
		!strings.Contains(err.Error(), "edge-metrics-addr") || !strings.Contains(err.Error(), "edge-addr") {
		t.Errorf("ValidateApart on the API's address = %v, want an error naming both", err)
	}
	if err := metrics.ValidateApart("edge-metrics-addr", "off", "edge-addr", "off"); err != nil {
		t.Errorf("ValidateApart(off) = %v", err)
	}
	// A taken port fails at once, naming the address.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if _, err := metrics.Start(t.Context(), lis.Addr().String(), nil); err == nil || !strings.Contains(err.Error(), lis.Addr().String()) {
		t.Errorf("Start on a taken port = %v, want an error naming it", err)
	}
}

// TestCap holds a capped counter to DefaultMaxLabelSets distinct server/tool pairs: past it,
// new pairs count as other/other with their outcome kept, pairs seen before keep counting as
// themselves, and the family never exceeds the cap plus one "other" series per outcome.
func TestCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total", Help: "h"}, []string{"server", "tool", "outcome"})
	reg.MustRegister(calls)
	c := metrics.NewCap(0, true, true, false)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 600 {
				n := w*600 + i // 2400 distinct pairs in all
				outcome := []string{"ok", "error"}[n%2]
				calls.WithLabelValues(c.Values(fmt.Sprintf("s%d", n%50), fmt.Sprintf("t%d", n), outcome)...).Inc()
			}
		}()
	}
	wg.Wait()
	if c.Len() != metrics.DefaultMaxLabelSets {
		t.Fatalf("cap keeps %d sets, want %d", c.Len(), metrics.DefaultMaxLabelSets)
	}
	if n := testutil.CollectAndCount(calls); n != metrics.DefaultMaxLabelSets+2 {
		t.Fatalf("%d series, want %d (the cap, plus other/other for each outcome)", n, metrics.DefaultMaxLabelSets+2)
	}
	over := testutil.ToFloat64(calls.WithLabelValues("other", "other", "ok")) + testutil.ToFloat64(calls.WithLabelValues("other", "other", "error"))
	if over != 2400-metrics.DefaultMaxLabelSets {
		t.Fatalf("other counted %v calls, want %d", over, 2400-metrics.DefaultMaxLabelSets)
	}
	// A kept pair keeps its own series after the cap is reached.
	var kept []string
	for _, s := range []string{"s0", "s1"} {
		for i := range 2400 {
			v := c.Values(s, fmt.Sprintf("t%d", i), "ok")
			if v[0] != metrics.Other {
				kept = v
				break
			}
		}
		if kept != nil {
			break
		}
	}
	if kept == nil {
		t.Fatal("no pair kept")
	}
	// Forget frees a place.
	c.Forget(kept[0], kept[1])
	if got := c.Values("new", "tool", "ok"); got[0] != "new" || got[1] != "tool" {
		t.Fatalf("after Forget, a new pair got %v", got)
	}
	if got := c.Values("newer", "tool", "ok"); got[0] != metrics.Other || got[2] != "ok" {
		t.Fatalf("past the cap, got %v, want other/other/ok", got)
	}
	if got := metrics.NewCap(3, true).Values("a", "b"); got[0] != "a" || got[1] != "b" {
		t.Fatalf("uncapped positions must pass through: %v", got)
	}
}

func TestObserveHTTP(t *testing.T) {
	before := testutil.ToFloat64(metrics.HTTPRequests.WithLabelValues("other", "none", "other"))
	metrics.ObserveHTTP("BREW", "", 999, time.Millisecond)
	metrics.ObserveHTTP("GET", "/mcp/servers/{id}", 200, time.Millisecond)
	if got := testutil.ToFloat64(metrics.HTTPRequests.WithLabelValues("other", "none", "other")); got != before+1 {
		t.Errorf("unknown method/route/status counted %v, want %v", got, before+1)
	}
	if got := testutil.ToFloat64(metrics.HTTPRequests.WithLabelValues("GET", "/mcp/servers/{id}", "200")); got < 1 {
		t.Errorf("GET /mcp/servers/{id} 200 counted %v", got)
	}
}

// TestGRPCInterceptors runs a real grpcserve server and client: the health check is counted
// on both sides, with its code, and nothing stays in flight.
func TestGRPCInterceptors(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpcserve.New(grpcserve.Options{DrainTimeout: time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	cc, err := grpcdial.Dial(lis.Addr().String(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	const svc, method = "grpc.health.v1.Health", "Check"
	// max: a series not there yet (-1 when others of its name are, as another test's) is 0.
	before := max(0, counterValue(t, "grpc_server_handled_total", map[string]string{"grpc_service": svc, "grpc_method": method, "grpc_code": "OK"}))
	beforeClient := max(0, counterValue(t, "grpc_client_handled_total", map[string]string{"grpc_service": svc, "grpc_method": method, "grpc_code": "OK"}))
	for range 3 {
		if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := counterValue(t, "grpc_server_handled_total", map[string]string{"grpc_service": svc, "grpc_method": method, "grpc_code": "OK"}); got != before+3 {
		t.Errorf("server handled %v, want %v", got, before+3)
	}
	if got := counterValue(t, "grpc_client_handled_total", map[string]string{"grpc_service": svc, "grpc_method": method, "grpc_code": "OK"}); got != beforeClient+3 {
		t.Errorf("client handled %v, want %v", got, beforeClient+3)
	}
	if got := testutil.ToFloat64(metrics.GRPCInFlight.WithLabelValues(svc, method)); got != 0 {
		t.Errorf("in flight after the calls: %v", got)
	}
	// Every registered method has its series before any call (InitializeServer).
	if got := counterValue(t, "grpc_server_started_total", map[string]string{"grpc_service": svc, "grpc_method": "List"}); got != 0 {
		t.Errorf("Health/List started %v before any call, want a series at 0", got)
	}
}

// counterValue reads one series of Registry (0 before it exists, -1 for a series that does
// not exist among existing ones of its name, so that InitializeServer's zeros are told apart).
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
		return -1
	}
	return 0
}
