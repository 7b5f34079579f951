package e2e

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/etcdtest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// followLimit is how soon a registry write through one replica must apply on the other.
const followLimit = time.Second

// withinLimit waits until ok holds, failing when followLimit has passed since began (the
// write); it logs how long after the write it held.
func withinLimit(t *testing.T, what string, began time.Time, ok func() bool) {
	t.Helper()
	waitfor.True(t, followLimit-time.Since(began), what, ok)
	t.Logf("%s: %v after the write", what, time.Since(began).Round(100*time.Microsecond))
}

// getStream opens the GET stream of a session of url and returns its lines.
func getStream(t *testing.T, url, session string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// TestRegistryFollowedAcrossReplicas: two edges, each in front of its own mcpgateway, both
// on one etcd (ZEST_REGISTRY). A server registered through edge A is listed and callable
// through edge B within a second; a change of its tool filters through B applies on A within
// a second, and A's sessions of the server are told their tools changed; a preset changed
// through A tells B's sessions of it; deleted through A, B answers 404. An /mcp session's log level set through A holds on B, and the session ended
// through A is refused by B at once.
func TestRegistryFollowedAcrossReplicas(t *testing.T) {
	// An HTTP server both replicas connect to, each with its own session. Started first, so
	// that it is closed last: its Close waits for the replicas' GET streams to end.
	up := server.NewMCPServer("shared", "1.0.0", server.WithToolCapabilities(true))
	for _, name := range []string{"add", "secret"} {
		up.AddTool(mcp.NewTool(name, mcp.WithString("text")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name + ":" + req.GetString("text", "")), nil
		})
	}
	hs := httptest.NewServer(server.NewStreamableHTTPServer(up))
	t.Cleanup(hs.Close)
	etcd := etcdtest.Start(t, 1)
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey,
		"ZEST_REGISTRY=etcd://"+strings.Join(etcd.Endpoints(), ",")+"/e2e-follow/")
	a, b := &Suite{URL: r.urls[0], t: t}, &Suite{URL: r.urls[1], t: t}
	const id = "shared"
	cfg := map[string]any{"id": id, "transport": "streamable-http", "url": hs.URL + "/mcp", "timeout_ms": 10000, "enabled": true, "expose": true}

	// Registered through A: listed and callable through B.
	wrote := time.Now()
	if resp := admin(t, a, "POST", "/servers", jsonBody(t, cfg)); resp.Status != 200 {
		t.Fatalf("upsert through A: %d %s", resp.Status, resp.Body)
	}
	withinLimit(t, "registered through A: listed and called through B", wrote, func() bool {
		if resp := admin(t, b, "GET", "/servers", ""); !strings.Contains(string(resp.Body), `"`+id+`"`) {
			return false
		}
		resp := callTool(t, b, id, "secret", map[string]any{"text": "x"})
		return resp.Status == 200 && resultText(t, resp) == "secret:x"
	})

	// A session of the server on A, listening: a change through B reaches it.
	fed, _ := fedInit(t, a, id, "2025-11-25")
	lines := getStream(t, fedURL(a, id), fed)
	if l := <-lines; l != ": stream open" {
		t.Fatalf("first line of A's GET stream: %q", l)
	}
	cfg["tools_deny"] = []string{"secret"}
	wrote = time.Now()
	if resp := admin(t, b, "POST", "/servers", jsonBody(t, cfg)); resp.Status != 200 {
		t.Fatalf("filters through B: %d %s", resp.Status, resp.Body)
	}
	withinLimit(t, "filters changed through B: applied on A", wrote, func() bool {
		var names []string
		for _, x := range asSlice(admin(t, a, "GET", "/tools", "").JSON(t)["tools"]) {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		return !slices.Contains(names, "secret") && slices.Contains(names, "add") &&
			callTool(t, a, id, "secret", map[string]any{}).Status == 400
	})
	withinLimit(t, "filters changed through B: A's session told", wrote, func() bool {
		for {
			select {
			case l := <-lines:
				if strings.Contains(l, "notifications/tools/list_changed") {
					return true
				}
			default:
				return false
			}
		}
	})
	listed := fedCall(t, a, id, fed, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if strings.Contains(string(listed.Body), `"secret"`) || !strings.Contains(string(listed.Body), `"add"`) {
		t.Fatalf("tools/list of A's session after the change: %s", listed.Body)
	}

	// A preset session on B, listening: the preset changed through A, B's stream is told.
	wrote = time.Now()
	if resp := admin(t, a, "POST", "/presets", `{"id":"both","mcp_server_ids":["lemonade"]}`); resp.Status != 200 {
		t.Fatalf("preset through A: %d %s", resp.Status, resp.Body)
	}
	var preset string
	withinLimit(t, "preset written through A: a session of it through B", wrote, func() bool {
		r := do(t, "POST", presetURL(b, "both"), sprintf(initBody, "2025-11-25"), mcpHeaders...)
		preset = r.Header.Get("Mcp-Session-Id")
		return r.Status == 200 && preset != ""
	})
	plines := getStream(t, presetURL(b, "both"), preset)
	if l := <-plines; l != ": stream open" {
		t.Fatalf("first line of B's preset stream: %q", l)
	}
	wrote = time.Now()
	if resp := admin(t, a, "POST", "/presets", `{"id":"both","mcp_server_ids":["lemonade","`+id+`"]}`); resp.Status != 200 {
		t.Fatalf("preset changed through A: %d %s", resp.Status, resp.Body)
	}
	withinLimit(t, "preset changed through A: B's preset session told", wrote, func() bool {
		for {
			select {
			case l := <-plines:
				if strings.Contains(l, "notifications/tools/list_changed") {
					return true
				}
			default:
				return false
			}
		}
	})
	if names := toolNames(t, presetCall(t, b, "both", preset, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)); !slices.Contains(names, "mcp_"+id+"__add") {
		t.Fatalf("tools/list of B's preset session after the change: %v", names)
	}

	// Deleted through A: B answers 404.
	wrote = time.Now()
	if resp := admin(t, a, "DELETE", "/servers/"+id, ""); resp.Status != 200 {
		t.Fatalf("delete through A: %d %s", resp.Status, resp.Body)
	}
	withinLimit(t, "deleted through A: 404 through B", wrote, func() bool {
		return admin(t, b, "GET", "/servers/"+id, "").Status == 404 && callTool(t, b, id, "add", map[string]any{}).Status == 404
	})

	// An /mcp session: its log level set through A holds on B; ended through A, B refuses it.
	session, _ := mcpInit(t, a, "2025-11-25")
	if resp := mcpCall(t, a, session, `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}`); resp.Status != 200 || resp.JSON(t)["error"] != nil {
		t.Fatalf("setLevel through A: %d %s", resp.Status, resp.Body)
	}
	chat := mcpCall(t, b, session, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lemonade_chat","arguments":{"messages":[{"role":"user","content":"log me"}]}}}`)
	if body := string(chat.Body); !strings.Contains(body, `"method":"notifications/message"`) || !strings.Contains(body, `"level":"info"`) {
		t.Fatalf("a chat through B after setLevel info through A: %d %s", chat.Status, body)
	}
	if resp := do(t, "DELETE", a.URL+"/mcp", "", "Mcp-Session-Id: "+session); resp.Status != 200 {
		t.Fatalf("DELETE through A: %d %s", resp.Status, resp.Body)
	}
	if resp := mcpCall(t, b, session, `{"jsonrpc":"2.0","id":5,"method":"ping"}`); resp.Status != 404 {
		t.Fatalf("the ended session through B: %d %s", resp.Status, resp.Body)
	}
}
