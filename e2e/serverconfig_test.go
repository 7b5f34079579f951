package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
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
	policy := map[string]any{"approval": "required", "approval_tools": []any{"echo"}, "approval_by": "client",
		"tools_deny": []any{"get-env"}, "rate_limit": "100/m", "max_concurrency": float64(3), "max_output_bytes": float64(4096)}
	guarded := map[string]any{"id": "guarded", "command": "node", "args": []string{everything}, "expose": false}
	for k, v := range policy {
		guarded[k] = v
	}
	registerServer(t, s, guarded)
	registerServer(t, s, map[string]any{"id": "open", "command": "node", "args": []string{everything}, "tools_deny": []string{"get-env"}})

	st := gui3EditSave(t, s, "guarded", nil)
	st = gui3EditSave(t, s, "guarded", func(d map[string]string) { d["name"] = "Guarded server" })
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
