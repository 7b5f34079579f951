package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
)

// What real clients showed their users when a request failed (issue 24, "Real clients"):
// every MCP endpoint says the same of an unknown tool, in words that do not repeat themselves.

// TestUnknownToolOneMessage: the official TypeScript SDK calls a tool no endpoint has on
// /mcp (the built-in tools), /mcp/servers/{id} (mcp-go's conformance server, whose own answer
// is "tool 'x' not found: tool not found") and /mcp/presets/{id} (both): each answers -32602
// with one sentence that names the tool and says where the tools are listed. Before, /mcp and
// the server answered mcp-go's doubled "not found: tool not found".
func TestUnknownToolOneMessage(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "conformance", "transport": "streamable-http", "url": mcpGoConformance(t)})
	putPreset(t, s, "both", "lemonade", "conformance")
	want := `MCP error -32602: Unknown tool "no_such_tool": this endpoint has no tool of that name (tools/list lists its tools)`
	for _, url := range []string{s.URL + "/mcp", fedURL(s, "conformance"), presetURL(s, "both")} {
		t.Run(url, func(t *testing.T) {
			cmd := exec.Command("node", filepath.Join(peersDir(t), "tools-client.mjs"), url, `[["no_such_tool", {}]]`)
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					stderr = ee.Stderr
				}
				t.Fatalf("tools-client.mjs: %v\n%s", err, stderr)
			}
			var got []struct{ Error string }
			if err := json.Unmarshal(out, &got); err != nil || len(got) != 1 {
				t.Fatalf("%v: %s", err, out)
			}
			if got[0].Error != want {
				t.Errorf("the SDK threw %q, want %q", got[0].Error, want)
			}
		})
	}
}
