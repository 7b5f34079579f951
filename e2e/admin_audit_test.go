package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/etcdtest"
	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestAudit: admin changes (a server and a preset registered, a refused delete) and one tool
// call on each path (the admin API, /mcp/servers/{id}, /mcp/presets/{id}, /mcp's built-in
// tools, the chat loop) are in the audit trail, newest first, with who (a hash of the key),
// the upserts' changed fields and no argument or result; the filters and paging select among
// them; the export is JSON lines, oldest first, that parse. With ZEST_AUDIT_DETAILS=true the
// tool calls keep their arguments and results.
func TestAudit(t *testing.T) {
	setup := func(t *testing.T, extra ...string) *Suite {
		u := mcptest.Start(t, mcptest.Options{})
		s := startSuite(t, append([]string{"LEMONADE_API_KEY=" + fedAPIKey, "LEMONADE_ADMIN_API_KEY=" + adminKey}, extra...)...)
		registerServer(t, s, map[string]any{"id": "aud", "transport": "streamable-http", "url": u.URL, "timeout_ms": 10000})
		if r := admin(t, s, "POST", "/presets", `{"id":"audp","model":"builtin-llm","mcp_server_ids":["aud"]}`); r.Status != 200 {
			t.Fatalf("preset: %d %s", r.Status, r.Body)
		}
		return s
	}
	echo := func(id int, name, text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`, id, name, text)
	}
	everyPath := func(t *testing.T, s *Suite) {
		if r := callTool(t, s, "aud", "echo", map[string]any{"text": "secret-admin"}); r.Status != 200 {
			t.Fatalf("admin call: %d %s", r.Status, r.Body)
		}
		sid, _ := fedInit(t, s, "aud", "2025-06-18", fedAPIAuth)
		if r := fedCall(t, s, "aud", sid, echo(2, "echo", "secret-fed"), fedAPIAuth); r.Status != 200 {
			t.Fatalf("federated call: %d %s", r.Status, r.Body)
		}
		psid, _ := presetInit(t, s, "audp", fedAPIAuth)
		if r := presetCall(t, s, "audp", psid, echo(2, "mcp_aud__echo", "secret-preset"), fedAPIAuth); r.Status != 200 {
			t.Fatalf("preset call: %d %s", r.Status, r.Body)
		}
		msid, _ := mcpInit(t, s, "2025-06-18", fedAPIAuth)
		if r := mcpCall(t, s, msid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`, fedAPIAuth); r.Status != 200 {
			t.Fatalf("/mcp call: %d %s", r.Status, r.Body)
		}
		chat := do(t, "POST", s.URL+"/api/v1/chat/completions", `{"preset":"audp","tool_choice":{"type":"function","function":{"name":"mcp_aud__echo"}},
			"messages":[{"role":"user","content":"say {\"text\":\"secret-chat\"}"}]}`, "Content-Type: application/json", fedAPIAuth)
		if chat.Status != 200 {
			t.Fatalf("chat: %d %s", chat.Status, chat.Body)
		}
	}

	t.Run("admin changes and every path, no details", func(t *testing.T) {
		s := setup(t)
		if r := admin(t, s, "DELETE", "/presets/none", ""); r.Status != 404 {
			t.Fatalf("delete of an unknown preset: %d %s", r.Status, r.Body)
		}
		everyPath(t, s)
		a := waitAudit(t, s, "", 8)
		adm, api := who(adminKey), who(fedAPIKey)
		want := strings.Join([]string{ // newest first
			"tool/chat/aud.echo/" + api + "/ok",
			"tool/mcp/lemonade.lemonade_list_models/" + api + "/ok",
			"tool/mcp/aud.echo/" + api + "/ok",
			"tool/mcp/aud.echo/" + api + "/ok",
			"tool/admin/aud.echo/" + adm + "/ok",
			"admin/delete_preset/none/" + adm + "/not_found",
			"admin/upsert_preset/audp/" + adm + "/ok",
			"admin/upsert_server/aud/" + adm + "/ok",
		}, "\n")
		if got := summary(a.Entries); got != want {
			t.Fatalf("audit trail:\n%s\nwant\n%s", got, want)
		}
		if a.Details || a.Retention != "720h0m0s" || a.MaxEntries != 100000 || a.Dropped != "0" || a.Failed != "0" || a.NextBefore != "" {
			t.Fatalf("settings: %+v", a)
		}
		up := a.Entries[7]
		if strings.Join(up.Changed, ",") != "id,name,transport,url,enabled,timeout_ms,expose" || up.ServerID != "aud" || up.DurationMs == nil {
			t.Fatalf("upsert entry: %+v", up)
		}
		if a.Entries[1].PresetID != "" || a.Entries[2].PresetID != "audp" || a.Entries[5].Error == "" {
			t.Fatalf("entries: %+v", a.Entries)
		}
		_, raw := listAudit(t, s, "")
		for _, secret := range []string{"secret", fedAPIKey, adminKey} {
			if strings.Contains(string(raw.Body), secret) {
				t.Fatalf("the trail shows %q: %s", secret, raw.Body)
			}
		}

		// Filters and paging.
		if a, _ := listAudit(t, s, "?kind=admin"); len(a.Entries) != 3 {
			t.Errorf("kind=admin: %s", summary(a.Entries))
		}
		if a, _ := listAudit(t, s, "?kind=tool&who="+adm); len(a.Entries) != 1 || a.Entries[0].Action != "admin" {
			t.Errorf("kind=tool&who=admin's: %s", summary(a.Entries))
		}
		if a, _ := listAudit(t, s, "?server=aud"); len(a.Entries) != 5 {
			t.Errorf("server=aud (4 calls and the upsert): %s", summary(a.Entries))
		}
		var pages []string
		query := "?limit=3"
		for range 5 {
			p, r := listAudit(t, s, query)
			if r.Status != 200 {
				t.Fatalf("page: %d %s", r.Status, r.Body)
			}
			pages = append(pages, fmt.Sprint(len(p.Entries)))
			if p.NextBefore == "" {
				break
			}
			query = "?limit=3&before=" + p.NextBefore
		}
		if strings.Join(pages, ",") != "3,3,2" {
			t.Errorf("pages of 3: %v", pages)
		}
		if a, _ := listAudit(t, s, "?after="+a.Entries[1].ID); len(a.Entries) != 1 || a.Entries[0].Action != "chat" {
			t.Errorf("after the second newest: %s", summary(a.Entries))
		}
		if a, _ := listAudit(t, s, "?after="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); len(a.Entries) != 0 {
			t.Errorf("after an hour from now: %s", summary(a.Entries))
		}
		for q, want := range map[string]string{"?kind=admins": "kind", "?after=yesterday": "after", "?limit=1001": "limit"} {
			if _, r := listAudit(t, s, q); r.Status != 400 || !strings.Contains(errMessage(t, r), want) {
				t.Errorf("%s: %d %s", q, r.Status, r.Body)
			}
		}
		if r := do(t, "GET", s.URL+"/internal/mcp/audit", "", fedAPIAuth); r.Status != 401 {
			t.Errorf("the list with the API key: %d %s", r.Status, r.Body)
		}
		if r := do(t, "GET", s.URL+"/internal/mcp/audit/export", "", fedAPIAuth); r.Status != 401 {
			t.Errorf("the export with the API key: %d %s", r.Status, r.Body)
		}

		// The export: JSON lines, oldest first, the same entries.
		r := admin(t, s, "GET", "/audit/export", "")
		if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-ndjson" || !strings.HasPrefix(r.Header.Get("Content-Disposition"), `attachment; filename="zest-audit-`) {
			t.Fatalf("export: %d %v %s", r.Status, r.Header, r.Body)
		}
		var lines []auditEntry
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		for sc.Scan() {
			var e auditEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ID == "" {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			lines = append(lines, e)
		}
		if len(lines) != 8 || !bytes.HasSuffix(r.Body, []byte("}\n")) {
			t.Fatalf("export of %d lines: %s", len(lines), r.Body)
		}
		for i, e := range lines {
			if e.ID != a.Entries[7-i].ID {
				t.Fatalf("export line %d is %s, want %s (oldest first)", i, e.ID, a.Entries[7-i].ID)
			}
		}
		if r := admin(t, s, "GET", "/audit/export?kind=admin&server=aud", ""); r.Status != 200 || bytes.Count(r.Body, []byte("\n")) != 1 {
			t.Errorf("export kind=admin&server=aud: %d %s", r.Status, r.Body)
		}
		if r := admin(t, s, "GET", "/audit/export?before=nope", ""); r.Status != 400 || !strings.Contains(errMessage(t, r), "before") {
			t.Errorf("export before=nope: %d %s", r.Status, r.Body)
		}
		if r := admin(t, s, "POST", "/audit/export", ""); r.Status != 405 {
			t.Errorf("POST export: %d %s", r.Status, r.Body)
		}
	})

	t.Run("details", func(t *testing.T) {
		s := setup(t, "ZEST_AUDIT_DETAILS=true")
		everyPath(t, s)
		a := waitAudit(t, s, "?kind=tool", 5)
		if !a.Details || len(a.Entries) != 5 {
			t.Fatalf("details: %+v", a)
		}
		for i, text := range []string{"secret-chat", "", "secret-preset", "secret-fed", "secret-admin"} {
			e := a.Entries[i]
			if text != "" && (!strings.Contains(e.Arguments, text) || !strings.Contains(e.Result, text)) {
				t.Errorf("entry %d (%s): arguments %q, result %q", i, e.Action, e.Arguments, e.Result)
			}
		}
	})

	// SIGTERM right after the calls (within the 100 ms the batch waits): the queue is flushed
	// on shutdown, and the trail is the registry's, so the restarted mcpgateway lists it all.
	t.Run("flushed on shutdown, kept across a restart", func(t *testing.T) {
		s := setup(t)
		for i := range 3 {
			if r := callTool(t, s, "aud", "echo", map[string]any{"text": fmt.Sprint(i)}); r.Status != 200 {
				t.Fatalf("admin call: %d %s", r.Status, r.Body)
			}
		}
		s.Kill("zest-mcpgateway", syscall.SIGTERM)
		s.Start("zest-mcpgateway")
		s.WaitHealthy()
		if a := waitAudit(t, s, "", 5); len(a.Entries) != 5 || a.Entries[0].Tool != "echo" || a.Entries[4].Action != "upsert_server" {
			t.Fatalf("after the restart:\n%s", summary(a.Entries))
		}
	})

	t.Run("off", func(t *testing.T) {
		s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_AUDIT_MAX_ENTRIES=0")
		if _, r := listAudit(t, s, ""); r.Status != 400 || !strings.Contains(errMessage(t, r), "ZEST_AUDIT_MAX_ENTRIES") {
			t.Fatalf("the trail off: %d %s", r.Status, r.Body)
		}
	})
}

// TestAuditAcrossReplicas: two mcpgateways (each behind its own edge) on one etcd share one
// trail: a server registered through A and tool calls through A and B are listed, in order,
// through either, and their ids never collide.
func TestAuditAcrossReplicas(t *testing.T) {
	// An HTTP server both replicas connect to, each with its own session (closed last).
	up := server.NewMCPServer("shared", "1.0.0", server.WithToolCapabilities(true))
	up.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo:" + req.GetString("text", "")), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(up))
	t.Cleanup(hs.Close)
	etcd := etcdtest.Start(t, 1)
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_REGISTRY=etcd://"+strings.Join(etcd.Endpoints(), ",")+"/e2e-audit/")
	a, b := &Suite{URL: r.urls[0], t: t}, &Suite{URL: r.urls[1], t: t}
	registerServer(t, a, map[string]any{"id": "shared", "transport": "streamable-http", "url": hs.URL + "/mcp", "timeout_ms": 10000})
	waitfor.NoError(t, 5*time.Second, func() error { // B follows the registry's watch
		if r := callTool(t, b, "shared", "echo", map[string]any{"text": "b0"}); r.Status != 200 {
			return fmt.Errorf("through B: %d %s", r.Status, r.Body)
		}
		return nil
	})
	for i := range 3 {
		for _, s := range []*Suite{a, b} {
			if r := callTool(t, s, "shared", "echo", map[string]any{"text": fmt.Sprint(i)}); r.Status != 200 {
				t.Fatalf("call: %d %s", r.Status, r.Body)
			}
		}
	}
	want := waitAudit(t, a, "?server=shared", 8) // the upsert, B's first call, 6 calls
	if len(want.Entries) != 8 || want.Entries[7].Action != "upsert_server" {
		t.Fatalf("through A:\n%s", summary(want.Entries))
	}
	got := waitAudit(t, b, "?server=shared", 8)
	ids := map[string]bool{}
	for i, e := range got.Entries {
		ids[e.ID] = true
		if e.ID != want.Entries[i].ID {
			t.Fatalf("A and B list different trails:\n%s\n--\n%s", summary(want.Entries), summary(got.Entries))
		}
	}
	if len(ids) != 8 {
		t.Fatalf("ids collide: %v", ids)
	}
}

// auditTrimmed is one item of a trim entry's trimmed.
type auditTrimmed struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// trimEntry is an entry of kind "trim", as the edge writes it.
type trimEntry struct {
	Kind    string         `json:"kind"`
	Who     string         `json:"who"`
	Action  string         `json:"action"`
	Outcome string         `json:"outcome"`
	Trimmed []auditTrimmed `json:"trimmed"`
}

// idTime is the time an entry was stored at, as a trim reports it: the Unix nanoseconds of
// its id's first 16 hex digits, in RFC 3339 with milliseconds.
func idTime(t *testing.T, id string) string {
	t.Helper()
	ns, err := strconv.ParseUint(id[:16], 16, 64)
	if err != nil {
		t.Fatalf("entry id %q: %v", id, err)
	}
	return time.Unix(0, int64(ns)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// trims lists the trail's own entries (kind trim), newest first.
func trims(t *testing.T, s *Suite) []trimEntry {
	t.Helper()
	r := admin(t, s, "GET", "/audit?kind=trim", "")
	var a struct {
		Entries []trimEntry `json:"entries"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
		t.Fatalf("audit?kind=trim: %d %s", r.Status, r.Body)
	}
	return a.Entries
}

// adminChanges makes four admin changes, approval decisions among them: a server and a preset
// registered, a refused delete, a decision on an approval that does not exist.
func adminChanges(t *testing.T, s *Suite, url string) {
	t.Helper()
	registerServer(t, s, map[string]any{"id": "aud", "transport": "streamable-http", "url": url, "timeout_ms": 10000})
	if r := admin(t, s, "POST", "/presets", `{"id":"audp","model":"builtin-llm","mcp_server_ids":["aud"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "DELETE", "/presets/none", ""); r.Status != 404 {
		t.Fatalf("delete of an unknown preset: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/approvals/0123456789abcdef0123456789abcdef/deny", ""); r.Status != 404 {
		t.Fatalf("a decision on an unknown approval: %d %s", r.Status, r.Body)
	}
}

// batchedCalls posts one JSON-RPC batch of n tools/call of echo to /mcp/servers/aud in a
// 2025-03-26 session (the revision that has batches).
func batchedCalls(t *testing.T, s *Suite, session string, n int) {
	t.Helper()
	var calls []string
	for i := range n {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b%d"}}}`, i+10, i))
	}
	r := fedCall(t, s, "aud", session, "["+strings.Join(calls, ",")+"]", fedAPIAuth)
	var answers []map[string]any
	if r.Status != 200 || json.Unmarshal(r.Body, &answers) != nil || len(answers) != n {
		t.Fatalf("batch of %d: %d %s", n, r.Status, r.Body)
	}
}

// restartForTrim stops mcpgateway (SIGTERM flushes its queue) and starts it again: the trail
// is trimmed when it starts (then every 5 minutes). It waits until query lists n entries.
func restartForTrim(t *testing.T, s *Suite, query string, n int) {
	t.Helper()
	s.Kill("zest-mcpgateway", syscall.SIGTERM)
	s.Start("zest-mcpgateway")
	s.WaitHealthy()
	waitfor.NoError(t, 10*time.Second, func() error {
		if a, r := listAudit(t, s, query); r.Status != 200 || len(a.Entries) != n {
			return fmt.Errorf("audit%s: %d entries, want %d after the trim (%d %s)", query, len(a.Entries), n, r.Status, r.Body)
		}
		return nil
	})
}

// waitTrims waits for the trail's report of a trim (an entry of kind trim).
func waitTrims(t *testing.T, s *Suite) []trimEntry {
	t.Helper()
	var got []trimEntry
	waitfor.NoError(t, 10*time.Second, func() error {
		if got = trims(t, s); len(got) == 0 {
			return fmt.Errorf("no trim entry in the trail")
		}
		return nil
	})
	return got
}

// TestAuditKeepsAdminChangesApart: admin changes and approval decisions are kept apart from
// the tool calls, each under its own bound (ZEST_AUDIT_MAX_ENTRIES for tool calls,
// ZEST_AUDIT_MAX_ADMIN_ENTRIES for the rest): tool calls past their bound, batched or not,
// never push an admin entry out, and the trim that removes entries says in the trail (an
// entry of kind trim, by mcpgateway) and in mcpgateway's log which it removed: their kind,
// how many and the time span.
func TestAuditKeepsAdminChangesApart(t *testing.T) {
	const toolBound = 20
	toolCallsPastTheirBound := func(t *testing.T, registry ...string) {
		u := mcptest.Start(t, mcptest.Options{})
		s := startSuite(t, append([]string{"LEMONADE_API_KEY=" + fedAPIKey, "LEMONADE_ADMIN_API_KEY=" + adminKey,
			fmt.Sprintf("ZEST_AUDIT_MAX_ENTRIES=%d", toolBound), "ZEST_LOG_LEVEL=info"}, registry...)...)
		adminChanges(t, s, u.URL)
		sid, _ := fedInit(t, s, "aud", "2025-03-26", fedAPIAuth)
		for range 4 {
			batchedCalls(t, s, sid, 10)
		}
		for i := range 5 {
			if r := callTool(t, s, "aud", "echo", map[string]any{"text": fmt.Sprint(i)}); r.Status != 200 {
				t.Fatalf("admin call: %d %s", r.Status, r.Body)
			}
		}
		before := waitAudit(t, s, "?kind=tool", 45)
		if len(before.Entries) != 45 {
			t.Fatalf("%d tool calls in the trail, want 45", len(before.Entries))
		}
		restartForTrim(t, s, "?kind=tool", toolBound)

		a, _ := listAudit(t, s, "?kind=admin")
		want := strings.Join([]string{
			"admin/deny_tool_call/0123456789abcdef0123456789abcdef/" + who(adminKey) + "/not_found",
			"admin/delete_preset/none/" + who(adminKey) + "/not_found",
			"admin/upsert_preset/audp/" + who(adminKey) + "/ok",
			"admin/upsert_server/aud/" + who(adminKey) + "/ok",
		}, "\n")
		if got := summary(a.Entries); got != want {
			t.Fatalf("admin entries after %d tool calls with a bound of %d:\n%s\nwant\n%s", 45, toolBound, got, want)
		}
		tools, _ := listAudit(t, s, "?kind=tool")
		if len(tools.Entries) != toolBound || tools.Entries[0].ID != before.Entries[0].ID || tools.Entries[toolBound-1].ID != before.Entries[toolBound-1].ID {
			t.Fatalf("tool calls after the trim: %d, want the newest %d", len(tools.Entries), toolBound)
		}
		removed := before.Entries[toolBound:] // newest first
		got := waitTrims(t, s)
		tr := got[0]
		if len(got) != 1 || tr.Kind != "trim" || tr.Action != "trim" || tr.Who != "mcpgateway" || tr.Outcome != "ok" || len(tr.Trimmed) != 1 {
			t.Fatalf("trim entries: %+v", got)
		}
		if w := (auditTrimmed{Kind: "tool", Reason: "max_entries", Count: 25, From: idTime(t, removed[len(removed)-1].ID), To: idTime(t, removed[0].ID)}); tr.Trimmed[0] != w {
			t.Fatalf("the trim reported %+v, want %+v", tr.Trimmed[0], w)
		}
		logs := s.Logs("zest-mcpgateway")
		if !strings.Contains(logs, `msg="audit entries trimmed" service=zest-mcpgateway kind=tool reason=max_entries removed=25 from=`+idTime(t, removed[len(removed)-1].ID)+" to="+idTime(t, removed[0].ID)) {
			t.Fatalf("no log line of the trim:\n%s", logs)
		}
		if r := mustCtl(t, s, 0, "audit", "list", "--kind", "trim"); !strings.Contains(r.Stdout, "removed 25 tool (max_entries) "+idTime(t, removed[len(removed)-1].ID)) {
			t.Errorf("zestctl audit list --kind trim:\n%s", r.Stdout)
		}
		if all, _ := listAudit(t, s, ""); len(all.Entries) != toolBound+4+1 {
			t.Fatalf("the whole trail lists %d entries, want %d tool calls, 4 admin changes and the trim:\n%s", len(all.Entries), toolBound, summary(all.Entries))
		}
	}
	t.Run("tool calls past their bound", func(t *testing.T) { toolCallsPastTheirBound(t) })
	t.Run("tool calls past their bound, on etcd", func(t *testing.T) {
		etcd := etcdtest.Start(t, 1)
		toolCallsPastTheirBound(t, "ZEST_REGISTRY=etcd://"+strings.Join(etcd.Endpoints(), ",")+"/e2e-audit-kinds/")
	})

	t.Run("admin entries past their own bound", func(t *testing.T) {
		u := mcptest.Start(t, mcptest.Options{})
		s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_AUDIT_MAX_ADMIN_ENTRIES=2")
		adminChanges(t, s, u.URL)
		for i := range 3 {
			if r := callTool(t, s, "aud", "echo", map[string]any{"text": fmt.Sprint(i)}); r.Status != 200 {
				t.Fatalf("admin call: %d %s", r.Status, r.Body)
			}
		}
		before := waitAudit(t, s, "", 7)
		restartForTrim(t, s, "?kind=admin", 2)
		a, _ := listAudit(t, s, "?kind=admin")
		if len(a.Entries) != 2 || a.Entries[0].Action != "deny_tool_call" || a.Entries[1].Action != "delete_preset" {
			t.Fatalf("admin entries with a bound of 2:\n%s", summary(a.Entries))
		}
		if tools, _ := listAudit(t, s, "?kind=tool"); len(tools.Entries) != 3 {
			t.Fatalf("tool calls: %s", summary(tools.Entries))
		}
		if a.MaxAdminEntries != 2 || a.MaxEntries != 100000 {
			t.Fatalf("bounds in the answer: max_entries %d, max_admin_entries %d", a.MaxEntries, a.MaxAdminEntries)
		}
		upsertServer, upsertPreset := before.Entries[6], before.Entries[5]
		got := waitTrims(t, s)
		if w := (auditTrimmed{Kind: "admin", Reason: "max_entries", Count: 2, From: idTime(t, upsertServer.ID), To: idTime(t, upsertPreset.ID)}); len(got) != 1 || len(got[0].Trimmed) != 1 || got[0].Trimmed[0] != w {
			t.Fatalf("the trim reported %+v, want %+v", got, w)
		}
	})
}

// TestAuditWhoOfKeylessCallers: with no API key set the API routes take any token, so a token
// names nobody: the audit trail, the activity and approvals call its holder anonymous, as
// they do a caller with no token, and never by a hash of a token the caller chose (which
// would let a caller pick its name, or take another's). A configured key (the admin key,
// here) is still named by its hash.
func TestAuditWhoOfKeylessCallers(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=30s")
	registerServer(t, s, map[string]any{"id": "aud", "transport": "streamable-http", "url": u.URL, "timeout_ms": 10000})
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}, "approval": "required"})
	const chosen = "Authorization: Bearer a-token-the-caller-chose"
	echo := func(text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, text)
	}
	for _, c := range []struct{ text, auth string }{{"none", ""}, {"chosen", chosen}, {"admin", adminAuth}} {
		sid, _ := fedInit(t, s, "aud", "2025-06-18", c.auth)
		if r := fedCall(t, s, "aud", sid, echo(c.text), c.auth); r.Status != 200 {
			t.Fatalf("call with %q: %d %s", c.auth, r.Status, r.Body)
		}
	}
	want := "anonymous,anonymous," + who(adminKey) // oldest first
	var act activityAnswer
	waitfor.NoError(t, 10*time.Second, func() error {
		if act, _ = listActivity(t, s, ""); len(act.Calls) != 3 {
			return fmt.Errorf("%d calls in the activity, want 3", len(act.Calls))
		}
		return nil
	})
	if got := act.Calls[2].Who + "," + act.Calls[1].Who + "," + act.Calls[0].Who; got != want {
		t.Errorf("the activity names the callers %s, want %s", got, want)
	}
	a := waitAudit(t, s, "?kind=tool", 3)
	if got := a.Entries[2].Who + "," + a.Entries[1].Who + "," + a.Entries[0].Who; got != want {
		t.Errorf("the audit trail names the callers %s, want %s", got, want)
	}
	if a, _ := listAudit(t, s, "?who="+who("a-token-the-caller-chose")); len(a.Entries) != 0 {
		t.Errorf("a chosen token's hash names entries:\n%s", summary(a.Entries))
	}

	// A chat with the chosen token waits for approval: the approval names its caller
	// anonymous too.
	body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"guarded"},
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "mcp_guarded__echo"}},
		"messages":    []any{map[string]any{"role": "user", "content": `{"text":"held"}`}}})
	chat := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", s.URL+"/api/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer a-token-the-caller-chose")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("chat: %d", resp.StatusCode)
			}
		}
		chat <- err
	}()
	var pending map[string]any
	waitfor.NoError(t, 10*time.Second, func() error {
		list := asSlice(admin(t, s, "GET", "/approvals", "").JSON(t)["approvals"])
		if len(list) != 1 {
			return fmt.Errorf("%d pending approvals, want 1", len(list))
		}
		pending = list[0].(map[string]any)
		return nil
	})
	if pending["who"] != "anonymous" {
		t.Errorf("the approval names its caller %v, want anonymous", pending["who"])
	}
	if r := admin(t, s, "POST", "/approvals/"+pending["id"].(string)+"/approve", ""); r.Status != 200 ||
		r.JSON(t)["approval"].(map[string]any)["decided_by"] != who(adminKey) {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if err := <-chat; err != nil {
		t.Fatal(err)
	}
}
