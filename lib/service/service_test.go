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
