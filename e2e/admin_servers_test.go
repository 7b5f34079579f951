package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smoke runs Lemonade's external-MCP smoke flow: upsert → connect → the tool is listed
// under its chat_name → call it → disconnect → delete.
func smoke(t *testing.T, s *Suite, config map[string]any, tool string, args map[string]any, wantText string) {
	t.Helper()
	id := config["id"].(string)
	r := admin(t, s, "POST", "/servers", jsonBody(t, config))
	if r.Status != 200 || r.JSON(t)["server"].(map[string]any)["id"] != id {
		t.Fatalf("upsert: %d %s", r.Status, r.Body)
	}
	r = admin(t, s, "POST", "/servers/"+id+"/connect", "")
	st, _ := r.JSON(t)["server"].(map[string]any)
	if r.Status != 200 || st["connected"] != true || st["status"] != "connected" || len(asSlice(st["tools"])) == 0 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	r = admin(t, s, "GET", "/tools", "")
	chat := "mcp_" + id + "__" + tool
	var entry map[string]any
	for _, x := range asSlice(r.JSON(t)["tools"]) {
		if e := x.(map[string]any); e["chat_name"] == chat {
			entry = e
		}
	}
	if entry == nil || entry["server_id"] != id || entry["name"] != tool || entry["inputSchema"] == nil ||
		entry["openai_tool"].(map[string]any)["function"].(map[string]any)["name"] != chat {
		t.Fatalf("%s not in /tools: %s", chat, r.Body)
	}
	r = admin(t, s, "POST", "/servers/"+id+"/tools/call", jsonBody(t, map[string]any{"name": tool, "arguments": args}))
	if r.Status != 200 {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	res := m["result"].(map[string]any)
	text := res["content"].([]any)[0].(map[string]any)["text"]
	if m["server_id"] != id || m["tool"] != tool || text != wantText {
		t.Fatalf("call answered %s", r.Body)
	}
	r = admin(t, s, "POST", "/servers/"+id+"/disconnect", "")
	if r.Status != 200 || r.JSON(t)["server"].(map[string]any)["connected"] != false {
		t.Fatalf("disconnect: %d %s", r.Status, r.Body)
	}
	r = admin(t, s, "DELETE", "/servers/"+id, "")
	if r.Status != 200 || r.JSON(t)["removed"] != id {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "DELETE", "/servers/"+id, ""); r.Status != 404 {
		t.Fatalf("second delete: %d %s", r.Status, r.Body)
	}
}

func TestAdminSmokeFlows(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	peers := peersDir(t)
	t.Run("node stdio echo server", func(t *testing.T) {
		smoke(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peers, "echo-server.mjs")}},
			"echo", map[string]any{"text": "hello-mcp"}, "hello-mcp")
	})
	t.Run("server-everything over stdio", func(t *testing.T) {
		smoke(t, s, map[string]any{"id": "everything", "command": "node",
			"args": []string{filepath.Join(peers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")}},
			"echo", map[string]any{"message": "hello-mcp"}, "Echo: hello-mcp")
	})
	t.Run("server-everything behind supergateway over streamable-http", func(t *testing.T) {
		url := startSupergateway(t)
		smoke(t, s, map[string]any{"id": "sg", "transport": "streamable-http", "url": url},
			"echo", map[string]any{"message": "hello-mcp"}, "Echo: hello-mcp")
	})
	t.Run("test connects without saving", func(t *testing.T) {
		r := admin(t, s, "POST", "/servers/test", jsonBody(t, map[string]any{"server": map[string]any{
			"id": "probe", "command": "node", "args": []string{filepath.Join(peers, "echo-server.mjs")}}}))
		st, _ := r.JSON(t)["server"].(map[string]any)
		if r.Status != 200 || st["test_only"] != true || len(asSlice(st["tools"])) != 1 {
			t.Fatalf("test: %d %s", r.Status, r.Body)
		}
		if r := admin(t, s, "GET", "/servers", ""); len(asSlice(r.JSON(t)["servers"])) != 0 {
			t.Fatalf("test saved something: %s", r.Body)
		}
	})
}

func TestAdminBadInput(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	peers := peersDir(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"invalid id", "POST", "/servers", `{"id":"bad id","command":"node"}`, 400, "id \"bad id\" must match"},
		{"over-long id", "POST", "/servers", `{"id":"` + strings.Repeat("x", 97) + `","command":"node"}`, 400, "must match [A-Za-z0-9_.-]{1,96}"},
		{"raw env", "POST", "/servers", `{"id":"a","command":"node","env":{"GITHUB_TOKEN":"ghp_raw_secret_value"}}`, 400, "env GITHUB_TOKEN must be a ${VARIABLE} reference; raw values are rejected"},
		{"raw bearer", "POST", "/servers", `{"id":"a","transport":"http","url":"https://h/mcp","bearer_token":"sk-raw"}`, 400, "bearer_token must be a ${VARIABLE} reference"},
		{"wrong type", "POST", "/servers", `{"id":"a","command":"node","args":"x"}`, 400, "args must be an array of strings, not a string"},
		{"timeout out of range", "POST", "/servers", `{"id":"a","command":"node","timeout_ms":10}`, 400, "timeout_ms 10 is out of range"},
		{"both spellings", "POST", "/servers", `{"id":"a","command":"node","timeout_ms":2000,"timeoutMs":2000}`, 400, "timeout_ms and timeoutMs are the same field"},
		{"stdio field on http", "POST", "/servers", `{"id":"a","transport":"http","url":"https://h/mcp","args":["x"]}`, 400, "args is a stdio field"},
		{"http field on stdio", "POST", "/servers", `{"id":"a","command":"node","url":"https://h/mcp"}`, 400, "url is a streamable-http field"},
		{"credentials in url", "POST", "/servers", `{"id":"a","transport":"http","url":"https://u:p@h/mcp"}`, 400, "must not contain credentials"},
		{"fragment in url", "POST", "/servers", `{"id":"a","transport":"http","url":"https://h/mcp#f"}`, 400, "must not contain a fragment"},
		{"plain http remote", "POST", "/servers", `{"id":"a","transport":"http","url":"http://example.com/mcp"}`, 400, "plain http to example.com"},
		{"not JSON", "POST", "/servers", `{"id":`, 400, ""},
		{"delete unknown", "DELETE", "/servers/nope", "", 404, "nope"},
		{"disconnect unknown", "POST", "/servers/nope/disconnect", "", 404, "nope"},
		{"connect unknown", "POST", "/servers/nope/connect", "", 404, "nope"},
		{"refresh-tools unknown", "POST", "/servers/nope/refresh-tools", "", 404, "nope"},
		{"call on unknown", "POST", "/servers/nope/tools/call", `{"name":"x"}`, 404, "nope"},
		{"call without name", "POST", "/servers/nope/tools/call", `{"arguments":{}}`, 400, "name is required"},
		{"wrong method", "PUT", "/servers", `{}`, 405, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := admin(t, s, c.method, c.path, c.body)
			if r.Status != c.status {
				t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, r.Status, r.Body, c.status)
			}
			if msg := errMessage(t, r); !strings.Contains(msg, c.msg) {
				t.Fatalf("message %q lacks %q", msg, c.msg)
			}
		})
	}

	t.Run("body over 1 MiB", func(t *testing.T) {
		big := `{"id":"a","command":"node","args":["` + strings.Repeat("x", 1<<20) + `"]}`
		r := admin(t, s, "POST", "/servers", big)
		if r.Status != 413 || !strings.Contains(errMessage(t, r), "1 MiB") {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("connecting a disabled server", func(t *testing.T) {
		admin(t, s, "POST", "/servers", `{"id":"off","command":"node","enabled":false}`)
		// A state of the server's configuration, not a failure of the server: 409, saying how
		// to enable it (it was 502, as a server that failed).
		const says = `MCP server "off" is disabled: enable it (POST /internal/mcp/servers with {"id":"off","enabled":true}`
		for _, call := range [][2]string{{"/servers/off/connect", ""}, {"/servers/off/tools/call", `{"name":"echo","arguments":{}}`}} {
			r := admin(t, s, "POST", call[0], call[1])
			if msg := errMessage(t, r); r.Status != 409 || !strings.HasPrefix(msg, says) || strings.Count(msg, "disabled") != 1 {
				t.Fatalf("%s: %d %s", call[0], r.Status, r.Body)
			}
		}
		if st := admin(t, s, "GET", "/servers", "").JSON(t)["servers"].([]any)[0].(map[string]any); st["status"] != "disabled" {
			t.Fatalf("status %v", st["status"])
		}
	})
	t.Run("calling a tool of a server whose command does not exist", func(t *testing.T) {
		admin(t, s, "POST", "/servers", `{"id":"ghost","command":"/nonexistent/zest-ghost-server"}`)
		r := admin(t, s, "POST", "/servers/ghost/tools/call", `{"name":"echo","arguments":{}}`)
		if r.Status != 502 || !strings.Contains(errMessage(t, r), "no such file or directory") {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("a tool that outlasts timeout_ms is 504, said once", func(t *testing.T) {
		registerServer(t, s, map[string]any{"id": "slow", "command": "node", "timeout_ms": 1000,
			"args": []string{filepath.Join(peers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")}})
		r := admin(t, s, "POST", "/servers/slow/tools/call", `{"name":"trigger-long-running-operation","arguments":{"duration":30,"steps":1}}`)
		msg := errMessage(t, r)
		if r.Status != 504 || !strings.Contains(msg, "deadline exceeded") || strings.Count(msg, "deadline exceeded") != 1 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("a server with a url alone is an HTTP server", func(t *testing.T) {
		// As Lemonade's mcp_servers.json takes it (no transport, no command).
		if r := admin(t, s, "POST", "/servers", `{"id":"remote","url":"https://tools.example/mcp"}`); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if got := admin(t, s, "GET", "/servers/remote", "").JSON(t)["server"].(map[string]any); got["transport"] != "streamable-http" || got["url"] != "https://tools.example/mcp" {
			t.Fatalf("stored as %v", got)
		}
	})
	t.Run("a refused raw secret is in no byte of the registry file", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(s.DataDir, "registry.db"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("ghp_raw_secret_value")) || bytes.Contains(b, []byte("sk-raw")) {
			t.Fatal("registry.db holds a refused secret")
		}
	})
	_ = peers
}

func TestAdminKeys(t *testing.T) {
	open := startSuite(t)
	for _, m := range []string{"GET", "POST", "DELETE", "OPTIONS"} {
		for _, p := range []string{"/servers", "/tools", "/servers/x/connect", "/servers/x"} {
			r := do(t, m, open.URL+"/internal/mcp"+p, "", adminAuth)
			if r.Status != 403 {
				t.Errorf("no key configured: %s %s = %d", m, p, r.Status)
			}
		}
	}
	keyed := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	for _, auth := range []string{"", "Authorization: Bearer wrong"} {
		r := do(t, "GET", keyed.URL+"/internal/mcp/servers", "", auth)
		if r.Status != 401 {
			t.Errorf("key %q: %d", auth, r.Status)
		}
	}
}

func TestUpsertSurvivesSIGKILLOfMcpgateway(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	peers := peersDir(t)
	cfg := jsonBody(t, map[string]any{"id": "keep", "command": "node", "args": []string{filepath.Join(peers, "echo-server.mjs")},
		"env": map[string]any{"ECHO_TOKEN": "${TOOLHOST_E2E_TOKEN}"}})
	if r := admin(t, s, "POST", "/servers", cfg); r.Status != 200 {
		t.Fatalf("upsert: %d %s", r.Status, r.Body)
	}
	s.Kill("zest-mcpgateway", syscall.SIGKILL)
	s.Start("zest-mcpgateway")
	s.WaitHealthy()
	r := admin(t, s, "GET", "/servers", "")
	servers := asSlice(r.JSON(t)["servers"])
	if len(servers) != 1 || servers[0].(map[string]any)["id"] != "keep" ||
		servers[0].(map[string]any)["env"].(map[string]any)["ECHO_TOKEN"] != "${TOOLHOST_E2E_TOKEN}" {
		t.Fatalf("after SIGKILL and restart: %s", r.Body)
	}
	// An enabled server reconnects on first use.
	r = admin(t, s, "POST", "/servers/keep/tools/call", `{"name":"echo","arguments":{"text":"still here"}}`)
	if r.Status != 502 || !strings.Contains(errMessage(t, r), "Required MCP environment variable is not set: TOOLHOST_E2E_TOKEN") {
		t.Fatalf("missing variable on first use: %d %s", r.Status, r.Body)
	}
}

func TestToolhostRestartIsRecovered(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	peers := peersDir(t)
	admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peers, "echo-server.mjs")}}))
	call := func() Response {
		return admin(t, s, "POST", "/servers/echo/tools/call", `{"name":"echo","arguments":{"text":"x"}}`)
	}
	if r := call(); r.Status != 200 {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	began := time.Now()
	s.Kill("zest-toolhost", syscall.SIGKILL)
	s.Start("zest-toolhost")
	s.WaitHealthy()
	t.Logf("tool host back after %v", time.Since(began))
	if r := call(); r.Status != 200 {
		t.Fatalf("call after the tool host restarted: %d %s\n%s", r.Status, r.Body, s.Logs("zest-mcpgateway"))
	}
	t.Logf("first call answered %v after the kill", time.Since(began))
}

// TestDisconnectHolds: a server an administrator disconnected stays disconnected — a call is
// 409 saying how to connect it again, and its status stays "disconnected" — until the
// administrator connects it. (A call used to reconnect it silently.)
func TestDisconnectHolds(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	call := func() Response {
		return admin(t, s, "POST", "/servers/echo/tools/call", `{"name":"echo","arguments":{"text":"hi"}}`)
	}
	if r := call(); r.Status != 200 {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/servers/echo/disconnect", ""); r.Status != 200 {
		t.Fatalf("disconnect: %d %s", r.Status, r.Body)
	}
	r := call()
	if msg := errMessage(t, r); r.Status != 409 || msg != `MCP server "echo" was disconnected by an administrator: connect it (POST /internal/mcp/servers/echo/connect, or the console's Servers view) to call it again` {
		t.Fatalf("a call after disconnect: %d %s", r.Status, r.Body)
	}
	if st := admin(t, s, "GET", "/servers/echo", "").JSON(t)["server"].(map[string]any); st["status"] != "disconnected" {
		t.Fatalf("status after a refused call: %v", st["status"])
	}
	if r := admin(t, s, "POST", "/servers/echo/connect", ""); r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	if r := call(); r.Status != 200 || !strings.Contains(string(r.Body), "hi") {
		t.Fatalf("a call after connect: %d %s", r.Status, r.Body)
	}
}
