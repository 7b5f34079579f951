package server

import (
	"strings"
	"testing"
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
