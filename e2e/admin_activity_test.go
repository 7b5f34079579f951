package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
)

// activityCall is one call of GET /internal/mcp/activity, as the edge writes it.
type activityCall struct {
	ID                 string `json:"id"` // proto3 JSON writes a uint64 as a string
	Time               string `json:"time"`
	Path               string `json:"path"`
	Who                string `json:"who"`
	ServerID           string `json:"server_id"`
	Tool               string `json:"tool"`
	ChatName           string `json:"chat_name"`
	PresetID           string `json:"preset_id"`
	DurationMs         *int   `json:"duration_ms"`
	Outcome            string `json:"outcome"`
	Error              string `json:"error"`
	Arguments          string `json:"arguments"`
	ArgumentsTruncated bool   `json:"arguments_truncated"`
	Result             string `json:"result"`
}

type activityAnswer struct {
	Calls   []activityCall `json:"calls"`
	Latest  string         `json:"latest"`
	Details bool           `json:"details"`
	Size    int            `json:"size"`
}

func listActivity(t *testing.T, s *Suite, query string) (activityAnswer, Response) {
	t.Helper()
	r := admin(t, s, "GET", "/activity"+query, "")
	var a activityAnswer
	if r.Status == 200 {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatalf("%s: %v", r.Body, err)
		}
	}
	return a, r
}

// TestActivity: one tool call on each path — the admin API, /mcp/servers/{id} (one answered,
// one failing), /mcp/presets/{id}, /mcp's own built-in tools and the chat loop of a preset —
// is listed by GET /internal/mcp/activity, newest first, with who made it (a hash of the key,
// never the key), its server, tool, preset and outcome, and without its arguments or result;
// after and limit select among them. With ZEST_ACTIVITY_DETAILS=true the arguments appear.
func TestActivity(t *testing.T) {
	setup := func(t *testing.T, extra ...string) *Suite {
		u := mcptest.Start(t, mcptest.Options{})
		s := startSuite(t, append([]string{"LEMONADE_API_KEY=" + fedAPIKey, "LEMONADE_ADMIN_API_KEY=" + adminKey}, extra...)...)
		registerServer(t, s, map[string]any{"id": "act", "transport": "streamable-http", "url": u.URL, "timeout_ms": 10000})
		if r := admin(t, s, "POST", "/presets", `{"id":"actp","model":"builtin-llm","mcp_server_ids":["act"]}`); r.Status != 200 {
			t.Fatalf("preset: %d %s", r.Status, r.Body)
		}
		return s
	}
	echo := func(id int, name, text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`, id, name, text)
	}

	t.Run("every path, no details", func(t *testing.T) {
		s := setup(t)
		if r := callTool(t, s, "act", "echo", map[string]any{"text": "secret-admin"}); r.Status != 200 {
			t.Fatalf("admin call: %d %s", r.Status, r.Body)
		}
		sid, _ := fedInit(t, s, "act", "2025-06-18", fedAPIAuth)
		if r := fedCall(t, s, "act", sid, echo(2, "echo", "secret-fed"), fedAPIAuth); r.Status != 200 || !strings.Contains(string(r.Body), "secret-fed") {
			t.Fatalf("federated call: %d %s", r.Status, r.Body)
		}
		if r := fedCall(t, s, "act", sid, echo(3, "nope", "secret-nope"), fedAPIAuth); r.Status != 200 || !strings.Contains(string(r.Body), "Unknown tool") {
			t.Fatalf("federated call of an unknown tool: %d %s", r.Status, r.Body)
		}
		psid, _ := presetInit(t, s, "actp", fedAPIAuth)
		if r := presetCall(t, s, "actp", psid, echo(2, "mcp_act__echo", "secret-preset"), fedAPIAuth); r.Status != 200 || !strings.Contains(string(r.Body), "secret-preset") {
			t.Fatalf("preset call: %d %s", r.Status, r.Body)
		}
		msid, _ := mcpInit(t, s, "2025-06-18", fedAPIAuth)
		if r := mcpCall(t, s, msid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`, fedAPIAuth); r.Status != 200 {
			t.Fatalf("/mcp call: %d %s", r.Status, r.Body)
		}
		chat := do(t, "POST", s.URL+"/api/v1/chat/completions", `{"preset":"actp","tool_choice":{"type":"function","function":{"name":"mcp_act__echo"}},
			"messages":[{"role":"user","content":"say {\"text\":\"secret-chat\"}"}]}`, "Content-Type: application/json", fedAPIAuth)
		if chat.Status != 200 || !strings.Contains(string(chat.Body), "The tool returned: http-echo:secret-chat") {
			t.Fatalf("chat: %d %s", chat.Status, chat.Body)
		}

		a, r := listActivity(t, s, "")
		if r.Status != 200 || a.Latest != "6" || a.Details || a.Size != 500 || len(a.Calls) != 6 {
			t.Fatalf("activity: %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "secret") || strings.Contains(string(r.Body), fedAPIKey) || strings.Contains(string(r.Body), adminKey) {
			t.Fatalf("the activity shows arguments, results or keys: %s", r.Body)
		}
		want := []activityCall{ // newest first
			{ID: "6", Path: "chat", Who: who(fedAPIKey), ServerID: "act", Tool: "echo", ChatName: "mcp_act__echo", PresetID: "actp", Outcome: "ok"},
			{ID: "5", Path: "mcp", Who: who(fedAPIKey), ServerID: "lemonade", Tool: "lemonade_list_models", Outcome: "ok"},
			{ID: "4", Path: "mcp", Who: who(fedAPIKey), ServerID: "act", Tool: "echo", ChatName: "mcp_act__echo", PresetID: "actp", Outcome: "ok"},
			{ID: "3", Path: "mcp", Who: who(fedAPIKey), ServerID: "act", Tool: "nope", Outcome: "error", Error: "tool \"nope\" of MCP server \"act\" is refused: the server never listed it, so its definition was never pinned (a server that answers a call of a tool it does not list may be pulling a rug); it becomes callable once the server lists it and an a"}, // the pinning link's refusal, cut to the ring's length
			{ID: "2", Path: "mcp", Who: who(fedAPIKey), ServerID: "act", Tool: "echo", Outcome: "ok"},
			{ID: "1", Path: "admin", Who: who(adminKey), ServerID: "act", Tool: "echo", Outcome: "ok"},
		}
		stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
		for i, w := range want {
			got := a.Calls[i]
			if !stamp.MatchString(got.Time) || got.DurationMs == nil || *got.DurationMs < 0 {
				t.Errorf("call %s: time %q, duration %v", got.ID, got.Time, got.DurationMs)
			}
			got.Time, got.DurationMs = "", nil
			if got != w {
				t.Errorf("call %d:\n got %+v\nwant %+v", i, got, w)
			}
		}

		if a, _ := listActivity(t, s, "?after=4"); len(a.Calls) != 2 || a.Calls[0].ID != "6" || a.Calls[1].ID != "5" || a.Latest != "6" {
			t.Errorf("after=4: %+v", a)
		}
		if a, _ := listActivity(t, s, "?after=2&limit=1"); len(a.Calls) != 1 || a.Calls[0].ID != "6" {
			t.Errorf("after=2&limit=1: %+v", a)
		}
		if a, r := listActivity(t, s, "?after=6"); r.Status != 200 || len(a.Calls) != 0 || a.Latest != "6" {
			t.Errorf("after=6: %d %s", r.Status, r.Body)
		}
		if _, r := listActivity(t, s, "?limit=-1"); r.Status != 400 || !strings.Contains(errMessage(t, r), "limit -1 is out of range") {
			t.Errorf("limit=-1: %d %s", r.Status, r.Body)
		}
		if r := do(t, "GET", s.URL+"/internal/mcp/activity", "", fedAPIAuth); r.Status != 401 {
			t.Errorf("with the API key: %d %s", r.Status, r.Body)
		}
	})

	t.Run("details", func(t *testing.T) {
		s := setup(t, "ZEST_ACTIVITY_DETAILS=true", "ZEST_ACTIVITY_SIZE=2")
		if r := callTool(t, s, "act", "echo", map[string]any{"text": "seen-admin"}); r.Status != 200 {
			t.Fatalf("admin call: %d %s", r.Status, r.Body)
		}
		sid, _ := fedInit(t, s, "act", "2025-06-18", fedAPIAuth)
		for i, text := range []string{"seen-fed-1", "seen-fed-2"} {
			if r := fedCall(t, s, "act", sid, echo(2+i, "echo", text), fedAPIAuth); r.Status != 200 {
				t.Fatalf("federated call: %d %s", r.Status, r.Body)
			}
		}
		a, r := listActivity(t, s, "")
		if r.Status != 200 || !a.Details || a.Size != 2 || a.Latest != "3" || len(a.Calls) != 2 {
			t.Fatalf("activity: %d %s", r.Status, r.Body)
		}
		if c := a.Calls[0]; c.Arguments != `{"text":"seen-fed-2"}` || !strings.Contains(c.Result, "http-echo:seen-fed-2") || c.ArgumentsTruncated {
			t.Errorf("newest call: %+v", c)
		}
		if c := a.Calls[1]; c.ID != "2" || c.Arguments != `{"text":"seen-fed-1"}` {
			t.Errorf("the ring of 2 keeps calls 2 and 3: %+v", c)
		}
	})

	t.Run("a bad ZEST_ACTIVITY_SIZE is refused at startup", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(binDir, "zest-mcpgateway"))
		cmd.Env = append(os.Environ(), "ZEST_DATA_DIR="+t.TempDir(), "ZEST_SERVICE_KEY="+serviceKey, "ZEST_ACTIVITY_SIZE=0")
		out, err := cmd.CombinedOutput()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "ZEST_ACTIVITY_SIZE") {
			t.Fatalf("exit %v: %s", err, out)
		}
	})
}
