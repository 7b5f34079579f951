package session

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/lib/metrics"
)

// Session metrics. A session id is a signed token that no replica keeps, so there is no count
// of open sessions: the ids issued (started) and the ones ended by DELETE (ended); the rest
// expire (ZEST_SESSION_LIFETIME) or are abandoned. The endpoint label is bounded: mcp (Zest's
// own /mcp), server (/mcp/servers/{id}) or preset (/mcp/presets/{id}); never the id or the
// server's name.
var (
	started = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "mcp_sessions_started_total",
		Help: "MCP session ids issued (initialize), by endpoint: mcp, server or preset."}, []string{"endpoint"})
	ended = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "mcp_sessions_ended_total",
		Help: "MCP sessions ended by their client (DELETE), by endpoint: mcp, server or preset."}, []string{"endpoint"})
)

func init() {
	metrics.Registry.MustRegister(started, ended)
	for _, e := range []string{"mcp", "server", "preset"} {
		started.WithLabelValues(e)
		ended.WithLabelValues(e)
	}
}

// endpointOf is the endpoint label of a session bound to server (Claims.Server).
func endpointOf(server string) string {
	switch {
	case server == "":
		return "mcp"
	case strings.HasPrefix(server, "preset:"):
		return "preset"
	default:
		return "server"
	}
}

// Ended counts a session its client ended (DELETE), once the end is stored.
func Ended(cl Claims) { ended.WithLabelValues(endpointOf(cl.Server)).Inc() }
