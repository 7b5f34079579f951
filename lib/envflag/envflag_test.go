package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParsePrecedence(t *testing.T) {
	env := map[string]string{"ZEST_EDGE_ADDR": "127.0.0.1:1", "ZEST_DRAIN_TIMEOUT": "3s", "ZEST_LOG_LEVEL": "debug"}
	getenv := func(k string) string { return env[k] }

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	addr := fs.String("edge-addr", "127.0.0.1:13305", "")
	drain := fs.Duration("drain-timeout", time.Second, "")
	level := fs.String("log-level", "info", "")
	other := fs.String("other", "keep", "")
	if err := Parse(fs, []string{"-log-level", "warn"}, getenv); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:1" {
		t.Errorf("edge-addr = %q, want the environment's", *addr)
	}
	if *drain != 3*time.Second {
		t.Errorf("drain-timeout = %v, want 3s", *drain)
	}
	if *level != "warn" {
		t.Errorf("log-level = %q, want the flag's value to win", *level)
	}
	if *other != "keep" {
		t.Errorf("other = %q, want the default", *other)
	}
}

func TestParseBadEnvNamesVariable(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("drain-timeout", time.Second, "")
	err := Parse(fs, nil, func(k string) string {
		if k == "ZEST_DRAIN_TIMEOUT" {
			return "soon"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "ZEST_DRAIN_TIMEOUT") {
		t.Fatalf("err = %v, want it to name ZEST_DRAIN_TIMEOUT", err)
	}
}

func TestParseRejectsPositionalArgs(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	if err := Parse(fs, []string{"stray"}, func(string) string { return "" }); err == nil {
		t.Fatal("want an error for a positional argument")
	}
}
