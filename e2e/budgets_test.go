package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestDiagnosticsStayOnLoopback: the profiler and the metrics port answer anyone who reaches
// them without a key, so every binary refuses to start (exit 2, before anything listens) when
// one is set to an address other than loopback, naming the setting and the one that allows it
// (ZEST_PPROF_PUBLIC, ZEST_METRICS_PUBLIC); with that setting, or on loopback, it starts.
func TestDiagnosticsStayOnLoopback(t *testing.T) {
	for bin, listenVar := range listenVars {
		env := append(os.Environ(), "ZEST_SERVICE_KEY="+serviceKey, listenVar+"="+unusedAddr(t))
		for _, c := range []struct {
			vars []string
			want string // in the refusal; "" when the binary must start
		}{
			{[]string{"ZEST_PPROF_ADDR=0.0.0.0:16060"}, "ZEST_PPROF_PUBLIC=true"},
			{[]string{"ZEST_PPROF_ADDR=:16060"}, "ZEST_PPROF_PUBLIC=true"},
			{[]string{metricsVars[bin] + "=0.0.0.0:16061"}, "ZEST_METRICS_PUBLIC=true"},
			{[]string{"ZEST_PPROF_ADDR=0.0.0.0:16060", "ZEST_PPROF_PUBLIC=true"}, ""},
			{[]string{metricsVars[bin] + "=0.0.0.0:16061", "ZEST_METRICS_PUBLIC=true"}, ""},
			{[]string{"ZEST_PPROF_ADDR=127.0.0.1:16060", metricsVars[bin] + "=127.0.0.1:16061"}, ""},
		} {
			code, out := runHealthcheck(t, bin, append(env, c.vars...))
			switch {
			case c.want != "" && (code != 2 || !strings.Contains(out, "is not a loopback address") || !strings.Contains(out, c.want)):
				t.Errorf("%s with %v: exit %d, %q; want 2 naming %s", bin, c.vars, code, out, c.want)
			case c.want == "" && code == 2:
				t.Errorf("%s with %v: refused: %s", bin, c.vars, out)
			}
		}
	}
}
