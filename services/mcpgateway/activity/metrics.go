package activity

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/lib/metrics"
)

// Tool-call metrics are recorded where the ring records a call (Add): every path that calls
// a tool (admin, /mcp, federation, presets, the chat loop) records it there once, so it counts
// once. Server and tool come from what administrators register (a tool its server did not list
// counts as UnlistedTool); toolCallCap bounds them all the same (metrics.DefaultMaxLabelSets
// pairs, then "other"). Path and outcome are this
// package's constants.
var (
	toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "tool_calls_total",
		Help: "Tool calls by path (admin, mcp, chat), server, tool and outcome (ok, tool_error, error, input_required); server/tool pairs past 1000 count as other."},
		[]string{"path", "server", "tool", "outcome"})
	toolCallSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Name: "tool_call_duration_seconds",
		Help: "Tool call latency by path and outcome.", Buckets: metrics.LatencyBuckets}, []string{"path", "outcome"})
	toolCallCap = metrics.NewCap(metrics.DefaultMaxLabelSets, false, true, true, false)
)

func init() { metrics.Registry.MustRegister(toolCalls, toolCallSeconds) }

// UnlistedTool is the tool label of a call of a tool its server did not list.
const UnlistedTool = "unlisted"

func countCall(c Call, d time.Duration) {
	tool := c.Tool
	if c.Unlisted {
		tool = UnlistedTool
	}
	toolCalls.WithLabelValues(toolCallCap.Values(c.Path, c.Server, tool, c.Outcome)...).Inc()
	toolCallSeconds.WithLabelValues(c.Path, c.Outcome).Observe(d.Seconds())
}
