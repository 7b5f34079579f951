package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// gui3Save is the body Lemonade's GUI3 posts to /internal/mcp/servers when Edit → Save is
// pressed on a server whose state is st, with nothing changed but what edit does to the form:
// McpPanel.tsx on lemonade-sdk/lemonade's GUI3_merging (85dbdf1), draftFromServer then
// serverPayload, sent by api.saveMcpServer as {"server": …}. It carries Lemonade's fields
// only, enabled always true, in GUI3's key order.
func gui3Save(t *testing.T, st map[string]any, edit func(draft map[string]string)) string {
	t.Helper()
	str := func(k string) string { s, _ := st[k].(string); return s }
	// draftFromServer: the form's text fields.
	draft := map[string]string{"id": str("id"), "name": str("name"), "url": str("url"), "command": str("command"),
		"working_dir": str("working_dir"), "timeout_ms": "30000"}
	if n, _ := st["timeout_ms"].(float64); n != 0 {
		draft["timeout_ms"] = strconv.FormatFloat(n, 'f', -1, 64)
	}
	var args []string
	for _, a := range asSlice(st["args"]) {
		args = append(args, a.(string))
	}
	draft["args"] = strings.Join(args, "\n")
	token := ""
	if m := regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`).FindStringSubmatch(str("bearer_token")); m != nil {
		token = m[1]
	}
	if edit != nil {
		edit(draft)
	}
	// serverPayload: common fields first, then the transport's.
	timeout, err := strconv.Atoi(draft["timeout_ms"])
	if err != nil {
		t.Fatal(err)
	}
	if st["transport"] == "streamable-http" {
		bearer := ""
		if token != "" {
			bearer = "${" + token + "}"
		}
		insecure, _ := st["allow_insecure_http"].(bool)
		return jsonBody(t, map[string]any{"server": struct {
			ID                string `json:"id"`
			Name              string `json:"name"`
			Transport         string `json:"transport"`
			TimeoutMs         int    `json:"timeout_ms"`
			Enabled           bool   `json:"enabled"`
			URL               string `json:"url"`
			BearerToken       string `json:"bearer_token"`
			AllowInsecureHTTP bool   `json:"allow_insecure_http"`
		}{draft["id"], strings.TrimSpace(draft["name"]), "streamable-http", timeout, true, strings.TrimSpace(draft["url"]), bearer, insecure}})
	}
	env := map[string]string{}
	for k, v := range st["env"].(map[string]any) {
		env[k] = v.(string)
	}
	var payloadArgs []string
	for _, a := range strings.Split(draft["args"], "\n") {
		if a = strings.TrimSpace(a); a != "" {
			payloadArgs = append(payloadArgs, a)
		}
	}
	return jsonBody(t, map[string]any{"server": struct {
		ID         string            `json:"id"`
		Name       string            `json:"name"`
		Transport  string            `json:"transport"`
		TimeoutMs  int               `json:"timeout_ms"`
		Enabled    bool              `json:"enabled"`
		Command    string            `json:"command"`
		Args       []string          `json:"args"`
		Env        map[string]string `json:"env"`
		WorkingDir string            `json:"working_dir"`
	}{draft["id"], strings.TrimSpace(draft["name"]), "stdio", timeout, true, strings.TrimSpace(draft["command"]), payloadArgs, env, strings.TrimSpace(draft["working_dir"])}})
}

// gui3EditSave does what GUI3's MCP panel does on Edit → Save: read the list, post the form
// built from the server's state, connect the server, read the list again. It returns the
// server's state from that last list.
func gui3EditSave(t *testing.T, s *Suite, id string, edit func(draft map[string]string)) map[string]any {
	t.Helper()
	find := func() map[string]any {
		for _, x := range asSlice(admin(t, s, "GET", "/servers", "").JSON(t)["servers"]) {
			if st := x.(map[string]any); st["id"] == id {
				return st
			}
		}
		t.Fatalf("%s is not in GET /internal/mcp/servers", id)
		return nil
	}
	if r := admin(t, s, "POST", "/servers", gui3Save(t, find(), edit)); r.Status != 200 {
		t.Fatalf("GUI3's save of %s: %d %s", id, r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/servers/"+id+"/connect", ""); r.Status != 200 {
		t.Fatalf("GUI3's connect of %s: %d %s", id, r.Status, r.Body)
	}
	return find()
}

// TestGUI3EditKeepsPolicy: Lemonade's GUI3 knows only Lemonade's fields of a server; its
// Edit → Save posts them alone. Every Zest field it leaves out (the approval, the tool deny
// list, the limits, the output bound, expose: false) is kept, so that an API user still
// cannot reach a hidden server or call a denied tool, while what GUI3 did change (the name)
// is changed.
func TestGUI3EditKeepsPolicy(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	everything := serverEverything(t)
	policy := map[string]any{"approval": "required", "approval_tools": []any{"echo"}, "approval_by": "client", "pin_tools": false,
		"tools_deny": []any{"get-env"}, "rate_limit": "100/m", "max_concurrency": float64(3), "max_output_bytes": float64(4096)}
	guarded := map[string]any{"id": "guarded", "command": "node", "args": []string{everything}, "expose": false}
	for k, v := range policy {
		guarded[k] = v
	}
	registerServer(t, s, guarded)
	registerServer(t, s, map[string]any{"id": "open", "command": "node", "args": []string{everything}, "tools_deny": []string{"get-env"}})

	gui3EditSave(t, s, "guarded", nil)
	st := gui3EditSave(t, s, "guarded", func(d map[string]string) { d["name"] = "Guarded server" })
	for k, want := range policy {
		if got := st[k]; !jsonEqual(got, want) {
			t.Errorf("after GUI3's saves %s is %v, want %v", k, got, want)
		}
	}
	if st["expose"] != false || st["enabled"] != true || st["name"] != "Guarded server" || st["connected"] != true {
		t.Errorf("after GUI3's saves: expose %v, enabled %v, name %v, connected %v; want false, true, the new name, true",
			st["expose"], st["enabled"], st["name"], st["connected"])
	}
	gui3EditSave(t, s, "open", nil)

	// The hidden server is still hidden from the API key: the same 404 as an unknown id.
	if r := do(t, "POST", fedURL(s, "guarded"), sprintf(initBody, "2025-11-25"), append(mcpHeaders, fedAPIAuth)...); r.Status != http.StatusNotFound {
		t.Errorf("the API key initialized the hidden server after GUI3's save: %d %s", r.Status, r.Body)
	}
	// The denied tool is still refused, to the API key on the exposed server and to the admin
	// API on both.
	sess := mustInit(t, s, "open")
	r := fedCall(t, s, "open", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-env","arguments":{}}}`, fedAPIAuth)
	if msgs := sseMessages(t, r); len(msgs) == 0 || msgs[0]["result"] != nil || !strings.Contains(string(r.Body), "get-env") {
		t.Errorf("the API key called the denied get-env after GUI3's save: %d %s", r.Status, r.Body)
	}
	for _, id := range []string{"guarded", "open"} {
		r := admin(t, s, "POST", "/servers/"+id+"/tools/call", `{"name":"get-env","arguments":{}}`)
		if r.Status != http.StatusBadRequest || !strings.Contains(errMessage(t, r), `matches tools_deny pattern "get-env"`) {
			t.Errorf("%s: get-env after GUI3's save: %d %s", id, r.Status, r.Body)
		}
	}
}

// jsonEqual compares two decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return slices.Equal(x, y)
}

// TestServerPatch: PATCH /internal/mcp/servers/{id} is a JSON merge patch of the config: the
// members it names change (a null to its default, the sandbox member by member), every other
// field stays; it is checked as an upsert is, names unknown ids 404, takes the admin key only,
// and its audit entry names the fields it changed.
func TestServerPatch(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "p", "name": "P", "command": "node", "args": []string{echo}, "timeout_ms": 5000,
		"tools_deny": []string{"get-*"}, "rate_limit": "10/s", "approval": "required", "expose": false,
		"sandbox": map[string]any{"enabled": false, "network": "none", "writable_paths": []string{"/tmp/p"}}})
	patch := func(id, body string, headers ...string) Response {
		t.Helper()
		return do(t, "PATCH", s.URL+"/internal/mcp/servers/"+id, body, append([]string{"Content-Type: application/json"}, headers...)...)
	}
	r := patch("p", `{"rate_limit":null,"enabled":false,"sandbox":{"network":"host"}}`, adminAuth)
	if r.Status != 200 {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
	st := admin(t, s, "GET", "/servers/p", "").JSON(t)["server"].(map[string]any)
	for k, want := range map[string]any{"rate_limit": "", "enabled": false, "name": "P", "timeout_ms": 5000.0, "approval": "required",
		"expose": false, "tools_deny": []any{"get-*"}, "args": []any{echo}} {
		if !jsonEqual(st[k], want) {
			t.Errorf("after the PATCH %s = %v, want %v", k, st[k], want)
		}
	}
	if sb := st["sandbox"].(map[string]any); sb["network"] != "host" || sb["enabled"] != false || !jsonEqual(sb["writable_paths"], []any{"/tmp/p"}) {
		t.Errorf("sandbox after the PATCH: %v", sb)
	}
	for _, c := range []struct {
		id, body string
		status   int
		msg      string
	}{
		{"p", `{"timeout_ms":10}`, 400, "timeout_ms 10 is out of range"},
		{"p", `{"transport":"http","url":"https://h.example/mcp"}`, 400, "command is a stdio field"},
		{"p", `{"id":"q"}`, 400, "id is the server's, from the path"},
		{"p", `{"rate_limits":"1/s"}`, 400, `unknown field "rate_limits"`},
		{"nope", `{"enabled":true}`, 404, "nope"},
	} {
		r := patch(c.id, c.body, adminAuth)
		if r.Status != c.status || !strings.Contains(errMessage(t, r), c.msg) {
			t.Errorf("PATCH %s %s: %d %s, want %d %q", c.id, c.body, r.Status, r.Body, c.status, c.msg)
		}
	}
	// A browser on another origin (Lemonade's GUI on its dev server) may send it.
	pre := do(t, "OPTIONS", s.URL+"/internal/mcp/servers/p", "", "Origin: http://localhost:5173", "Access-Control-Request-Method: PATCH",
		"Access-Control-Request-Headers: content-type,authorization")
	if pre.Status != 204 || !strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "PATCH") {
		t.Errorf("preflight of a PATCH: %d %v", pre.Status, pre.Header)
	}
	if r := patch("p", `{"enabled":true}`, fedAPIAuth); r.Status != 401 && r.Status != 403 {
		t.Errorf("PATCH with the API key: %d %s", r.Status, r.Body)
	}
	if r := patch("p", `{"enabled":true}`); r.Status != 401 && r.Status != 403 {
		t.Errorf("PATCH with no key: %d %s", r.Status, r.Body)
	}
	// The trail: the upsert, the PATCH that changed three fields, the two refused by mcpgateway.
	a := waitAudit(t, s, "?kind=admin&server=p", 4)
	var ok []auditEntry
	for _, e := range a.Entries {
		if e.Action == "update_server" && e.Outcome == "ok" {
			ok = append(ok, e)
		}
	}
	if len(ok) != 1 || strings.Join(ok[0].Changed, ",") != "enabled,sandbox,rate_limit" {
		t.Errorf("audit: %s", summary(a.Entries))
	}
}

// TestUpdateServerOverGRPC: a program changes one field with UpdateServer and a field mask, and
// a Lemonade-shaped UpsertServer keeps the rest of the policy; the API key is refused.
func TestUpdateServerOverGRPC(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	ctx := t.Context()
	addr := envOf(s.Env, "ZEST_MCPGATEWAY_ADDR")
	adm := mcpgatewayv1.NewAdminServiceClient(dialService(t, addr, adminKey))
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	if _, err := adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "g", Command: "node", Args: []string{echo},
		ToolsDeny: []string{"x"}, MaxConcurrency: proto.Int32(2), Expose: proto.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	r, err := adm.UpdateServer(ctx, &mcpgatewayv1.UpdateServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "g", MaxConcurrency: proto.Int32(5)},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_concurrency", "tools_deny"}}})
	if err != nil || r.GetServer().GetMaxConcurrency() != 5 || len(r.GetServer().GetToolsDeny()) != 0 || r.GetServer().GetExpose() || r.GetServer().GetArgs()[0] != echo {
		t.Fatalf("UpdateServer: %v %v", r.GetServer(), err)
	}
	u, err := adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "g", Name: "G", Command: "node", Args: []string{echo}}})
	if err != nil || u.GetServer().GetMaxConcurrency() != 5 || u.GetServer().GetExpose() || u.GetServer().GetName() != "G" {
		t.Fatalf("a Lemonade-shaped UpsertServer: %v %v", u.GetServer(), err)
	}
	api := mcpgatewayv1.NewAdminServiceClient(dialService(t, addr, fedAPIKey))
	_, err = api.UpdateServer(ctx, &mcpgatewayv1.UpdateServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "g", Expose: proto.Bool(true)}})
	if c := status.Code(err); c != codes.PermissionDenied && c != codes.Unauthenticated {
		t.Fatalf("UpdateServer with the API key: %v", err)
	}
}

// everyField are a stdio and a streamable-http server that between them set every field of a
// server config to something other than its default (a field set by neither fails
// TestEveryConfigFieldIsHandled: give it a value here).
var everyField = []map[string]any{
	{"id": "every-stdio", "name": "Every stdio", "transport": "stdio", "command": "node", "args": []any{"a.js", "--flag"},
		"working_dir": "/tmp", "env": map[string]any{"K": "${K}"}, "enabled": false, "timeout_ms": 5000.0,
		"tools_allow": []any{"echo", "get-*"}, "tools_deny": []any{"get-env"}, "expose": false, "tool_host": "th-guard",
		"max_output_bytes": 2048.0, "sandbox": map[string]any{"enabled": false, "network": "proxy", "allow_hosts": []any{"api.example.com"},
			"writable_paths": []any{"/tmp/w"}, "readable_paths": []any{"/tmp/r"}, "memory_bytes": "1073741824", "max_pids": 64.0,
			"cpu_seconds": 60.0, "open_files": 256.0},
		"rate_limit": "5/s:9", "max_concurrency": 2.0, "approval": "required", "approval_tools": []any{"rm"}, "approval_by": "client",
		"pin_tools": false},
	{"id": "every-http", "name": "Every http", "transport": "streamable-http", "url": "http://tools.example/mcp", "bearer_token": "${TOKEN}",
		"allow_insecure_http": true, "enabled": false},
	// oauth and bearer_token exclude each other: a third server (grant token_exchange, which
	// reads every field of the block but the client key's: TestEveryConfigFieldIsHandled adds
	// a fourth with a key file it writes).
	{"id": "every-oauth", "transport": "streamable-http", "url": "https://tools.example/mcp", "enabled": false,
		"oauth": map[string]any{"client_id": "zest", "client_secret": "${UP_SECRET}", "scopes": []any{"read"},
			"authorization_server": "https://login.example.com", "grant": "token_exchange", "audience": "tools",
			"requested_token_type": "urn:ietf:params:oauth:token-type:jwt"}},
}

// TestEveryConfigFieldIsHandled guards the one contract of a server config: every field of
// ServerConfig (and of its sandbox) is read from JSON by the edge (POST and PATCH), stored,
// and shown in the server's state (GET /internal/mcp/servers, flat); zestctl has a flag for
// it; the console's form shows it or names it in NOT_IN_FORM (a PATCH leaves those as stored).
func TestEveryConfigFieldIsHandled(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	// The oauth fields grant token_exchange leaves out, on a server of its own: a client key
	// (private_key_jwt), which excludes client_secret and must be a key mcpgateway reads.
	keyFile, _, _ := writeClientKey(t)
	everyField := append(slices.Clone(everyField), map[string]any{"id": "every-oauth-key", "transport": "streamable-http", "url": "https://tools.example/mcp",
		"enabled": false, "oauth": map[string]any{"client_id": "zest", "grant": "client_credentials", "client_key_file": keyFile, "client_key_id": "k1", "dpop": false}})
	fields := (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().Fields()
	sandbox := (&mcpgatewayv1.Sandbox{}).ProtoReflect().Descriptor().Fields()
	set := func(name string) bool {
		return slices.ContainsFunc(everyField, func(cfg map[string]any) bool { _, ok := cfg[name]; return ok })
	}
	for i := range fields.Len() {
		if name := string(fields.Get(i).Name()); !set(name) {
			t.Errorf("everyField sets no %s: give it a value other than its default", name)
		}
	}
	for i := range sandbox.Len() {
		if name := string(sandbox.Get(i).Name()); everyField[0]["sandbox"].(map[string]any)[name] == nil {
			t.Errorf("everyField's sandbox sets no %s", name)
		}
	}
	oauth := (&mcpgatewayv1.UpstreamOAuth{}).ProtoReflect().Descriptor().Fields()
	for i := range oauth.Len() {
		name := string(oauth.Get(i).Name())
		if !slices.ContainsFunc(everyField, func(cfg map[string]any) bool { o, _ := cfg["oauth"].(map[string]any); _, ok := o[name]; return ok }) {
			t.Errorf("no oauth block of everyField sets %s", name)
		}
	}

	// Read by the edge, stored, shown: each as sent, through POST then through PATCH.
	states := func() map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, x := range asSlice(admin(t, s, "GET", "/servers", "").JSON(t)["servers"]) {
			st := x.(map[string]any)
			out[st["id"].(string)] = st
		}
		return out
	}
	shown := func(how string) {
		t.Helper()
		all := states()
		for _, cfg := range everyField {
			st := all[cfg["id"].(string)]
			for k, want := range cfg {
				got := st[k]
				if k == "sandbox" || k == "oauth" { // the state spells every field of the block
					got = map[string]any{}
					for sk := range want.(map[string]any) {
						got.(map[string]any)[sk] = st[k].(map[string]any)[sk]
					}
				}
				if !jsonEqual(got, want) {
					t.Errorf("%s: %s's %s is shown as %v, want %v", how, cfg["id"], k, got, want)
				}
			}
		}
	}
	for _, cfg := range everyField {
		registerServer(t, s, cfg)
	}
	shown("after POST")
	for _, cfg := range everyField {
		id := cfg["id"].(string)
		admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": id, "command": "node", "transport": "stdio"})) // a Lemonade-shaped upsert over both
		patch := map[string]any{}
		for k, v := range cfg {
			if k != "id" {
				patch[k] = v
			}
		}
		if cfg["transport"] == "streamable-http" {
			patch["command"] = nil
		}
		if r := do(t, "PATCH", s.URL+"/internal/mcp/servers/"+id, jsonBody(t, patch), "Content-Type: application/json", adminAuth); r.Status != 200 {
			t.Fatalf("PATCH %s: %d %s", id, r.Status, r.Body)
		}
	}
	shown("after PATCH")

	// zestctl: a flag for each field.
	help := mustCtl(t, s, 0, "servers", "edit", "--help").Stdout
	for i := range fields.Len() {
		flag := "--" + strings.ReplaceAll(string(fields.Get(i).Name()), "_", "-")
		if fields.Get(i).Name() == "args" {
			flag = "--arg"
		}
		if !strings.Contains(help, flag+" ") {
			t.Errorf("zestctl servers edit has no %s flag", flag)
		}
	}

	// The console: the form shows each field, or NOT_IN_FORM names it.
	js, err := os.ReadFile(filepath.Join(repoRoot(), "gateway", "console", "static", "ui", "views", "servers.js"))
	if err != nil {
		t.Fatal(err)
	}
	handled := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bname: '([a-z_]+)'`).FindAllStringSubmatch(string(js), -1) {
		handled[m[1]] = true
	}
	list := regexp.MustCompile(`const NOT_IN_FORM = \[([^\]]*)\]`).FindStringSubmatch(string(js))
	if list == nil {
		t.Fatal("servers.js has no NOT_IN_FORM list")
	}
	for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(list[1], -1) {
		handled[m[1]] = true
	}
	for i := range fields.Len() {
		if name := string(fields.Get(i).Name()); !handled[name] {
			t.Errorf("the console's server form neither shows %s nor names it in NOT_IN_FORM", name)
		}
	}
}
