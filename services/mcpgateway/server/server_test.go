package server

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
)

// TestValidateMCPPreset: ZEST_MCP_PRESET must be a preset id.
func TestValidateMCPPreset(t *testing.T) {
	for _, c := range []struct {
		preset string
		ok     bool
	}{{"", true}, {"desk", true}, {"a.b_c-1", true}, {"not an id", false}, {strings.Repeat("x", 97), false}} {
		cfg := DefaultConfig()
		cfg.Keys.Service = ""
		cfg.MCPPreset = c.preset
		err := cfg.Validate()
		if got := err == nil || !strings.Contains(err.Error(), "mcp-preset"); got != c.ok {
			t.Errorf("mcp-preset %q: %v", c.preset, err)
		}
	}
}

// TestActivityVariables: ZEST_ACTIVITY_SIZE and ZEST_ACTIVITY_DETAILS are read as every
// ZEST_ variable is, and a bad value is refused at startup with an error that names it.
func TestActivityVariables(t *testing.T) {
	parse := func(env map[string]string) (Config, error) {
		cfg := DefaultConfig()
		cfg.Keys.Service = ""
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		if err := envflag.Parse(fs, nil, func(k string) string { return env[k] }); err != nil {
			return cfg, err
		}
		return cfg, cfg.Validate()
	}
	cfg, err := parse(nil)
	if err != nil || cfg.ActivitySize != activity.DefaultSize || cfg.ActivityDetails {
		t.Fatalf("defaults: %d %v %v", cfg.ActivitySize, cfg.ActivityDetails, err)
	}
	cfg, err = parse(map[string]string{"ZEST_ACTIVITY_SIZE": "10000", "ZEST_ACTIVITY_DETAILS": "true"})
	if err != nil || cfg.ActivitySize != 10000 || !cfg.ActivityDetails {
		t.Fatalf("set: %d %v %v", cfg.ActivitySize, cfg.ActivityDetails, err)
	}
	for _, bad := range []map[string]string{
		{"ZEST_ACTIVITY_SIZE": "0"}, {"ZEST_ACTIVITY_SIZE": "-5"}, {"ZEST_ACTIVITY_SIZE": "10001"},
		{"ZEST_ACTIVITY_SIZE": "lots"}, {"ZEST_ACTIVITY_DETAILS": "maybe"},
	} {
		_, err := parse(bad)
		for name := range bad {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%v: %v, want an error that names %s", bad, err, name)
			}
		}
	}
}

// TestInferenceAddrTakesReplicas: ZEST_INFERENCE_ADDR is one address, a list or dns:///; a
// bad one is refused naming the flag and the forms.
func TestInferenceAddrTakesReplicas(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:13310", true}, {"10.0.0.1:13310,10.0.0.2:13310", true}, {"dns:///inference.zest:13310", true},
		{"10.0.0.1:13310,", false}, {"inference", false}, {"dns:///inference", false}} {
		cfg := DefaultConfig()
		cfg.Keys.Service = ""
		cfg.InferenceAddr = c.addr
		err := cfg.Validate()
		if c.ok != (err == nil) || (err != nil && !(strings.Contains(err.Error(), "inference-addr") && strings.Contains(err.Error(), "dns:///name:port"))) {
			t.Errorf("inference-addr %q: %v", c.addr, err)
		}
	}
}
