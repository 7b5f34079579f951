package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
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

// TestPresetOneIdentity: mark3labs/mcp-go's client with its defaults (2026-07-28, no session)
// on a preset of the built-in tools and mcp-go's conformance server (itself of 2026-07-28):
// every result's _meta serverInfo is the preset's, as server/discover gave it, whichever
// provider ran the tool. Before, the conformance server's tool came back with its own.
func TestPresetOneIdentity(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "conformance", "transport": "streamable-http", "url": mcpGoConformance(t)})
	putPreset(t, s, "both", "lemonade", "conformance")
	tr, err := transport.NewStreamableHTTP(presetURL(s, "both"))
	if err != nil {
		t.Fatal(err)
	}
	cl := mcpclient.NewClient(tr)
	if err := cl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-identity", Version: "1"}
	init, err := cl.Initialize(t.Context(), req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if init.ProtocolVersion != "2026-07-28" || init.ServerInfo.Name != "zest-preset-both" {
		t.Fatalf("negotiated %q with %q: want 2026-07-28 with zest-preset-both", init.ProtocolVersion, init.ServerInfo.Name)
	}
	tools, err := cl.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if who := tools.Meta.ServerInfo(); who == nil || who.Name != init.ServerInfo.Name {
		t.Errorf("tools/list: _meta serverInfo %+v, want %s", who, init.ServerInfo.Name)
	}
	i := slices.IndexFunc(tools.Tools, func(tl mcp.Tool) bool { return strings.HasSuffix(tl.Name, "test_simple_text") })
	if i < 0 {
		t.Fatalf("tools/list lacks the conformance server's test_simple_text: %v", tools.Tools)
	}
	for _, name := range []string{"lemonade_list_models", tools.Tools[i].Name} {
		call := mcp.CallToolRequest{}
		call.Params.Name = name
		call.Params.Arguments = map[string]any{}
		out, err := cl.CallTool(t.Context(), call)
		if err != nil || out.IsError {
			t.Fatalf("tools/call %s: %v %+v", name, err, out)
		}
		if who := out.Meta.ServerInfo(); who == nil || who.Name != init.ServerInfo.Name || who.Version != init.ServerInfo.Version {
			t.Errorf("tools/call %s: _meta serverInfo %+v, want %+v", name, who, init.ServerInfo)
		}
	}
}
