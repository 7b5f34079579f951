package supervisor

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestChildMetrics: a start, a crash (SIGKILL), the restart of the next call and a stop are
// counted, and the gauges read the supervisor's state: one child running while it runs, none
// after Close (a closed supervisor is no longer reported).
func TestChildMetrics(t *testing.T) {
	starts, crashes, stops := testutil.ToFloat64(childStarts), testutil.ToFloat64(childExits.WithLabelValues("crash")), testutil.ToFloat64(childExits.WithLabelValues("stop"))
	restarts := testutil.ToFloat64(childRestarts.WithLabelValues("fx-metrics"))
	s := New(func() Config { c := DefaultConfig(); c.StopGrace = time.Second; return c }())
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	st, err := s.EnsureStarted(t.Context(), spec("fx-metrics"), false)
	if err != nil {
		t.Fatal(err)
	}
	gauge := func() string {
		var b strings.Builder
		mfs, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if name := mf.GetName(); name == "zest_toolhost_children" || name == "zest_toolhost_servers" || name == "zest_toolhost_calls_in_flight" {
				for _, m := range mf.GetMetric() {
					b.WriteString(name)
					for _, l := range m.GetLabel() {
						b.WriteString(" " + l.GetName() + "=" + l.GetValue())
					}
					fmt.Fprintf(&b, " %g\n", m.GetGauge().GetValue())
				}
			}
		}
		return b.String()
	}
	if g := gauge(); !strings.Contains(g, "zest_toolhost_children 1\n") || !strings.Contains(g, "state=ready 1\n") {
		t.Fatalf("gauges while running:\n%s", g)
	}
	// A call the child never answers is in flight until the child dies.
	hung := make(chan error, 1)
	go func() {
		_, err := s.Call(t.Context(), "fx-metrics", "tools/call", json.RawMessage(`{"name":"hang"}`), 0, nil)
		hung <- err
	}()
	waitfor.True(t, 10*time.Second, "the in-flight gauge at 1", func() bool { return strings.Contains(gauge(), "zest_toolhost_calls_in_flight 1\n") })
	syscall.Kill(int(st.GetPid()), syscall.SIGKILL)
	if err := <-hung; err == nil {
		t.Fatal("the hung call succeeded")
	}
	// The counters are the process's: an earlier test's child may still be ending (its OnExit
	// runs after its Stop returned), so they are compared with at least.
	waitfor.True(t, 10*time.Second, "a crash counted", func() bool { return testutil.ToFloat64(childExits.WithLabelValues("crash")) >= crashes+1 })
	if got, err := echo(t, s, "fx-metrics", "again"); err != nil || got != "again" {
		t.Fatalf("call after the crash: %q %v", got, err)
	}
	if got := testutil.ToFloat64(childRestarts.WithLabelValues("fx-metrics")); got != restarts+1 {
		t.Errorf("restarts %v, want %v", got, restarts+1)
	}
	s.Close()
	closed = true
	if got := testutil.ToFloat64(childStarts); got < starts+2 {
		t.Errorf("starts %v, want %v", got, starts+2)
	}
	// OnExit runs after Stop has returned.
	waitfor.True(t, 10*time.Second, "a stop counted", func() bool { return testutil.ToFloat64(childExits.WithLabelValues("stop")) >= stops+1 })
	if g := gauge(); !strings.Contains(g, "zest_toolhost_children 0\n") || !strings.Contains(g, "zest_toolhost_calls_in_flight 0\n") {
		t.Fatalf("gauges after Close:\n%s", g)
	}
}
