package activity

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/zestmcp/zest/lib/metrics"
)

// TestAddCountsEachCallOnce: a call recorded in the ring is counted once under its path,
// server, tool and outcome (with a nil ring too), and its latency observed.
func TestAddCountsEachCallOnce(t *testing.T) {
	l, err := New(10, false)
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(toolCalls.WithLabelValues(PathAdmin, "m-srv", "echo", OK))
	l.Add(t.Context(), Call{Path: PathAdmin, Server: "m-srv", Tool: "echo", Outcome: OK, Began: time.Now()})
	l.Add(t.Context(), Call{Path: PathAdmin, Server: "m-srv", Tool: "echo", Outcome: OK, Began: time.Now()})
	(*Log)(nil).Add(t.Context(), Call{Path: PathAdmin, Server: "m-srv", Tool: "echo", Outcome: OK, Began: time.Now()})
	if got := testutil.ToFloat64(toolCalls.WithLabelValues(PathAdmin, "m-srv", "echo", OK)); got != before+3 {
		t.Fatalf("counted %v, want %v", got, before+3)
	}
	if n := testutil.CollectAndCount(toolCallSeconds); n == 0 {
		t.Fatal("no latency series")
	}
}

// TestToolCallCap: more server/tool pairs than the cap count as other/other, keeping path and
// outcome; the series stay within the cap.
func TestToolCallCap(t *testing.T) {
	for i := range metrics.DefaultMaxLabelSets + 50 {
		countCall(Call{Path: PathMCP, Server: fmt.Sprintf("cap-s%d", i), Tool: "t", Outcome: Error}, time.Millisecond)
	}
	if got := testutil.ToFloat64(toolCalls.WithLabelValues(PathMCP, metrics.Other, metrics.Other, Error)); got < 50 {
		t.Fatalf("other counted %v, want at least 50", got)
	}
	if n := testutil.CollectAndCount(toolCalls); n > metrics.DefaultMaxLabelSets+4*4 {
		t.Fatalf("%d series past a cap of %d", n, metrics.DefaultMaxLabelSets)
	}
}
