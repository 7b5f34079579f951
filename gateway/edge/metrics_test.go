package edge

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestRouteMetrics counts requests by the route template of the access line: an admin route by
// grpc-gateway's template (never the id in its path), a ServeMux route by its pattern, and an
// unmatched path as "none" (the path never becomes a label).
func TestRouteMetrics(t *testing.T) {
	te := startEdge(t, nil)
	count := func(method, route, code string) float64 {
		return testutil.ToFloat64(metrics.HTTPRequests.WithLabelValues(method, route, code))
	}
	live, none := count("GET", "/live", "200"), count("GET", metrics.NoRoute, "404")
	admin := count("DELETE", "/internal/mcp/servers/{id}", "404")
	do(t, http.MethodGet, te.url+"/live", "")
	do(t, http.MethodGet, te.url+"/live", "")
	do(t, http.MethodGet, te.url+"/no/such/path-12345", "")
	do(t, http.MethodDelete, te.url+"/internal/mcp/servers/some-id-1", "", "Authorization", "Bearer "+adminKey)
	if got := count("GET", "/live", "200"); got != live+2 {
		t.Errorf("GET /live 200: %v, want %v", got, live+2)
	}
	if got := count("GET", metrics.NoRoute, "404"); got != none+1 {
		t.Errorf("GET none 404: %v, want %v", got, none+1)
	}
	if got := count("DELETE", "/internal/mcp/servers/{id}", "404"); got != admin+1 {
		t.Errorf("DELETE /internal/mcp/servers/{id} 404 (the fake knows no id): %v, want %v", got, admin+1)
	}
	// A handler counts itself out after its answer has gone: the client may read the answer
	// first, so the gauge is read until it settles (any request of an earlier test included).
	waitfor.NoError(t, 5*time.Second, func() error {
		if n := testutil.ToFloat64(metrics.HTTPInFlight); n != 0 {
			return fmt.Errorf("%v in flight after the answers", n)
		}
		return nil
	})
	if n := testutil.CollectAndCount(metrics.HTTPRequests); n == 0 {
		t.Error("no series")
	}
}
