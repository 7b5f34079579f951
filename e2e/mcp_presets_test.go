package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// Presets: /mcp/presets/{id} serves a preset's providers on one MCP endpoint, and /mcp does
// with ZEST_MCP_PRESET.

// registerPresetProviders registers everything (server-everything, get-env filtered out),
// memory (server-memory, its file in a temporary directory), grow (growing-server) and
// hidden (server-everything, "expose": false).
func registerPresetProviders(t *testing.T, s *Suite) {
	t.Helper()
	everything := serverEverything(t)
	memory := filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{everything}, "tools_deny": []string{"get-env"}})
	registerServer(t, s, map[string]any{"id": "memory", "command": "node", "args": []string{memory}, "env": map[string]string{"MEMORY_FILE_PATH": "${E2E_MEMORY_FILE}"}})
	// Its tools grow by design: pin_tools false serves them (pinning would hold them: TestRugPull).
	registerServer(t, s, map[string]any{"id": "grow", "command": "node", "args": []string{nodeScript(t, "growing-server.mjs")}, "pin_tools": false})
	registerServer(t, s, map[string]any{"id": "hidden", "command": "node", "args": []string{everything}, "expose": false})
}

func putPreset(t *testing.T, s *Suite, id string, providers ...string) {
	t.Helper()
	if r := admin(t, s, "POST", "/presets", jsonBody(t, map[string]any{"id": id, "mcp_server_ids": providers})); r.Status != 200 {
		t.Fatalf("preset %s: %d %s", id, r.Status, r.Body)
	}
}

// TestPresetEndpoint drives /mcp/presets/mix (lemonade, everything, memory, grow) with the
// official TypeScript SDK and with mark3labs/mcp-go's client (protocol 2025-11-25, and with
// its defaults 2026-07-28), then checks hidden servers, unknown presets and ended sessions at
// the wire.
func TestPresetEndpoint(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "E2E_MEMORY_FILE="+filepath.Join(t.TempDir(), "memory.jsonl"))
	registerPresetProviders(t, s)
	putPreset(t, s, "mix", "lemonade", "everything", "memory", "grow")
	putPreset(t, s, "secret", "hidden", "memory")
	registerServer(t, s, map[string]any{"id": "broken", "command": "node", "args": []string{filepath.Join(t.TempDir(), "missing.mjs")}})
	putPreset(t, s, "partly", "memory", "broken")

	t.Run("the official SDK", func(t *testing.T) {
		cmd := exec.Command("node", nodeScript(t, "preset-client.mjs"), presetURL(s, "mix"), fedAPIKey)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("sdk client: %v\n%s\n%s\nmcpgateway:\n%s", err, out, stderr, s.Logs("zest-mcpgateway"))
		}
		t.Logf("sdk saw %s", out)
		var got struct {
			SessionID, ProtocolVersion, Echo, Graph, Long, Instructions string
			ServerInfo, Capabilities                                    map[string]any
			Tools, ToolsAfter, Prompts                                  []string
			Models                                                      struct {
				IsError bool
				Text    string
			}
			Progress, Resources, PromptMessages int
			Read                                struct {
				URI     string
				SameURI bool
			}
			Filtered struct {
				Code    int
				Message string
			}
			ListChanged bool
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		if got.ServerInfo["name"] != "zest-preset-mix" || got.ProtocolVersion != "2025-11-25" {
			t.Errorf("serverInfo %v, version %q", got.ServerInfo, got.ProtocolVersion)
		}
		for _, c := range []string{"tools", "resources", "prompts", "logging"} {
			if got.Capabilities[c] == nil {
				t.Errorf("capabilities %v lack %s", got.Capabilities, c)
			}
		}
		for _, p := range []string{`"everything"`, `"memory"`, `"grow"`, `"lemonade"`} {
			if !strings.Contains(got.Instructions, p) {
				t.Errorf("instructions %q do not name %s", got.Instructions, p)
			}
		}
		for _, want := range []string{"lemonade_list_models", "mcp_everything__echo", "mcp_memory__read_graph", "mcp_grow__add_tool", "mcp_grow__echo", "mcp_everything__echo"} {
			if !slices.Contains(got.Tools, want) {
				t.Errorf("tools %v lack %s", got.Tools, want)
			}
		}
		if slices.Contains(got.Tools, "mcp_everything__get-env") || slices.Contains(got.Tools, "echo") {
			t.Errorf("tools %v: a filtered tool, or a server's own name", got.Tools)
		}
		if got.Echo != "Echo: hello through a preset" || !strings.Contains(got.Graph, "entities") || got.Models.IsError {
			t.Errorf("echo %q, read_graph %q, lemonade_list_models %+v", got.Echo, got.Graph, got.Models)
		}
		if got.Progress != 3 || !strings.Contains(got.Long, "completed") {
			t.Errorf("progress %d, result %q", got.Progress, got.Long)
		}
		if got.Resources == 0 || !got.Read.SameURI {
			t.Errorf("resources %d, read %+v", got.Resources, got.Read)
		}
		if !slices.Contains(got.Prompts, "mcp_everything__simple-prompt") || got.PromptMessages == 0 {
			t.Errorf("prompts %v, messages %d", got.Prompts, got.PromptMessages)
		}
		if got.Filtered.Code != -32602 {
			t.Errorf("a filtered tool answered %+v", got.Filtered)
		}
		if !got.ListChanged || !slices.Contains(got.ToolsAfter, "mcp_grow__fresh") {
			t.Errorf("list_changed %v, tools after %v: want the notification and mcp_grow__fresh", got.ListChanged, got.ToolsAfter)
		}
		if r := presetCall(t, s, "mix", got.SessionID, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("ended session answered %d %s", r.Status, r.Body)
		}
	})

	t.Run("mcp-go's client at 2025-11-25", func(t *testing.T) {
		c, err := mcpclient.NewStreamableHttpClient(presetURL(s, "mix"), transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + fedAPIKey}),
			transport.WithContinuousListening()) //nolint:staticcheck // the session era's GET stream, which this subtest drives
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var mu sync.Mutex
		notes := map[string]int{}
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			mu.Lock()
			notes[n.Method]++
			mu.Unlock()
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = "2025-11-25"
		init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-mcp-go", Version: "1"}
		res, err := c.Initialize(ctx, init)
		if err != nil || res.ProtocolVersion != "2025-11-25" || res.ServerInfo.Name != "zest-preset-mix" {
			t.Fatalf("initialize: %+v %v", res, err)
		}
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		if !slices.Contains(names, "mcp_memory__create_entities") || !slices.Contains(names, "lemonade_list_models") {
			t.Errorf("tools %v", names)
		}
		call := mcp.CallToolRequest{}
		call.Params.Name = "mcp_memory__create_entities"
		call.Params.Arguments = map[string]any{"entities": []map[string]any{{"name": "zest", "entityType": "gateway", "observations": []string{"aggregates presets"}}}}
		if r, err := c.CallTool(ctx, call); err != nil || r.IsError {
			t.Fatalf("create_entities: %+v %v", r, err)
		}
		call.Params.Name, call.Params.Arguments = "mcp_memory__read_graph", map[string]any{}
		if r, err := c.CallTool(ctx, call); err != nil || r.IsError || !strings.Contains(mcp.GetTextFromContent(r.Content[0]), "aggregates presets") {
			t.Fatalf("read_graph: %+v %v", r, err)
		}
		call.Params.Name, call.Params.Arguments = "mcp_everything__get-sum", map[string]any{"a": 2, "b": 3}
		if r, err := c.CallTool(ctx, call); err != nil || r.IsError || !strings.Contains(mcp.GetTextFromContent(r.Content[0]), "5") {
			t.Fatalf("get-sum: %+v %v", r, err)
		}
		rr := mcp.ReadResourceRequest{}
		rr.Params.URI = "demo://resource/static/document/architecture.md"
		if r, err := c.ReadResource(ctx, rr); err != nil || len(r.Contents) == 0 {
			t.Errorf("read a resource by its URI: %+v %v", r, err)
		}
		gp := mcp.GetPromptRequest{}
		gp.Params.Name, gp.Params.Arguments = "mcp_everything__args-prompt", map[string]string{"city": "Paris"}
		if r, err := c.GetPrompt(ctx, gp); err != nil || len(r.Messages) == 0 {
			t.Errorf("args-prompt: %+v %v", r, err)
		}
		call.Params.Name, call.Params.Arguments = "mcp_grow__add_tool", map[string]any{"name": "fresher"}
		if _, err := c.CallTool(ctx, call); err != nil {
			t.Fatal(err)
		}
		waitfor.NoError(t, 15*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if notes["notifications/tools/list_changed"] == 0 {
				return fmt.Errorf("no tools/list_changed yet (got %v)", notes)
			}
			return nil
		})
	})

	t.Run("mcp-go's client with its defaults, in 2026-07-28", func(t *testing.T) {
		// It probes with server/discover first, and drives the preset without a session.
		c := modernClient(t, presetURL(s, "mix"), "zest-preset-mix")
		tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"lemonade_list_models", "mcp_everything__echo", "mcp_memory__read_graph", "mcp_grow__echo"} {
			if !slices.ContainsFunc(tools.Tools, func(tl mcp.Tool) bool { return tl.Name == want }) {
				t.Errorf("tools/list lacks %s", want)
			}
		}
		// One tool of each provider: the built-in tools, and three stdio servers of the
		// session era (the tool host's), which get the request without the revision's _meta.
		for _, c2 := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"lemonade_list_models", map[string]any{}, "builtin-llm"},
			{"mcp_everything__echo", map[string]any{"message": "modern preset"}, "modern preset"},
			{"mcp_memory__read_graph", map[string]any{}, "entities"},
			{"mcp_grow__echo", map[string]any{"text": "grown"}, "grown"},
		} {
			if text := modernCall(t, c, c2.tool, c2.args); !strings.Contains(text, c2.want) {
				t.Errorf("%s answered %q, want %q in it", c2.tool, text, c2.want)
			}
		}
		// A prompt by its chat_name, and a resource by its URI.
		gp := mcp.GetPromptRequest{}
		gp.Params.Name, gp.Params.Arguments = "mcp_everything__args-prompt", map[string]string{"city": "Paris"}
		if r, err := c.GetPrompt(t.Context(), gp); err != nil || len(r.Messages) == 0 {
			t.Errorf("args-prompt: %+v %v", r, err)
		}
		rr := mcp.ReadResourceRequest{}
		rr.Params.URI = "demo://resource/static/document/architecture.md"
		if r, err := c.ReadResource(t.Context(), rr); err != nil || len(r.Contents) == 0 {
			t.Errorf("read a resource by its URI: %+v %v", r, err)
		}
	})

	t.Run("a provider that cannot start is left out, and named in _meta", func(t *testing.T) {
		sess, res := presetInit(t, s, "partly", fedAPIAuth)
		if instr, _ := res["instructions"].(string); !strings.Contains(instr, `"broken" (unavailable`) {
			t.Errorf("instructions %q", instr)
		}
		r := presetCall(t, s, "partly", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, fedAPIAuth)
		meta, _ := firstResult(t, r)["_meta"].(map[string]any)
		if names := toolNames(t, r); !slices.Contains(names, "mcp_memory__read_graph") || fmt.Sprint(meta["io.github.zestmcp/unavailable"]) != "[broken]" {
			t.Errorf("tools/list with a broken provider: %s", r.Body)
		}
		if !strings.Contains(s.Logs("zest-mcpgateway"), "server=broken") {
			t.Errorf("mcpgateway's log does not name the broken provider")
		}
	})

	t.Run("hidden servers, unknown presets, sessions", func(t *testing.T) {
		sess, res := presetInit(t, s, "secret", fedAPIAuth)
		if instr, _ := res["instructions"].(string); strings.Contains(instr, "hidden") {
			t.Errorf("instructions name the hidden server for an API key: %q", instr)
		}
		names := toolNames(t, presetCall(t, s, "secret", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, fedAPIAuth))
		if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mcp_hidden__") }) || !slices.Contains(names, "mcp_memory__read_graph") {
			t.Errorf("tools of secret with an API key: %v", names)
		}
		if r := presetCall(t, s, "secret", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp_hidden__echo","arguments":{"message":"x"}}}`, fedAPIAuth); !strings.Contains(string(r.Body), "Unknown tool") {
			t.Errorf("a hidden server's tool with an API key: %d %s", r.Status, r.Body)
		}
		asess, _ := presetInit(t, s, "secret", adminAuth)
		if names := toolNames(t, presetCall(t, s, "secret", asess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, adminAuth)); !slices.Contains(names, "mcp_hidden__get-env") {
			t.Errorf("tools of secret with the admin key: %v", names)
		}
		if r := do(t, "POST", presetURL(s, "nope"), sprintf(initBody, "2025-11-25"), append(mcpHeaders, fedAPIAuth)...); r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), `nope`) {
			t.Errorf("an unknown preset: %d %s", r.Status, r.Body)
		}
		if r := do(t, "POST", presetURL(s, "mix"), sprintf(initBody, "2025-11-25"), mcpHeaders...); r.Status != http.StatusUnauthorized {
			t.Errorf("no key: %d %s", r.Status, r.Body)
		}
		// Sessions are bound to their endpoint, and DELETE ends them.
		if r := presetCall(t, s, "mix", sess, `{"jsonrpc":"2.0","id":4,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("a session of secret on mix: %d %s", r.Status, r.Body)
		}
		if r := mcpCall(t, s, sess, `{"jsonrpc":"2.0","id":4,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("a session of secret on /mcp: %d %s", r.Status, r.Body)
		}
		if r := do(t, "DELETE", presetURL(s, "secret"), "", "Mcp-Session-Id: "+sess, fedAPIAuth); r.Status != 200 {
			t.Fatalf("DELETE: %d %s", r.Status, r.Body)
		}
		if r := presetCall(t, s, "secret", sess, `{"jsonrpc":"2.0","id":5,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("an ended session: %d %s", r.Status, r.Body)
		}
	})
}

// TestMCPPreset: with ZEST_MCP_PRESET, /mcp serves the preset: while it is missing every
// initialize says so, then its providers are served in place of the five built-in tools.
func TestMCPPreset(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_MCP_PRESET=front",
		"E2E_MEMORY_FILE="+filepath.Join(t.TempDir(), "memory.jsonl"))
	r := do(t, "POST", s.URL+"/mcp", sprintf(initBody, "2025-11-25"), append(mcpHeaders, fedAPIAuth)...)
	if !strings.Contains(string(r.Body), "ZEST_MCP_PRESET") || !strings.Contains(string(r.Body), `front`) || r.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize of /mcp before the preset exists: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(s.Logs("zest-mcpgateway"), "ZEST_MCP_PRESET") {
		t.Errorf("mcpgateway's log does not name ZEST_MCP_PRESET:\n%s", s.Logs("zest-mcpgateway"))
	}
	registerPresetProviders(t, s)
	putPreset(t, s, "front", "memory", "lemonade")
	sess, res := mcpInit(t, s, "2025-11-25", fedAPIAuth)
	if info, _ := res["serverInfo"].(map[string]any); info["name"] != "zest-preset-front" {
		t.Errorf("serverInfo of /mcp %v", res["serverInfo"])
	}
	names := toolNames(t, mcpCall(t, s, sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, fedAPIAuth))
	if !slices.Contains(names, "mcp_memory__read_graph") || !slices.Contains(names, "lemonade_list_models") || len(names) <= 5 {
		t.Errorf("tools of /mcp: %v", names)
	}
	// The official SDK's own /mcp client works on it (it calls lemonade_list_models).
	out, err := exec.Command("node", filepath.Join(repoRoot(), "scripts", "peers", "sdk-client.mjs"), s.URL+"/mcp", fedAPIKey).Output()
	if err != nil || !strings.Contains(string(out), `"serverName":"zest-preset-front"`) || !strings.Contains(string(out), "mcp_memory__read_graph") {
		t.Errorf("sdk-client on /mcp: %v %s", err, out)
	}
	if r := presetCall(t, s, "front", sess, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
		t.Errorf("a session of /mcp on /mcp/presets/front: %d %s", r.Status, r.Body)
	}
	// mcp-go's client with its defaults drives /mcp in 2026-07-28: the preset's tools, one of
	// each provider called.
	c := modernClient(t, s.URL+"/mcp", "zest-preset-front")
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl mcp.Tool) bool { return tl.Name == "mcp_memory__read_graph" }) {
		t.Fatalf("tools/list of /mcp in 2026-07-28: %v %v", tools, err)
	}
	if text := modernCall(t, c, "mcp_memory__read_graph", map[string]any{}); !strings.Contains(text, "entities") {
		t.Errorf("read_graph through /mcp: %q", text)
	}
	if text := modernCall(t, c, "lemonade_list_models", map[string]any{}); !strings.Contains(text, "builtin-llm") {
		t.Errorf("lemonade_list_models through /mcp: %q", text)
	}
}

// modernClient starts mark3labs/mcp-go's client with its defaults (server/discover first)
// against url with the API key, and checks that it negotiated 2026-07-28 without a session
// with server.
func modernClient(t *testing.T, url, server string) *mcpclient.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + fedAPIKey}))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tr)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-mcp-go-defaults", Version: "1"}
	res, err := c.Initialize(t.Context(), init)
	if err != nil || res.ProtocolVersion != "2026-07-28" || res.ServerInfo.Name != server || tr.GetSessionId() != "" {
		t.Fatalf("initialize with mcp-go's defaults at %s: %+v %v (session %q): want 2026-07-28 with %s, no session", url, res, err, tr.GetSessionId(), server)
	}
	return c
}

// modernCall calls tool and returns its first text, failing the test on an error or a result
// that is not "complete".
func modernCall(t *testing.T, c *mcpclient.Client, tool string, args map[string]any) string {
	t.Helper()
	call := mcp.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = tool, args
	r, err := c.CallTool(t.Context(), call)
	if err != nil || r.IsError || len(r.Content) == 0 || r.ResultType != "complete" {
		t.Fatalf("%s: %+v %v", tool, r, err)
	}
	return mcp.GetTextFromContent(r.Content[0])
}

// TestPresetConformance runs the official conformance suite (0.1.16, active scenarios)
// against /mcp/presets/conf, whose one provider is server-everything: every protocol-level
// scenario must pass; the baseline lists those that cannot apply (the suite's fixture names,
// which server-everything does not have, under their chat_name here), and the run fails if
// one of them starts passing.
func TestPresetConformance(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	putPreset(t, s, "conf", "everything")
	runConformance(t, presetURL(s, "conf"), "active", "conformance-preset-baseline.yml")
}

// TestPresetRelaysSampling: a provider's sampling/createMessage, during a call made through a
// preset with two servers, reaches the TS SDK client that made the call, and its answer goes
// back to that provider (the relay id names it).
func TestPresetRelaysSampling(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "E2E_MEMORY_FILE="+filepath.Join(t.TempDir(), "memory.jsonl"))
	registerPresetProviders(t, s)
	registerServer(t, s, map[string]any{"id": "fixture", "command": conformanceFixture(t)})
	putPreset(t, s, "ask", "memory", "fixture")
	got := samplingClientAt(t, presetURL(s, "ask"), "mcp_fixture__test_sampling", `{"prompt":"what is a preset?"}`)
	if got.IsError || got.Text != "LLM response: sampled by the e2e client" || len(got.Sampled) != 1 || got.Sampled[0] != "what is a preset?" {
		t.Fatalf("sampling through /mcp/presets/ask: %+v", got)
	}
}

// TestPresetConformance2026 runs conformance 0.2.0-alpha.12 with --spec-version 2026-07-28
// against /mcp/presets/conf26, whose providers are our stdio conformance fixture (through
// the tool host, a session-era upstream) and the built-in tools. Every protocol-level
// scenario must pass, and so must those the fixture's resources answer (their URIs are kept);
// the baseline lists the scenarios that cannot apply, each with its reason (the fixture's
// tools and prompts are served under their chat_name), and server-stateless and caching are
// checked check by check.
func TestPresetConformance2026(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "fixture", "command": conformanceFixture(t)})
	putPreset(t, s, "conf26", "fixture", "lemonade")
	dir := t.TempDir()
	out := conformanceNext(t, presetURL(s, "conf26"), "2026-07-28", "conformance-2026-preset-baseline.yml", dir)
	for _, sc := range []string{"tools-list", "server-sse-multiple-streams", "resources-list", "resources-read-text", "resources-read-binary",
		"resources-templates-read", "prompts-list", "dns-rebinding-protection", "caching", "http-header-validation",
		"input-required-result-unsupported-methods", "input-required-result-validate-input"} {
		if !strings.Contains(out, "✓ "+sc+":") {
			t.Fatalf("%s did not pass:\n%s", sc, out)
		}
	}
	failing := conformanceFailures(t, dir)
	got, want := failing["server-stateless"], []string{"sep-2575-http-server-no-independent-requests-on-stream", "sep-2575-missing-capability-http-400",
		"sep-2575-server-no-log-without-loglevel", "sep-2575-server-rejects-undeclared-capability"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("server-stateless: failing checks %v, want only the diagnostic-tool checks %v", got, want)
	}
	if f, ran := failing["caching"]; !ran || len(f) > 0 {
		t.Errorf("caching: ran %v, failing checks %v", ran, f)
	}

	// A provider's server request during a modern client's call comes back as an
	// input_required result (TestPresetBridgeModernClientOfStdioProvider follows it through):
	// the client sees no request of the server, and the fixture's call waits parked.
	r := do(t, "POST", presetURL(s, "conf26"),
		`{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"mcp_fixture__test_sampling","arguments":{"prompt":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`,
		"Content-Type: application/json", "Accept: application/json, text/event-stream", "MCP-Protocol-Version: 2026-07-28",
		"Mcp-Method: tools/call", "Mcp-Name: mcp_fixture__test_sampling")
	if body := string(r.Body); r.Status != http.StatusOK || strings.Contains(body, `"jsonrpc":"2.0","id":"zr.`) || !strings.Contains(body, `"id":"s1"`) ||
		!strings.Contains(body, `"resultType":"input_required"`) || !strings.Contains(body, `"method":"sampling/createMessage"`) || !strings.Contains(body, `"requestState":"zs.`) {
		t.Errorf("test_sampling from a modern client: %d %s", r.Status, r.Body)
	}
}
