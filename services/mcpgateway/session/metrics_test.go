package session

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSessionMetrics: each issued id counts as started under its endpoint, each Ended as ended.
func TestSessionMetrics(t *testing.T) {
	c, err := NewCodec(bytes.Repeat([]byte("k"), 32), 0)
	if err != nil {
		t.Fatal(err)
	}
	mcp, srv, pre := testutil.ToFloat64(started.WithLabelValues("mcp")), testutil.ToFloat64(started.WithLabelValues("server")), testutil.ToFloat64(started.WithLabelValues("preset"))
	endedSrv := testutil.ToFloat64(ended.WithLabelValues("server"))
	if _, err := c.Issue("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	id, err := c.IssueFor("2025-06-18", "everything")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.IssueFor("2025-06-18", "preset:p1"); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	Ended(cl)
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"started mcp", testutil.ToFloat64(started.WithLabelValues("mcp")), mcp + 1},
		{"started server", testutil.ToFloat64(started.WithLabelValues("server")), srv + 1},
		{"started preset", testutil.ToFloat64(started.WithLabelValues("preset")), pre + 1},
		{"ended server", testutil.ToFloat64(ended.WithLabelValues("server")), endedSrv + 1},
	} {
		if x.got != x.want {
			t.Errorf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
	if n := testutil.CollectAndCount(started); n != 3 {
		t.Errorf("%d started series, want 3 (the endpoint label is bounded)", n)
	}
}
