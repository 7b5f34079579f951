package edge

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// forwardAuth passes the caller's Authorization header on to the service called.
func forwardAuth(r *http.Request) context.Context {
	ctx := r.Context()
	if a := r.Header.Get("Authorization"); keyauth.BearerToken(a) != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
	}
	return ctx
}

// health answers GET {prefix}health with the gRPC health of every service behind the edge.
func (e *Edge) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	services := map[string]string{}
	ok := true
	names := make([]string, 0, len(e.backend))
	for n := range e.backend {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		resp, err := grpc_health_v1.NewHealthClient(e.backend[n]).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		switch {
		case err != nil:
			services[n] = "UNREACHABLE"
			ok = false
		default:
			services[n] = resp.GetStatus().String()
			ok = ok && resp.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
		}
	}
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "degraded", "services": services})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "services": services})
}
