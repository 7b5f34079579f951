package pins

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/lib/metrics"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// heldTools is zest_mcp_tools_held: the held tools of each server that pins its tools, by
// state (pending: waiting for an administrator; refused), as this replica last read or wrote
// the server's pins — every listing and decision, and a call's read. The replicas share the
// pins, so they agree after their next read; take the max across replicas, not the sum.
var (
	heldTools = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "mcp_tools_held",
		Help: "Tools of an MCP server held by pinning (their definition changed since it was pinned, or they are new), by server and state: pending or refused."},
		[]string{"server", "state"})
	// heldCap bounds the servers with series: past it, a server has none (a gauge has no
	// sum to keep under "other").
	heldCap = metrics.NewCap(metrics.DefaultMaxLabelSets, true, false)
)

func init() { metrics.Registry.MustRegister(heldTools) }

// observe sets the gauges of server from its pins p (nil: none held).
func observe(server string, p *mcpgatewayv1.ToolPins) {
	if heldCap.Values(server, "")[0] == metrics.Other {
		return
	}
	n := map[string]float64{StatePending: 0, StateRefused: 0}
	for _, h := range p.GetHeld() {
		n[h.GetState()]++
	}
	for state, v := range n {
		heldTools.WithLabelValues(server, state).Set(v)
	}
}

// unobserve drops the gauges of a server whose pins are forgotten.
func unobserve(server string) {
	for _, state := range []string{StatePending, StateRefused} {
		heldTools.DeleteLabelValues(server, state)
	}
	heldCap.Forget(server, "")
}
