package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestServerWithoutTools: servers that declare prompts and no tools — our stdio fixture with
// -prompts-only (through the tool host), and a Streamable HTTP mcp-go server driven in
// 2026-07-28 — pass the admin API's test, register and connect, serve their prompts on
// /mcp/servers/{id} (tools/list is -32601 there: not declared), and are providers of a preset
// beside the built-in tools.
func TestServerWithoutTools(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	srv := server.NewMCPServer("prompts-over-http", "1.0.0", server.WithPromptCapabilities(false))
	srv.AddPrompt(mcp.NewPrompt("hello"), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("hi", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("hello from http"))}), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	remote := map[string]any{"id": "remoteprompts", "transport": "streamable-http", "url": hs.URL + "/mcp"}
	local := map[string]any{"id": "localprompts", "command": conformanceFixture(t), "args": []string{"-prompts-only"}}

	for _, cfg := range []map[string]any{remote, local} {
		probe := map[string]any{}
		for k, v := range cfg {
			probe[k] = v
		}
		if r := admin(t, s, "POST", "/servers/test", jsonBody(t, map[string]any{"server": probe})); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"prompts"`) {
			t.Fatalf("admin test of %v: %d %s", cfg["id"], r.Status, r.Body)
		}
		registerServer(t, s, cfg)
	}
	for _, c := range []struct{ id, prompt, text string }{
		{"remoteprompts", "hello", "hello from http"},
		{"localprompts", "test_simple_prompt", "This is a simple prompt for testing."},
	} {
		sess, res := fedInit(t, s, c.id, "2025-11-25", fedAPIAuth)
		if caps, _ := res["capabilities"].(map[string]any); caps["prompts"] == nil || caps["tools"] != nil {
			t.Errorf("%s: capabilities %v", c.id, caps)
		}
		if r := fedCall(t, s, c.id, sess, `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"`+c.prompt+`"}}`, fedAPIAuth); !strings.Contains(string(r.Body), c.text) {
			t.Errorf("%s prompts/get: %d %s", c.id, r.Status, r.Body)
		}
		if r := fedCall(t, s, c.id, sess, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, fedAPIAuth); !strings.Contains(string(r.Body), "-32601") {
			t.Errorf("%s tools/list: %d %s", c.id, r.Status, r.Body)
		}
		if r := admin(t, s, "GET", "/servers/"+c.id, ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"connected":true`) {
			t.Errorf("%s state: %d %s", c.id, r.Status, r.Body)
		}
	}
	putPreset(t, s, "talk", "lemonade", "remoteprompts", "localprompts")
	sess, _ := presetInit(t, s, "talk", fedAPIAuth)
	if names := toolNames(t, presetCall(t, s, "talk", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, fedAPIAuth)); !slices.Contains(names, "lemonade_list_models") || len(names) != len(builtinTools) {
		t.Errorf("tools of the preset: %v (the built-in tools only)", names)
	}
	r := presetCall(t, s, "talk", sess, `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`, fedAPIAuth)
	if !strings.Contains(string(r.Body), "mcp_remoteprompts__hello") || !strings.Contains(string(r.Body), "mcp_localprompts__test_simple_prompt") || strings.Contains(string(r.Body), "unavailable") {
		t.Errorf("prompts of the preset: %s", r.Body)
	}
}
