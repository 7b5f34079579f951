package e2e

import (
	"strings"
	"testing"
)

// TestOneSessionAcrossReplicas: a session opened on one edge is served by both, and still
// after both front ends restart.
func TestOneSessionAcrossReplicas(t *testing.T) {
	r := startReplicas(t)
	s0 := &Suite{URL: r.urls[0], t: t}
	session, _ := mcpInit(t, s0, "2025-11-25")
	callVia := func(u string) {
		t.Helper()
		s := &Suite{URL: u, t: t}
		r := mcpCall(t, s, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`)
		if r.Status != 200 || !strings.Contains(string(r.Body), "builtin-llm") {
			t.Fatalf("via %s: %d %s", u, r.Status, r.Body)
		}
	}
	for i := range 6 {
		callVia(r.urls[i%2])
	}
	r.restart(t)
	for i := range 6 {
		callVia(r.urls[i%2])
	}
}

// TestPresetSessionAcrossReplicas: a session of /mcp/presets/{id} is served by both replicas
// (each has the preset in its registry), and still after both front ends restart; /mcp with
// ZEST_MCP_PRESET likewise.
func TestPresetSessionAcrossReplicas(t *testing.T) {
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_MCP_PRESET=both")
	for _, u := range r.urls {
		if resp := admin(t, &Suite{URL: u, t: t}, "POST", "/presets", `{"id":"both","mcp_server_ids":["lemonade"]}`); resp.Status != 200 {
			t.Fatalf("preset via %s: %d %s", u, resp.Status, resp.Body)
		}
	}
	s0 := &Suite{URL: r.urls[0], t: t}
	preset, _ := presetInit(t, s0, "both")
	own, _ := mcpInit(t, s0, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`
	callVia := func(u string) {
		t.Helper()
		s := &Suite{URL: u, t: t}
		if resp := presetCall(t, s, "both", preset, call); resp.Status != 200 || !strings.Contains(string(resp.Body), "builtin-llm") {
			t.Fatalf("preset via %s: %d %s", u, resp.Status, resp.Body)
		}
		if resp := mcpCall(t, s, own, call); resp.Status != 200 || !strings.Contains(string(resp.Body), "builtin-llm") {
			t.Fatalf("/mcp via %s: %d %s", u, resp.Status, resp.Body)
		}
	}
	for i := range 4 {
		callVia(r.urls[i%2])
	}
	r.restart(t)
	for i := range 4 {
		callVia(r.urls[i%2])
	}
}
