package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// toolEntry finds a tool of GET /internal/mcp/tools by chat_name.
func toolEntry(t *testing.T, s *Suite, chatName string) map[string]any {
	t.Helper()
	for _, x := range asSlice(admin(t, s, "GET", "/tools", "").JSON(t)["tools"]) {
		if e := x.(map[string]any); e["chat_name"] == chatName {
			return e
		}
	}
	return nil
}

// TestExternalMCPClientHost drives the MCP client host over the admin API the way
// Lemonade's external-MCP smoke test does, against a Streamable HTTP upstream as demanding
// as its mock (lib/mcptest: a ping with the id of the outstanding tools/list, roots/list,
// sampling and elicitation requests whose answers it checks before it lists its tools,
// session id and protocol version checked on every request and answer, a session forgotten
// on a tools/call), and against a stdio server through the tool host whose tools grow at
// run time.
func TestExternalMCPClientHost(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_LOG_LEVEL=info")
	peersDir(t)
	asked := []string{"roots/list", "sampling/createMessage", "elicitation/create"}
	u := mcptest.Start(t, mcptest.Options{Requests: asked})
	const httpID, stdioID = "zest-http-echo", "zest-stdio-growing"

	t.Run("test a draft", func(t *testing.T) {
		draft := map[string]any{"name": "Zest HTTP Draft", "transport": "streamable-http", "url": u.URL, "timeout_ms": 10000, "enabled": true}
		r := admin(t, s, "POST", "/servers/test", jsonBody(t, map[string]any{"server": draft}))
		st, _ := r.JSON(t)["server"].(map[string]any)
		tools := asSlice(st["tools"])
		if r.Status != 200 || st["connected"] != true || st["test_only"] != true || len(tools) != 1 || tools[0].(map[string]any)["name"] != "echo" {
			t.Fatalf("test: %d %s\nupstream saw: %v", r.Status, r.Body, u.Violations())
		}
	})
	t.Run("upsert, connect, list, call", func(t *testing.T) {
		cfg := map[string]any{"id": httpID, "name": "Zest HTTP Echo", "transport": "streamable-http", "url": u.URL, "timeout_ms": 10000, "enabled": true}
		if r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"server": cfg})); r.Status != 200 {
			t.Fatalf("upsert: %d %s", r.Status, r.Body)
		}
		r := admin(t, s, "POST", "/servers/"+httpID+"/connect", "")
		if st, _ := r.JSON(t)["server"].(map[string]any); r.Status != 200 || st["connected"] != true || st["protocol_version"] != mcptest.ProtocolVersion {
			t.Fatalf("connect: %d %s", r.Status, r.Body)
		}
		e := toolEntry(t, s, "mcp_"+httpID+"__echo")
		if e == nil || e["server_id"] != httpID || e["name"] != "echo" || e["chat_name"] == "echo" {
			t.Fatalf("echo of %s is not listed under a namespaced chat_name", httpID)
		}
		r = callTool(t, s, httpID, "echo", map[string]any{"text": "hello-mcp"})
		if r.Status != 200 || resultText(t, r) != "http-echo:hello-mcp" {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a forgotten session fails the call that meets it, the next call initializes again", func(t *testing.T) {
		before := u.Initializes()
		u.ExpireOnNextToolCall()
		r := callTool(t, s, httpID, "echo", map[string]any{"text": "expire-me"})
		if msg := errMessage(t, r); r.Status != 502 || !regexp.MustCompile(`(?i)404|expired`).MatchString(msg) || !strings.Contains(msg, "forgot the session") {
			t.Fatalf("the call that met the 404: %d %s", r.Status, r.Body)
		}
		if got := u.Initializes(); got != before {
			t.Fatalf("the failing call initialized again (%d → %d): it must fail and leave that to the next call", before, got)
		}
		r = callTool(t, s, httpID, "echo", map[string]any{"text": "after-expiry"})
		if r.Status != 200 || resultText(t, r) != "http-echo:after-expiry" {
			t.Fatalf("the call after the 404: %d %s", r.Status, r.Body)
		}
		if got := u.Initializes(); got != before+1 {
			t.Fatalf("%d initializes after the 404, want 1", got-before)
		}
	})
	t.Run("the chat loop calls the HTTP upstream", func(t *testing.T) {
		a, r := chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["`+httpID+`"],
			"tool_choice":{"type":"function","function":{"name":"mcp_`+httpID+`__echo"}},
			"messages":[{"role":"user","content":"echo {\"text\":\"from-chat\"}"}]}`)
		if r.Status != 200 || a.Choices[0].Message.Content != "The tool returned: http-echo:from-chat" || len(a.ZestWarnings) != 0 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
	})
	t.Run("the upstream's requests were answered and its rules kept", func(t *testing.T) {
		if v := u.Violations(); len(v) > 0 {
			t.Fatalf("the upstream saw Zest break its rules:\n%s", strings.Join(v, "\n"))
		}
		pings, notFound := 0, 0
		for _, raw := range u.Answers() {
			var m struct {
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(raw, &m)
			switch {
			case string(m.Result) == "{}":
				pings++
			case m.Error != nil && m.Error.Code == -32601:
				notFound++
			default:
				t.Fatalf("an answer that is neither {} nor -32601: %s", raw)
			}
		}
		// Each tools/list (the draft test, the connect) asks a ping and the three others.
		if pings < 2 || notFound != pings*len(asked) {
			t.Fatalf("%d ping answers, %d -32601 answers", pings, notFound)
		}
		seen := strings.Join(u.Methods(), " ")
		for _, m := range []string{"initialize", "notifications/initialized", "tools/list", "tools/call"} {
			if !strings.Contains(seen, m) {
				t.Fatalf("the upstream never saw %s: %s", m, seen)
			}
		}
	})

	t.Run("a stdio server's new tool is listed within 5 s", func(t *testing.T) {
		script := nodeScript(t, "growing-server.mjs")
		cfg := map[string]any{"id": stdioID, "name": "Zest stdio growing", "transport": "stdio", "command": "node", "args": []string{script}, "timeout_ms": 10000,
			"pin_tools": false} // its tools grow by design (pinning would hold them: TestRugPull)
		if r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"server": cfg})); r.Status != 200 {
			t.Fatalf("upsert: %d %s", r.Status, r.Body)
		}
		r := admin(t, s, "POST", "/servers/"+stdioID+"/connect", "")
		if st, _ := r.JSON(t)["server"].(map[string]any); r.Status != 200 || st["connected"] != true || len(asSlice(st["tools"])) != 2 {
			t.Fatalf("connect: %d %s", r.Status, r.Body)
		}
		r = callTool(t, s, stdioID, "echo", map[string]any{"text": "hello-mcp"})
		if r.Status != 200 || resultText(t, r) != "hello-mcp" {
			t.Fatalf("echo: %d %s", r.Status, r.Body)
		}
		greet := "mcp_" + stdioID + "__greet"
		if toolEntry(t, s, greet) != nil {
			t.Fatal("greet is listed before it exists")
		}
		r = callTool(t, s, stdioID, "add_tool", map[string]any{"name": "greet"})
		if r.Status != 200 || resultText(t, r) != "added greet" {
			t.Fatalf("add_tool: %d %s", r.Status, r.Body)
		}
		added := time.Now()
		waitfor.NoError(t, 5*time.Second, func() error {
			if toolEntry(t, s, greet) == nil {
				return fmt.Errorf("%s is not in GET /internal/mcp/tools yet", greet)
			}
			return nil
		})
		t.Logf("the new tool was listed %v after add_tool answered", time.Since(added).Round(time.Millisecond))
		r = callTool(t, s, stdioID, "greet", map[string]any{})
		if r.Status != 200 || resultText(t, r) != "greet says hi" {
			t.Fatalf("greet: %d %s", r.Status, r.Body)
		}
	})

	t.Run("one log line per tool call", func(t *testing.T) {
		s.Kill("zest-mcpgateway", syscall.SIGTERM) // its log is complete once it has exited
		var got, lines []string
		line := regexp.MustCompile(`level=INFO msg="tool call" service=zest-mcpgateway (server=\S+ tool=\S+) duration_ms=\d+ (outcome=\S+) request_id=[0-9a-f]{16}$`)
		for _, l := range strings.Split(s.Logs("zest-mcpgateway"), "\n") {
			if !strings.Contains(l, `msg="tool call"`) {
				continue
			}
			lines = append(lines, l)
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("a tool call line without its fields or request id: %s", l)
			}
			got = append(got, m[1]+" "+m[2])
		}
		want := []string{
			"server=" + httpID + " tool=echo outcome=ok", "server=" + httpID + " tool=echo outcome=failed", "server=" + httpID + " tool=echo outcome=ok",
			"server=" + httpID + " tool=echo outcome=ok", // the chat loop's
			"server=" + stdioID + " tool=echo outcome=ok", "server=" + stdioID + " tool=add_tool outcome=ok", "server=" + stdioID + " tool=greet outcome=ok",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("tool call lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, secret := range []string{"hello-mcp", "expire-me", "after-expiry", "from-chat", "http-echo:"} {
			for _, l := range lines {
				if strings.Contains(l, secret) {
					t.Errorf("a tool call line holds arguments or results: %s", l)
				}
			}
		}
	})
}
