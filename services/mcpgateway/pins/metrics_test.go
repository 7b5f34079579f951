package pins

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/zestmcp/zest/lib/metrics"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// zest_mcp_tools_held follows what is held, pending and refused, and a forgotten server's
// series are gone.
func TestHeldToolsGauge(t *testing.T) {
	ctx := t.Context()
	g, _ := openGate(t, &mcpgatewayv1.ServerConfig{Id: "gauged"})
	gauge := func(state string) float64 { return testutil.ToFloat64(heldTools.WithLabelValues("gauged", state)) }
	want := func(step string, pending, refused float64) {
		t.Helper()
		if p, r := gauge(StatePending), gauge(StateRefused); p != pending || r != refused {
			t.Fatalf("%s: zest_mcp_tools_held pending %v refused %v, want %v and %v", step, p, r, pending, refused)
		}
	}
	g.Admit(ctx, "gauged", []json.RawMessage{tool("echo", "Echo"), tool("add", "Add")}, true)
	want("first listing", 0, 0)
	g.Admit(ctx, "gauged", []json.RawMessage{tool("echo", "Changed"), tool("add", "Add"), tool("new", "")}, true)
	want("a change and a new tool", 2, 0)
	if _, _, err := g.Decide(ctx, "gauged", []string{"new"}, false); err != nil {
		t.Fatal(err)
	}
	want("new refused", 1, 1)
	if _, _, err := g.Decide(ctx, "gauged", []string{"echo", "new"}, true); err != nil {
		t.Fatal(err)
	}
	want("both accepted", 0, 0)
	if err := g.Forget(ctx, "gauged"); err != nil {
		t.Fatal(err)
	}
	if n := series()["gauged"]; n != 0 {
		t.Fatalf("a forgotten server keeps %d series", n)
	}
}

// series counts the series of zest_mcp_tools_held per server.
func series() map[string]int {
	ch := make(chan prometheus.Metric)
	go func() { heldTools.Collect(ch); close(ch) }()
	out := map[string]int{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			for _, l := range d.GetLabel() {
				if l.GetName() == "server" {
					out[l.GetValue()]++
				}
			}
		}
	}
	return out
}

// Past metrics.DefaultMaxLabelSets servers, a server gets no series (a gauge has no sum to
// keep under "other"); a forgotten server's place is taken again. (The package's other tests
// may hold places: the servers are observed past the cap whatever they hold.)
func TestHeldToolsGaugeCapped(t *testing.T) {
	servers := make([]string, metrics.DefaultMaxLabelSets+1)
	for i := range servers {
		servers[i] = fmt.Sprintf("cap%d", i)
		observe(servers[i], nil)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			unobserve(s)
		}
	})
	got := series()
	if len(got) != metrics.DefaultMaxLabelSets || got[servers[len(servers)-1]] != 0 || got[servers[0]] != 2 {
		t.Fatalf("%d servers with series (the last %d, the first %d), want %d: the cap", len(got), got[servers[len(servers)-1]], got[servers[0]], metrics.DefaultMaxLabelSets)
	}
	unobserve(servers[0])
	observe(servers[len(servers)-1], nil)
	if got := series(); len(got) != metrics.DefaultMaxLabelSets || got[servers[len(servers)-1]] != 2 || got[servers[0]] != 0 {
		t.Fatalf("after forgetting one, %d servers with series, the last with %d", len(got), got[servers[len(servers)-1]])
	}
}
