package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	"go.yaml.in/yaml/v3"
)

// ctlResult is what one zestctl run left.
type ctlResult struct {
	Stdout, Stderr string
	Code           int
}

// JSON decodes stdout.
func (r ctlResult) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil {
		t.Fatalf("stdout is not a JSON object (exit %d): %v\n%s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
	}
	return m
}

// zestctl runs bin/zestctl with the suite's environment (its addresses and keys) plus env.
func zestctl(t *testing.T, s *Suite, env []string, args ...string) ctlResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(binDir, "zestctl"), args...)
	cmd.Env = append(append([]string{}, s.Env...), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("zestctl %q: %v", args, err)
	}
	return ctlResult{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// mustCtl runs zestctl and wants exit code want.
func mustCtl(t *testing.T, s *Suite, want int, args ...string) ctlResult {
	t.Helper()
	r := zestctl(t, s, nil, args...)
	if r.Code != want {
		t.Fatalf("zestctl %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.Code, want, r.Stdout, r.Stderr)
	}
	return r
}

// TestZestctl runs every zestctl command against a running suite, with the API and admin keys
// set, checking JSON (and YAML) output and the documented exit codes; then runs mcp-remote as
// `zestctl config claude` tells Claude Desktop to, and lists Zest's tools through it.
func TestZestctl(t *testing.T) {
	const apiKey = "zestctl-api-key"
	s := startSuite(t, "LEMONADE_API_KEY="+apiKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	peers := peersDir(t)
	echo := filepath.Join(peers, "echo-server.mjs")

	t.Run("status", func(t *testing.T) {
		m := mustCtl(t, s, 0, "status", "-o", "json").JSON(t)
		for _, sv := range m["services"].([]any) {
			if sv := sv.(map[string]any); sv["status"] != "SERVING" {
				t.Errorf("service %v", sv)
			}
		}
		models, _ := json.Marshal(m["models"])
		if !strings.Contains(string(models), `"id":"builtin-llm"`) {
			t.Errorf("models = %s", models)
		}
		if r := mustCtl(t, s, 0, "status"); !strings.Contains(r.Stdout, "mcpgateway") || !strings.Contains(r.Stdout, "SERVING") {
			t.Errorf("status table:\n%s", r.Stdout)
		}
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		for _, args := range [][]string{{"servers", "list", "--no-such-flag"}, {"no-such-command"}, {"servers", "get"},
			{"call", "echo", "echo", "--arg", "novalue"}, {"-o", "xml", "status"}} {
			if r := zestctl(t, s, nil, args...); r.Code != 2 || !strings.Contains(r.Stderr, "zestctl: ") {
				t.Errorf("%q: exit %d, stderr %q", args, r.Code, r.Stderr)
			}
		}
	})

	t.Run("servers", func(t *testing.T) {
		m := mustCtl(t, s, 0, "servers", "add", "echo", "--command", "node", "--arg", echo, "-o", "json").JSON(t)
		if m["id"] != "echo" || m["command"] != "node" || m["timeout_ms"] != float64(30000) {
			t.Fatalf("add = %v", m)
		}
		in := fmt.Sprintf(`{"server":{"id":"echo2","command":"node","args":[%q],"tools_deny":["nope*"]}}`, echo)
		mustCtl(t, s, 0, "servers", "add", "--json", in)
		file := filepath.Join(t.TempDir(), "echo3.json")
		os.WriteFile(file, []byte(fmt.Sprintf(`{"command":"node","args":[%q]}`, echo)), 0o600)
		if m := mustCtl(t, s, 0, "servers", "add", "echo3", "--file", file, "--env", "TOKEN=${E2E_TOKEN}", "-o", "json").JSON(t); m["env"].(map[string]any)["TOKEN"] != "${E2E_TOKEN}" {
			t.Fatalf("add --file = %v", m)
		}
		// edit changes the given fields only (UpdateServer), the sandbox's field by field.
		mustCtl(t, s, 0, "servers", "edit", "echo2", "--rate-limit", "50/s", "--max-output-bytes", "4096", "--sandbox", `{"enabled":false,"writable_paths":["/tmp/e2"]}`)
		m = mustCtl(t, s, 0, "servers", "edit", "echo2", "--timeout-ms", "5000", "--name", "Echo Two", "--sandbox", `{"network":"host"}`, "-o", "json").JSON(t)
		if m["timeout_ms"] != float64(5000) || m["name"] != "Echo Two" || m["args"].([]any)[0] != echo || m["tools_deny"].([]any)[0] != "nope*" ||
			m["rate_limit"] != "50/s" || m["max_output_bytes"] != float64(4096) || m["sandbox"].(map[string]any)["network"] != "host" ||
			m["sandbox"].(map[string]any)["writable_paths"].([]any)[0] != "/tmp/e2" {
			t.Fatalf("edit = %v", m)
		}
		// add of a registered id replaces Lemonade's fields and keeps the Zest ones not given.
		if m := mustCtl(t, s, 0, "servers", "add", "echo2", "--command", "node", "--arg", echo, "-o", "json").JSON(t); m["name"] != "echo2" ||
			m["rate_limit"] != "50/s" || m["tools_deny"].([]any)[0] != "nope*" || m["timeout_ms"] != float64(30000) {
			t.Fatalf("add over echo2 = %v", m)
		}
		// A rule of mcpgateway's: a raw env value is refused, the message names the field (exit 1).
		if r := zestctl(t, s, nil, "servers", "edit", "echo2", "--env", "TOKEN=raw-secret"); r.Code != 1 || !strings.Contains(r.Stderr, "TOKEN") {
			t.Fatalf("raw env: exit %d %s", r.Code, r.Stderr)
		}
		m = mustCtl(t, s, 0, "servers", "test", "--command", "node", "--arg", echo, "-o", "json").JSON(t)
		if m["test_only"] != true || len(m["tools"].([]any)) != 1 {
			t.Fatalf("test = %v", m)
		}
		m = mustCtl(t, s, 0, "servers", "connect", "echo", "-o", "json").JSON(t)
		if m["connected"] != true || m["tools"].([]any)[0].(map[string]any)["name"] != "echo" {
			t.Fatalf("connect = %v", m)
		}
		m = mustCtl(t, s, 0, "servers", "refresh", "echo", "-o", "json").JSON(t)
		if len(m["tools"].([]any)) != 1 {
			t.Fatalf("refresh = %v", m)
		}
		var got struct {
			ID      string
			Process struct{ State string }
		}
		if err := yaml.Unmarshal([]byte(mustCtl(t, s, 0, "servers", "get", "echo", "-o", "yaml").Stdout), &got); err != nil || got.ID != "echo" || got.Process.State != "ready" {
			t.Fatalf("get -o yaml: %+v %v", got, err)
		}
		list := mustCtl(t, s, 0, "servers", "list", "-o", "json").JSON(t)["servers"].([]any)
		if len(list) != 3 {
			t.Fatalf("list = %v", list)
		}
		if r := mustCtl(t, s, 0, "servers", "list"); !strings.Contains(r.Stdout, "echo2") || !strings.Contains(r.Stdout, "connected") {
			t.Fatalf("list table:\n%s", r.Stdout)
		}
		mustCtl(t, s, 0, "servers", "connect", "echo2")
		if m := mustCtl(t, s, 0, "servers", "disconnect", "echo2", "-o", "json").JSON(t); m["connected"] != false {
			t.Fatalf("disconnect = %v", m)
		}
		if r := zestctl(t, s, nil, "servers", "get", "nope"); r.Code != 3 || !strings.Contains(r.Stderr, "NotFound") {
			t.Fatalf("unknown server: exit %d %s", r.Code, r.Stderr)
		}
		if m := mustCtl(t, s, 0, "servers", "rm", "echo3", "-o", "json").JSON(t); m["removed"] != "echo3" {
			t.Fatalf("rm = %v", m)
		}
	})

	t.Run("tools and call", func(t *testing.T) {
		tools := mustCtl(t, s, 0, "tools", "list", "--server", "echo", "-o", "json").JSON(t)["tools"].([]any)
		if len(tools) != 1 || tools[0].(map[string]any)["chat_name"] != "mcp_echo__echo" {
			t.Fatalf("tools = %v", tools)
		}
		if r := mustCtl(t, s, 0, "call", "echo", "echo", "--arg", "text=hello-zestctl"); r.Stdout != "hello-zestctl\n" {
			t.Fatalf("call table = %q", r.Stdout)
		}
		m := mustCtl(t, s, 0, "call", "echo", "echo", "--json", `{"text":"from json"}`, "-o", "json").JSON(t)
		if m["server_id"] != "echo" || m["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "from json" {
			t.Fatalf("call json = %v", m)
		}
		// A tool that answers isError: the echo tool without its required text.
		r := zestctl(t, s, nil, "call", "echo", "echo", "-o", "json")
		if r.Code != 6 || r.JSON(t)["result"].(map[string]any)["isError"] != true {
			t.Fatalf("isError call: exit %d %s %s", r.Code, r.Stdout, r.Stderr)
		}
		if r := zestctl(t, s, nil, "call", "nope", "echo"); r.Code != 3 {
			t.Fatalf("call on an unknown server: exit %d %s", r.Code, r.Stderr)
		}
	})

	t.Run("wrong key exits 4, unreachable exits 5", func(t *testing.T) {
		if r := zestctl(t, s, []string{"LEMONADE_ADMIN_API_KEY=wrong"}, "servers", "list"); r.Code != 4 || !strings.Contains(r.Stderr, "Unauthenticated") {
			t.Fatalf("wrong key: exit %d %s", r.Code, r.Stderr)
		}
		if r := zestctl(t, s, []string{"ZEST_MCPGATEWAY_ADDR=" + unusedAddr(t)}, "servers", "list"); r.Code != 5 {
			t.Fatalf("unreachable: exit %d %s", r.Code, r.Stderr)
		}
	})

	t.Run("presets and chat", func(t *testing.T) {
		m := mustCtl(t, s, 0, "presets", "add", "helper", "--model", "builtin-llm", "--server", "echo", "--system-prompt", "Be brief.", "-o", "json").JSON(t)
		if m["id"] != "helper" || m["mcp_server_ids"].([]any)[0] != "echo" {
			t.Fatalf("presets add = %v", m)
		}
		if list := mustCtl(t, s, 0, "presets", "list", "-o", "json").JSON(t)["presets"].([]any); len(list) != 1 {
			t.Fatalf("presets list = %v", list)
		}
		if m := mustCtl(t, s, 0, "presets", "get", "helper", "-o", "json").JSON(t); m["model"] != "builtin-llm" {
			t.Fatalf("presets get = %v", m)
		}
		r := mustCtl(t, s, 0, "chat", "--preset", "helper", "--tool", "mcp_echo__echo", `say {"text":"hello-chat"}`)
		for _, want := range []string{"» tool_call mcp_echo__echo (echo)", "» tool_result mcp_echo__echo ok", "The tool returned: hello-chat\n", "» done stop"} {
			if !strings.Contains(r.Stdout, want) {
				t.Fatalf("chat output lacks %q:\n%s", want, r.Stdout)
			}
		}
		// json: one object per streamed item, the last the outcome.
		r = mustCtl(t, s, 0, "chat", "--model", "builtin-llm", "--preset", "helper", "--tool", "mcp_echo__echo", `{"text":"ndjson"}`, "-o", "json")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		var kinds []string
		var last map[string]any
		for _, l := range lines {
			last = nil
			if err := json.Unmarshal([]byte(l), &last); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			for k := range last {
				kinds = append(kinds, k)
			}
		}
		if done, _ := last["done"].(map[string]any); done == nil || done["finish_reason"] != "stop" || !strings.Contains(strings.Join(kinds, ","), "event") {
			t.Fatalf("chat ndjson kinds %v, last %v", kinds, last)
		}
		// mcpgateway refuses an unknown preset in a chat as a bad request (exit 1), naming it.
		if r := zestctl(t, s, nil, "chat", "--preset", "nope", "hi"); r.Code != 1 || !strings.Contains(r.Stderr, `preset "nope" is not known`) {
			t.Fatalf("chat with an unknown preset: exit %d %s", r.Code, r.Stderr)
		}
	})

	t.Run("sessions end", func(t *testing.T) {
		session, _ := mcpInit(t, s, "2025-11-25", "Authorization: Bearer "+apiKey)
		ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
		if r := mcpCall(t, s, session, ping, "Authorization: Bearer "+apiKey); r.Status != 200 {
			t.Fatalf("ping before: %d %s", r.Status, r.Body)
		}
		if m := mustCtl(t, s, 0, "sessions", "end", session, "-o", "json").JSON(t); m["ended"] != session {
			t.Fatalf("sessions end = %v", m)
		}
		if r := mcpCall(t, s, session, ping, "Authorization: Bearer "+apiKey); r.Status != 404 {
			t.Fatalf("ping after the end: %d %s", r.Status, r.Body)
		}
	})

	t.Run("activity", func(t *testing.T) {
		m := mustCtl(t, s, 0, "activity", "--limit", "50", "-o", "json").JSON(t)
		outcomes := map[string]bool{}
		for _, c := range m["calls"].([]any) {
			c := c.(map[string]any)
			outcomes[c["path"].(string)+"/"+c["outcome"].(string)] = true
		}
		for _, want := range []string{"admin/ok", "admin/tool_error", "chat/ok"} {
			if !outcomes[want] {
				t.Errorf("activity lacks %s: %v", want, outcomes)
			}
		}
		if r := mustCtl(t, s, 0, "activity"); !strings.Contains(r.Stdout, "OUTCOME") || !strings.Contains(r.Stdout, "tool_error") {
			t.Errorf("activity table:\n%s", r.Stdout)
		}
	})

	// The audit trail of the same calls and of the servers added above: a page, and the
	// export as JSON lines that parse.
	t.Run("audit", func(t *testing.T) {
		var m map[string]any
		waitfor.True(t, 10*time.Second, "an admin entry in audit list", func() bool {
			m = mustCtl(t, s, 0, "audit", "list", "--kind", "admin", "-o", "json").JSON(t)
			es, _ := m["entries"].([]any)
			return len(es) > 0
		})
		actions := map[string]bool{}
		for _, e := range m["entries"].([]any) {
			actions[e.(map[string]any)["action"].(string)] = true
		}
		if !actions["upsert_server"] {
			t.Errorf("audit list --kind admin lacks upsert_server: %v", actions)
		}
		r := mustCtl(t, s, 0, "audit", "export", "--kind", "tool")
		lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
		for _, l := range lines {
			var e map[string]any
			if err := json.Unmarshal([]byte(l), &e); err != nil || e["kind"] != "tool" {
				t.Fatalf("export line %q: %v", l, err)
			}
		}
		if len(lines) < 3 {
			t.Errorf("export of %d tool calls:\n%s", len(lines), r.Stdout)
		}
		if r := mustCtl(t, s, 0, "audit", "list"); !strings.Contains(r.Stdout, "CHANGED/ERROR") {
			t.Errorf("audit table:\n%s", r.Stdout)
		}
	})

	t.Run("completion", func(t *testing.T) {
		if r := mustCtl(t, s, 0, "--version"); !strings.HasPrefix(r.Stdout, "zestctl version ") {
			t.Fatalf("--version = %q", r.Stdout)
		}
		if r := mustCtl(t, s, 0, "completion", "bash"); !strings.Contains(r.Stdout, "__start_zestctl") {
			t.Fatalf("bash completion:\n%.300s", r.Stdout)
		}
		// Server and preset ids complete from mcpgateway (cobra's __complete, as the shells call it).
		if r := mustCtl(t, s, 0, "__complete", "servers", "get", ""); !strings.HasPrefix(r.Stdout, "echo\necho2\n:4\n") {
			t.Fatalf("server ids: %q", r.Stdout)
		}
		if r := mustCtl(t, s, 0, "__complete", "presets", "rm", ""); !strings.HasPrefix(r.Stdout, "helper\n:4\n") {
			t.Fatalf("preset ids: %q", r.Stdout)
		}
	})

	t.Run("config", func(t *testing.T) {
		for _, c := range []string{"cursor", "vscode", "inspector"} {
			r := mustCtl(t, s, 0, "config", c, "--url", s.URL, "--server", "echo")
			if !strings.Contains(r.Stdout, s.URL+"/mcp/servers/echo") || !strings.Contains(r.Stdout, "LEMONADE_API_KEY") || strings.Contains(r.Stdout, apiKey) {
				t.Errorf("config %s:\n%s", c, r.Stdout)
			}
		}
		if r := zestctl(t, s, nil, "config", "claude", "--url", s.URL, "--preset", "nope"); r.Code != 3 {
			t.Errorf("config for an unknown preset: exit %d %s", r.Code, r.Stderr)
		}
		// Claude Desktop's configuration, used for real: mcp-remote as it says, the key put in
		// place of the placeholder, initialize and tools/list on its stdin.
		var cfg struct {
			McpServers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		r := mustCtl(t, s, 0, "config", "claude", "--url", s.URL)
		if err := json.Unmarshal([]byte(r.Stdout), &cfg); err != nil {
			t.Fatalf("config claude: %v\n%s", err, r.Stdout)
		}
		z := cfg.McpServers["zest"]
		if z.Command != "npx" || len(z.Args) != 5 || z.Args[0] != "-y" || z.Args[1] != "mcp-remote" || z.Args[2] != s.URL+"/mcp" ||
			z.Env["AUTH_HEADER"] != "Bearer <your LEMONADE_API_KEY>" {
			t.Fatalf("config claude = %+v", z)
		}
		tools := mcpRemoteTools(t, z.Args[2:], map[string]string{"AUTH_HEADER": "Bearer " + apiKey})
		if !strings.Contains(tools, `"lemonade_list_models"`) {
			t.Fatalf("tools/list through mcp-remote:\n%s", tools)
		}
	})

	t.Run("rm", func(t *testing.T) {
		mustCtl(t, s, 0, "presets", "rm", "helper")
		mustCtl(t, s, 0, "servers", "rm", "echo2")
		if r := zestctl(t, s, nil, "presets", "get", "helper"); r.Code != 3 {
			t.Fatalf("removed preset: exit %d", r.Code)
		}
	})
}

// mcpRemoteTools runs mcp-remote (npx -y mcp-remote ARGS, from scripts/peers with Node 22)
// with env, sends initialize and tools/list on its stdin, and returns the tools/list answer.
func mcpRemoteTools(t *testing.T, args []string, env map[string]string) string {
	t.Helper()
	send, await := startMCPRemote(t, args, env)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"zestctl-e2e","version":"1"}}}`)
	if l := await("1"); !strings.Contains(l, `"result"`) {
		t.Fatalf("initialize through mcp-remote: %s", l)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	return await("2")
}

// TestZestctlConfigSendsNoKeyElsewhere: `zestctl config` probes --url without a key; it sends
// a key only to the configured edge (ZEST_EDGE_ADDR), only the API key, and follows no
// redirect. A URL that answers 401 is not the suite: it gets a placeholder configuration and
// no key (before, it got the admin key); the configured edge that redirects the keyed probe
// is an error, and the redirect's target sees nothing.
func TestZestctlConfigSendsNoKeyElsewhere(t *testing.T) {
	const apiKey, adminKey = "config-api-key", "config-admin-key"
	var mu sync.Mutex
	seen := map[string][]string{} // server → the Authorization of each request it got
	server := func(name string, h http.HandlerFunc) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = append(seen[name], r.Header.Get("Authorization"))
			mu.Unlock()
			h(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	unauthorized := func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"Invalid or missing API key"}`, http.StatusUnauthorized)
	}
	elsewhere := server("elsewhere", unauthorized)
	beyond := server("beyond", unauthorized)
	edge := server("edge", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			unauthorized(w, r)
			return
		}
		http.Redirect(w, r, beyond.URL+"/mcp", http.StatusTemporaryRedirect)
	})
	s := &Suite{Env: append(os.Environ(), "LEMONADE_API_KEY="+apiKey, "LEMONADE_ADMIN_API_KEY="+adminKey,
		"ZEST_EDGE_ADDR="+strings.TrimPrefix(edge.URL, "http://"))}

	r := zestctl(t, s, nil, "config", "cursor", "--url", elsewhere.URL)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Bearer <your LEMONADE_API_KEY>") || !strings.Contains(r.Stderr, "not probed with LEMONADE_API_KEY") {
		t.Errorf("config for a URL that is not the configured edge: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	r = zestctl(t, s, nil, "config", "cursor", "--url", edge.URL)
	if r.Code != 5 || !strings.Contains(r.Stderr, "a redirect to") || !strings.Contains(r.Stderr, "does not follow") {
		t.Errorf("config for the configured edge that redirects: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, auths := range seen {
		for _, a := range auths {
			if strings.Contains(a, adminKey) || (a != "" && name != "edge") {
				t.Errorf("%s received Authorization %q", name, a)
			}
		}
	}
	if got := seen["edge"]; len(got) != 2 || got[1] != "Bearer "+apiKey {
		t.Errorf("the configured edge received %q; want a keyless probe, then one with the API key", got)
	}
}
