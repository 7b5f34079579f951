package serverconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/toolhost/host"
	"google.golang.org/protobuf/proto"
)

// parse reads js as the edge does (lib/adminjson) and checks it as mcpgateway does, so that the
// tables cover both halves of an admin body's way in.
func parse(js string, taken func(string) bool) (*mcpgatewayv1.ServerConfig, error) {
	in, _, err := adminjson.Server([]byte(js))
	if err != nil {
		return nil, err
	}
	return Parse(in, taken)
}

func parsePreset(js string, known func(string) bool) (*mcpgatewayv1.Preset, error) {
	in, _, err := adminjson.Preset([]byte(js))
	if err != nil {
		return nil, err
	}
	return ParsePreset(in, nil, known)
}

func TestParseValid(t *testing.T) {
	taken := func(id string) bool { return id == "my-echo" || id == "my-echo-2" }
	cases := []struct {
		name, body string
		check      func(t *testing.T, c map[string]any)
	}{
		{"bare stdio with defaults", `{"id":"echo","command":"node","args":["echo.js"]}`, func(t *testing.T, c map[string]any) {
			want(t, c, "transport", "stdio", "name", "echo", "enabled", true, "timeout_ms", 30000.0)
		}},
		{"wrapped", `{"server":{"id":"echo","command":"node"}}`, func(t *testing.T, c map[string]any) { want(t, c, "id", "echo") }},
		{"camelCase aliases", `{"id":"e","command":"node","workingDir":"/tmp","timeoutMs":5000}`, func(t *testing.T, c map[string]any) {
			want(t, c, "working_dir", "/tmp", "timeout_ms", 5000.0)
		}},
		{"http alias and loopback http", `{"id":"h","transport":"http","url":"http://127.0.0.1:9000/mcp","bearer_token":"${TOKEN}"}`, func(t *testing.T, c map[string]any) {
			want(t, c, "transport", "streamable-http", "bearer_token", "${TOKEN}")
		}},
		// As Lemonade's mcp_servers.json takes it: a url and no command is an HTTP server.
		{"url alone is streamable-http", `{"id":"h","url":"https://tools.example/mcp"}`, func(t *testing.T, c map[string]any) {
			want(t, c, "transport", "streamable-http", "url", "https://tools.example/mcp")
		}},
		{"insecure http allowed explicitly", `{"id":"h","transport":"streamable-http","url":"http://tools.lan/mcp","allow_insecure_http":true}`, nil},
		{"id derived from name", `{"name":"My Echo!","command":"node"}`, func(t *testing.T, c map[string]any) { want(t, c, "id", "my-echo-3", "name", "My Echo!") }},
		{"id derived from command basename", `{"command":"/usr/local/bin/Server_Everything"}`, func(t *testing.T, c map[string]any) {
			want(t, c, "id", "server-everything")
		}},
		{"env references", `{"id":"e","command":"node","env":{"GITHUB_TOKEN":"${GH_TOKEN}"}}`, nil},
		{"state fields sent back are ignored", `{"id":"e","command":"node","status":"connected","tools":[]}`, nil},
		{"disabled", `{"id":"e","command":"node","enabled":false}`, func(t *testing.T, c map[string]any) { want(t, c, "enabled", false) }},
		{"pinned to a tool host", `{"id":"e","command":"node","tool_host":"th-1.zone_a"}`, func(t *testing.T, c map[string]any) { want(t, c, "tool_host", "th-1.zone_a") }},
		{"pinned, camelCase", `{"id":"e","command":"node","toolHost":"th-1"}`, func(t *testing.T, c map[string]any) { want(t, c, "tool_host", "th-1") }},
		{"placement sent back is ignored", `{"id":"e","command":"node","placement":"th-2"}`, func(t *testing.T, c map[string]any) { want(t, c, "tool_host", "") }},
		{"no max_output_bytes: the operator's default", `{"id":"e","command":"node"}`, func(t *testing.T, c map[string]any) { want(t, c, "max_output_bytes", 0.0) }},
		{"max_output_bytes 0, as a state shows it: the operator's default", `{"id":"e","command":"node","max_output_bytes":0}`, func(t *testing.T, c map[string]any) {
			want(t, c, "max_output_bytes", 0.0)
		}},
		{"max_output_bytes at its bounds", `{"id":"e","command":"node","max_output_bytes":1024}`, func(t *testing.T, c map[string]any) { want(t, c, "max_output_bytes", 1024.0) }},
		{"no limits of its own", `{"id":"e","command":"node","rate_limit":"","max_concurrency":0}`, func(t *testing.T, c map[string]any) {
			want(t, c, "rate_limit", "", "max_concurrency", 0.0)
		}},
		{"limits, stored canonically", `{"id":"e","command":"node","rate_limit":"20/s:20","max_concurrency":1024}`, func(t *testing.T, c map[string]any) {
			want(t, c, "rate_limit", "20/s", "max_concurrency", 1024.0)
		}},
		{"limits, camelCase", `{"id":"e","command":"node","rateLimit":"600/m:5","maxConcurrency":1}`, func(t *testing.T, c map[string]any) {
			want(t, c, "rate_limit", "600/m:5", "max_concurrency", 1.0)
		}},
		{"maxOutputBytes at the gRPC limit", `{"id":"e","command":"node","maxOutputBytes":41943040}`, func(t *testing.T, c map[string]any) {
			want(t, c, "max_output_bytes", 41943040.0)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parse(tc.body, taken)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]any{"id": cfg.GetId(), "name": cfg.GetName(), "transport": cfg.GetTransport(),
				"enabled": cfg.GetEnabled(), "timeout_ms": float64(cfg.GetTimeoutMs()), "working_dir": cfg.GetWorkingDir(),
				"bearer_token": cfg.GetBearerToken(), "tool_host": cfg.GetToolHost(), "max_output_bytes": float64(cfg.GetMaxOutputBytes()),
				"rate_limit": cfg.GetRateLimit(), "max_concurrency": float64(cfg.GetMaxConcurrency()), "url": cfg.GetUrl()}
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}

func want(t *testing.T, got map[string]any, kv ...any) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if got[kv[i].(string)] != kv[i+1] {
			t.Errorf("%s = %v, want %v", kv[i], got[kv[i].(string)], kv[i+1])
		}
	}
}

func TestParseInvalid(t *testing.T) {
	cases := []struct{ name, body, msg string }{
		{"invalid id", `{"id":"a b","command":"x"}`, `id "a b" must match [A-Za-z0-9_.-]{1,96}`},
		{"over-long id", `{"id":"` + strings.Repeat("a", 97) + `","command":"x"}`, "must match [A-Za-z0-9_.-]{1,96}"},
		{"over-long id cut between characters", `{"id":"a` + strings.Repeat("é", 100) + `","command":"x"}`, `id "a` + strings.Repeat("é", 59) + `…" must match`},
		{"raw env value", `{"id":"a","command":"x","env":{"GITHUB_TOKEN":"ghp_123"}}`, "env GITHUB_TOKEN must be a ${VARIABLE} reference; raw values are rejected"},
		{"raw bearer token", `{"id":"a","transport":"http","url":"https://h/mcp","bearer_token":"sk-123"}`, "bearer_token must be a ${VARIABLE} reference; raw values are rejected"},
		{"env refers to the service key", `{"id":"a","command":"x","env":{"TOKEN":"${ZEST_SERVICE_KEY}","A":"${PATH}"}}`,
			"env TOKEN refers to ${ZEST_SERVICE_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of the tool host's environment (e.g. TOKEN) and write ${TOKEN}"},
		{"env named and referring as a Lemonade key", `{"id":"a","command":"x","env":{"LEMONADE_API_KEY":"${LEMONADE_API_KEY}"}}`,
			"env LEMONADE_API_KEY refers to ${LEMONADE_API_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of the tool host's environment (e.g. MCP_LEMONADE_API_KEY)"},
		{"bearer token refers to the admin key", `{"id":"a","transport":"http","url":"https://h/mcp","bearer_token":"${LEMONADE_ADMIN_API_KEY}"}`,
			"bearer_token refers to ${LEMONADE_ADMIN_API_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of mcpgateway's environment (e.g. MCP_BEARER_TOKEN) and write ${MCP_BEARER_TOKEN}"},
		{"bearer token refers to the session key", `{"id":"a","transport":"http","url":"https://h/mcp","bearer_token":"${ZEST_SESSION_KEY}"}`, "bearer_token refers to ${ZEST_SESSION_KEY}"},
		{"timeout as string", `{"id":"a","command":"x","timeout_ms":"5000"}`, "timeout_ms must be a number of milliseconds, not a string"},
		{"args not an array", `{"id":"a","command":"x","args":"--flag"}`, "args must be an array of strings, not a string"},
		{"args item not a string", `{"id":"a","command":"x","args":["a",1]}`, "args[1] must be a string, not a number"},
		{"enabled as string", `{"id":"a","command":"x","enabled":"yes"}`, "enabled must be true or false, not a string"},
		{"env not an object", `{"id":"a","command":"x","env":["A"]}`, "env must be an object"},
		{"timeout too small", `{"id":"a","command":"x","timeout_ms":999}`, "timeout_ms 999 is out of range: use a whole number from 1000 to 300000"},
		{"timeout too large", `{"id":"a","command":"x","timeout_ms":300001}`, "out of range"},
		{"max_output_bytes too small", `{"id":"a","command":"x","max_output_bytes":1023}`, "max_output_bytes 1023 is out of range: use a whole number of bytes from 1024 (1 KiB) to 41943040 (40 MiB, the gRPC message limit)"},
		{"max_output_bytes negative", `{"id":"a","command":"x","maxOutputBytes":-1}`, "max_output_bytes -1 is out of range"},
		{"max_output_bytes too large", `{"id":"a","command":"x","max_output_bytes":41943041}`, "max_output_bytes 41943041 is out of range"},
		{"max_output_bytes a string", `{"id":"a","command":"x","max_output_bytes":"1MB"}`, "max_output_bytes must be a number of bytes, not a string"},
		{"rate_limit without a unit", `{"id":"a","command":"x","rate_limit":"20"}`, `rate_limit "20" is not a rate: write N/s, N/m or N/h with an optional burst ":B" (e.g. "20/s", "600/m", "20/s:40") for the tool calls of this server`},
		{"rate_limit zero", `{"id":"a","command":"x","rate_limit":"0/s"}`, `rate_limit "0/s" is not a rate`},
		{"rate_limit off", `{"id":"a","command":"x","rate_limit":"off"}`, `rate_limit "off" is not a rate`},
		{"rate_limit a number", `{"id":"a","command":"x","rate_limit":20}`, "rate_limit must be a string, not a number"},
		{"max_concurrency negative", `{"id":"a","command":"x","max_concurrency":-1}`, "max_concurrency -1 is out of range: use a whole number of tool calls in flight at once from 1 to 1024, or 0 (or leave it out) for no limit"},
		{"max_concurrency too large", `{"id":"a","command":"x","maxConcurrency":1025}`, "max_concurrency 1025 is out of range"},
		{"max_concurrency a fraction", `{"id":"a","command":"x","max_concurrency":1.5}`, "max_concurrency 1.5 must be a whole number"},
		{"max_concurrency a string", `{"id":"a","command":"x","max_concurrency":"4"}`, "max_concurrency must be a number of tool calls, not a string"},
		{"max_output_bytes a fraction", `{"id":"a","command":"x","max_output_bytes":2048.5}`, "max_output_bytes 2048.5 must be a whole number of bytes"},
		{"both spellings", `{"id":"a","command":"x","timeout_ms":2000,"timeoutMs":3000}`, "timeout_ms and timeoutMs are the same field: send one of them"},
		{"both spellings of working_dir", `{"id":"a","command":"x","working_dir":"/","workingDir":"/"}`, "working_dir and workingDir"},
		{"url on stdio", `{"id":"a","command":"x","url":"https://h/mcp"}`, "url is a streamable-http field; this server's transport is stdio"},
		{"command on http", `{"id":"a","transport":"http","url":"https://h/mcp","command":"x"}`, "command is a stdio field; this server's transport is streamable-http"},
		{"env on http", `{"id":"a","transport":"http","url":"https://h/mcp","env":{"A":"${B}"}}`, "env is a stdio field"},
		{"args on http", `{"id":"a","transport":"http","url":"https://h/mcp","args":["x"]}`, "args is a stdio field"},
		{"tool_host on http", `{"id":"a","transport":"http","url":"https://h/mcp","tool_host":"th-1"}`, "tool_host is a stdio field; this server's transport is streamable-http (remove tool_host)"},
		{"tool_host not a name", `{"id":"a","command":"x","tool_host":"th 1"}`, `tool_host "th 1" is not a tool host name: want the ZEST_TOOLHOST_NAME of one tool host`},
		{"tool_host too long", `{"id":"a","command":"x","tool_host":"` + strings.Repeat("h", 254) + `"}`, "is not a tool host name"},
		{"tool_host not a string", `{"id":"a","command":"x","tool_host":1}`, "tool_host must be a string, not a number"},
		{"reserved id", `{"id":"lemonade","command":"x"}`, `id "lemonade" is reserved`},
		{"reserved id, other case", `{"id":"Lemonade","command":"x"}`, "is reserved"},
		{"timeout fractional at the edge", `{"id":"a","command":"x","timeout_ms":1500.5}`, "must be a whole number"},
		{"no command", `{"id":"a"}`, "command is required for a stdio server"},
		{"no url", `{"id":"a","transport":"http"}`, "url is required"},
		{"url with credentials", `{"id":"a","transport":"http","url":"https://user:pw@h/mcp"}`, "url must not contain credentials"},
		{"url with fragment", `{"id":"a","transport":"http","url":"https://h/mcp#x"}`, "url must not contain a fragment"},
		{"plain http to a remote host", `{"id":"a","transport":"http","url":"http://example.com/mcp"}`, "url uses plain http to example.com: use https, or set allow_insecure_http to true"},
		{"bad scheme", `{"id":"a","transport":"http","url":"ftp://h/mcp"}`, `url scheme "ftp"`},
		{"unknown transport", `{"id":"a","transport":"sse","command":"x"}`, `transport "sse": use stdio or streamable-http`},
		{"unknown field", `{"id":"a","command":"x","timeout":5}`, `unknown field "timeout": the fields are id, name,`},
		{"wrapped and bare", `{"server":{"id":"a"},"id":"b"}`, "not both"},
		{"server not an object", `{"server":"a"}`, "server must be an object"},
		{"empty", `{}`, "the body is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.body, nil)
			if (!errors.Is(err, ErrInvalid) && !errors.Is(err, adminjson.ErrServer)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), "ghp_123") || strings.Contains(err.Error(), "sk-123") {
				t.Fatalf("the error repeats a secret: %v", err)
			}
		})
	}
}

func TestParsePreset(t *testing.T) {
	p, err := parsePreset(`{"id":"helper","model":"builtin-llm","mcp_server_ids":["lemonade","my server!","lemonade","echo"]}`, nil)
	if err != nil || strings.Join(p.GetMcpServerIds(), ",") != "lemonade,myserver,echo" || !p.GetToolsEnabled() || p.GetName() != "helper" {
		t.Fatalf("%v %v", p, err)
	}
	p, _ = parsePreset(`{"preset":{"name":"Legacy On","tools_enabled":true}}`, nil)
	if strings.Join(p.GetMcpServerIds(), ",") != "lemonade" || p.GetId() != "legacy-on" || !p.GetToolsEnabled() {
		t.Fatalf("legacy true: %v", p)
	}
	p, _ = parsePreset(`{"id":"off","tools_enabled":false}`, nil)
	if len(p.GetMcpServerIds()) != 0 || p.GetToolsEnabled() {
		t.Fatalf("legacy false: %v", p)
	}
	p, _ = parsePreset(`{"id":"x","mcp_server_ids":["a"],"tools_enabled":true}`, nil)
	if strings.Join(p.GetMcpServerIds(), ",") != "a" || p.GetToolsEnabled() {
		t.Fatalf("mcp_server_ids wins over the legacy flag: %v", p)
	}
	if p.GetToolSearch() {
		t.Fatalf("tool_search is off unless set: %v", p)
	}
	p, _ = parsePreset(`{"id":"big","mcp_server_ids":["a"],"tool_search":true}`, nil)
	if !p.GetToolSearch() {
		t.Fatalf("tool_search: %v", p)
	}
	for name, tc := range map[string]struct{ body, msg string }{
		"five providers": {`{"id":"x","mcp_server_ids":["a","b","c","d","e"]}`, "selects 5 providers; a preset selects at most 4"},
		"ids not a list": {`{"id":"x","mcp_server_ids":"a"}`, "mcp_server_ids must be an array of strings"},
		"bad id":         {`{"id":"a b"}`, "must match"},
		"unknown":        {`{"id":"x","tool_list":[]}`, `unknown field "tool_list"`},
		"tools of JSON":  {`{"id":"x","mcp_server_ids":["echo"],"tools":[{"tool":"mcp_echo__echo","name":"mcp_x"}]}`, `tools[0].name "mcp_x" begins with mcp_`},
		"unknown server": {`{"id":"x","mcp_server_ids":["lemonade","ghost"]}`, `mcp_server_ids names "ghost", which is not a registered server`},
	} {
		t.Run(name, func(t *testing.T) {
			known := func(id string) bool { return id == "echo" }
			if _, err := parsePreset(tc.body, known); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
		})
	}
}

// TestParseExpose: expose defaults to true, false is kept, and a change of expose alone is
// the same connection (no reconnect).
func TestParseExpose(t *testing.T) {
	cfg, err := Parse(&mcpgatewayv1.ServerConfig{Id: "e", Command: "node"}, nil)
	if err != nil || !cfg.GetExpose() {
		t.Fatalf("default: %v, %v", cfg, err)
	}
	hidden, err := Parse(&mcpgatewayv1.ServerConfig{Id: "e", Command: "node", Expose: proto.Bool(false)}, nil)
	if err != nil || hidden.GetExpose() {
		t.Fatalf("expose false: %v, %v", hidden, err)
	}
	if !SameConnection(cfg, hidden) {
		t.Fatal("a change of expose alone must not reconnect")
	}
}

// TestToolHostPatternIsTheToolHosts: a pin accepts exactly the names a tool host accepts.
func TestToolHostPatternIsTheToolHosts(t *testing.T) {
	if ToolHostPattern.String() != host.NamePattern.String() {
		t.Fatalf("serverconfig's %s differs from the tool host's %s", ToolHostPattern, host.NamePattern)
	}
}

// TestField: a validation error names its field first, and Field finds it, for a form to
// show the error next to that field.
func TestField(t *testing.T) {
	for body, want := range map[string]string{
		`{"id":"a b","command":"x"}`:                                "id",
		`{"id":"a","command":"x","env":{"GITHUB_TOKEN":"ghp_123"}}`: "env",
		`{"id":"a"}`:                                                                               "command",
		`{"id":"a","transport":"http"}`:                                                            "url",
		`{"id":"a","command":"x","timeout_ms":999}`:                                                "timeout_ms",
		`{"id":"a","transport":"sse","command":"x"}`:                                               "transport",
		`{"id":"a","command":"x","tools_deny":[""]}`:                                               "tools_deny",
		`{"id":"a","transport":"http","url":"https://h/mcp","bearer_token":"sk"}`:                  "bearer_token",
		`{"id":"a","transport":"http","url":"https://h/mcp","command":"x"}`:                        "command",
		`{"id":"a","command":"x","tool_host":"a/b"}`:                                               "tool_host",
		`{"id":"a","command":"x","env":{"T":"${ZEST_SERVICE_KEY}"}}`:                               "env",
		`{"id":"a","transport":"http","url":"https://h/mcp","bearer_token":"${LEMONADE_API_KEY}"}`: "bearer_token",
	} {
		_, err := parse(body, nil)
		if got := Field(err); got != want {
			t.Errorf("%s: Field(%v) = %q, want %q", body, err, got, want)
		}
	}
	if got := Field(invalid(`the server is missing: send a server`)); got != "" {
		t.Errorf("an error naming no field: %q", got)
	}
	if got := Field(invalidPreset("mcp_server_ids selects 5 providers")); got != "mcp_server_ids" {
		t.Errorf("preset: %q", got)
	}
	if got := Field(errors.New("id is wrong")); got != "" {
		t.Errorf("not a validation error: %q", got)
	}
}

// TestParseStoresTheNormalForm: Parse sets enabled, timeout_ms and expose, leaves a Zest field
// that holds its default unset (approval "none", approval_by "admin", an empty rate_limit or
// tool_host, 0 limits), and returns a config as stored unchanged.
func TestParseStoresTheNormalForm(t *testing.T) {
	for _, body := range []string{
		`{"id":"e","command":"node"}`,
		`{"id":"e","command":"node","approval":"none","approval_by":"admin","rate_limit":"","tool_host":"","max_concurrency":0,"max_output_bytes":0}`,
	} {
		cfg, err := parse(body, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := &mcpgatewayv1.ServerConfig{Id: "e", Name: "e", Transport: "stdio", Command: "node",
			Enabled: proto.Bool(true), TimeoutMs: proto.Int32(DefaultTimeoutMs), Expose: proto.Bool(true)}
		if !proto.Equal(cfg, want) {
			t.Errorf("%s stored as %v, want %v", body, cfg, want)
		}
	}
	for _, body := range []string{
		`{"id":"e","command":"node","enabled":false,"expose":false,"timeout_ms":5000,"tool_host":"th","max_output_bytes":2048,
			"rate_limit":"5/s:9","max_concurrency":2,"approval":"Required","approval_by":"CLIENT","approval_tools":["rm"],
			"tools_allow":["a*"],"tools_deny":["ab"],"sandbox":{"network":"none"}}`,
		`{"id":"h","transport":"http","url":"https://h/mcp","bearer_token":"${T}","allow_insecure_http":true}`,
	} {
		cfg, err := parse(body, nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(cfg, nil)
		if err != nil || !proto.Equal(again, cfg) {
			t.Errorf("Parse of a stored config changed it: %v, %v\nwas %v", again, err, cfg)
		}
		if cfg.GetApproval() != ApprovalRequired || cfg.GetApprovalBy() != ApprovalByClient || cfg.GetSandbox().Enabled == nil {
			if cfg.GetTransport() == TransportStdio {
				t.Errorf("stored %v: want approval and approval_by in lower case, the sandbox enabled", cfg)
			}
		}
	}
}
