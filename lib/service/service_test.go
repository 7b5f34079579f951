package service

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

func TestTuneGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	old, had := os.LookupEnv("GOGC")
	t.Cleanup(func() {
		if had {
			os.Setenv("GOGC", old)
		} else {
			os.Unsetenv("GOGC")
		}
	})

	os.Unsetenv("GOGC")
	tuneGC(GCPercent)
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Fatalf("without GOGC: GC percent %d, want %d", got, GCPercent)
	}

	os.Setenv("GOGC", "100") // the operator's choice wins
	debug.SetGCPercent(100)
	tuneGC(GCPercent)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC=100: GC percent %d, want 100", got)
	}
}

func TestTuneGCZeroKeepsDefault(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set")
	}
	tuneGC(0)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("tuneGC(0): GC percent %d, want 100", got)
	}
}

func TestModes(t *testing.T) {
	rest, health, version := modes([]string{"-log-level", "debug", "--healthcheck", "-edge-addr=:1", "--", "-version"})
	if !health || version || strings.Join(rest, " ") != "-log-level debug -edge-addr=:1 -- -version" {
		t.Fatalf("modes = %q %v %v", rest, health, version)
	}
	if _, h, v := modes([]string{"-version"}); h || !v {
		t.Fatalf("-version: %v %v", h, v)
	}
	if got := VersionString(); got == "" {
		t.Fatal("empty version")
	}
	Version = "v9.9.9"
	defer func() { Version = "" }()
	if got := VersionString(); got != "v9.9.9" {
		t.Fatalf("stamped version %q", got)
	}
}

// TestPprofStaysOnLoopback: the profiler (no authentication) is refused on an address other
// than loopback, with an error naming ZEST_PPROF_ADDR and the setting that allows it; with
// ZEST_PPROF_PUBLIC it is accepted.
func TestPprofStaysOnLoopback(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
		bad    string // what the error says; "" when accepted
	}{
		{"", false, ""},
		{"127.0.0.1:6060", false, ""},
		{"[::1]:6060", false, ""},
		{"localhost:6060", false, ""},
		{"0.0.0.0:6060", false, "ZEST_PPROF_PUBLIC=true"},
		{":6060", false, "ZEST_PPROF_PUBLIC=true"},
		{"192.0.2.7:6060", false, "ZEST_PPROF_PUBLIC=true"},
		{"0.0.0.0:6060", true, ""},
		{"6060", true, "want host:port"},
	} {
		cfg := DefaultCommon()
		cfg.PprofAddr, cfg.PprofPublic = c.addr, c.public
		err := cfg.ValidateCommon()
		if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), "ZEST_PPROF_ADDR")) {
			t.Errorf("pprof-addr %q public=%v: %v; want %q", c.addr, c.public, err, c.bad)
		}
	}
}
