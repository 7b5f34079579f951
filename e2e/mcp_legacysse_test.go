package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// legacyEndpoints are the three endpoint kinds, each with a tool to call and what its answer
// holds: /mcp's built-ins, a registered server's endpoint and a preset's.
var legacyEndpoints = []struct{ path, tool, args, says string }{
	{"/mcp", "lemonade_list_models", `{}`, "builtin-llm"},
	{"/mcp/servers/echo", "echo", `{"text":"legacy echo"}`, "legacy echo"},
	{"/mcp/presets/legacy", "mcp_echo__echo", `{"text":"legacy preset echo"}`, "legacy preset echo"},
}

// startLegacySuite is a suite with the echo server registered and the preset "legacy" (echo
// and lemonade).
func startLegacySuite(t *testing.T) *Suite {
	t.Helper()
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	putPreset(t, s, "legacy", "echo", "lemonade")
	return s
}

// TestLegacySSEMcpRemote: mcp-remote --transport sse-only, as Claude Desktop runs it (the key
// in AUTH_HEADER), lists and calls a tool through <endpoint>/sse of each endpoint kind (the
// HTTP+SSE transport of protocol 2024-11-05). On main, GET <endpoint>/sse was 404.
// Given the /sse URL with its default transport (http-first), mcp-remote gets there too: its
// POST to /sse is 405, on which it falls back to HTTP+SSE.
func TestLegacySSEMcpRemote(t *testing.T) {
	s := startLegacySuite(t)
	type run struct {
		ep        int
		transport string
	}
	runs := []run{{0, "sse-only"}, {1, "sse-only"}, {2, "sse-only"}, {0, "http-first"}}
	for _, r := range runs {
		ep := legacyEndpoints[r.ep]
		t.Run(ep.path+" "+r.transport, func(t *testing.T) {
			mr := startMCPRemote(t, []string{s.URL + ep.path + "/sse", "--header", "Authorization:${AUTH_HEADER}", "--transport", r.transport},
				map[string]string{"AUTH_HEADER": "Bearer " + fedAPIKey})
			send := mr.send
			await := func(id string) string {
				l, ok := mr.await(id)
				if !ok {
					t.Fatalf("mcp-remote ended before answering %s; stderr:\n%s", id, mr.stderr.String())
				}
				return l
			}
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy-e2e","version":"1"}}}`)
			if l := await("1"); !strings.Contains(l, `"result"`) {
				t.Fatalf("initialize: %s", l)
			}
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if l := await("2"); !strings.Contains(l, `"name":"`+ep.tool+`"`) {
				t.Fatalf("tools/list has no %s: %s", ep.tool, l)
			}
			send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + ep.tool + `","arguments":` + ep.args + `}}`)
			if l := await("3"); !strings.Contains(l, ep.says) || strings.Contains(l, `"isError":true`) {
				t.Fatalf("tools/call %s: %s", ep.tool, l)
			}
		})
	}
}

// TestLegacySSETypeScriptSDK: the official TypeScript SDK's SSEClientTransport lists and
// calls a tool through <endpoint>/sse of each endpoint kind; a POST to its message URL by
// another key, or after the stream closed, is 404.
func TestLegacySSETypeScriptSDK(t *testing.T) {
	s := startLegacySuite(t)
	for _, ep := range legacyEndpoints {
		t.Run(ep.path, func(t *testing.T) {
			cmd := exec.Command("node", nodeScript(t, "sse-client.mjs"), s.URL+ep.path+"/sse", fedAPIKey, ep.tool, ep.args)
			b, err := cmd.Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("sse-client: %v\n%s\n%s", err, b, ee.Stderr)
				}
				t.Fatal(err)
			}
			var out struct {
				ServerName string
				Tools      []string
				IsError    bool
				Text       string
			}
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("sse-client printed %s: %v", b, err)
			}
			if !slices.Contains(out.Tools, ep.tool) || out.IsError || !strings.Contains(out.Text, ep.says) || out.ServerName == "" {
				t.Fatalf("through %s/sse: %+v", ep.path, out)
			}
		})
	}
	t.Run("foreign and unknown streams", func(t *testing.T) {
		if r := do(t, "POST", s.URL+"/mcp/message?sessionId=nope", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Content-Type: application/json", fedAPIAuth); r.Status != 404 ||
			!strings.Contains(string(r.Body), "open GET /mcp/sse again") {
			t.Errorf("an unknown stream: %d %s", r.Status, r.Body)
		}
		if r := do(t, "GET", s.URL+"/mcp/sse", ""); r.Status != 401 {
			t.Errorf("GET /mcp/sse without a key: %d %s", r.Status, r.Body)
		}
	})
}
