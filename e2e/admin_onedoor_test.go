package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Issue 22's holes in the tool-call paths, each shown as a user meets it, through the real
// processes: every tool call goes through one pipeline (mcpgateway's package toolcall), so a
// server's policy holds on every path.

// TestOneDoorHiddenServerDoesNotExist: a server with expose false cannot be called by an API
// user on any path — a chat that names it (with tool_choice naming its tool, which the chat
// then refuses as a tool it does not offer), a preset that lists it, /mcp/servers/{id} — and
// no answer tells it from an id never registered; its process never gets the call. The admin
// key reaches it.
func TestOneDoorHiddenServerDoesNotExist(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "hidden", "command": "node", "args": []string{echo}, "expose": false})
	if r := admin(t, s, "POST", "/presets", `{"id":"hp","model":"builtin-llm","mcp_server_ids":["hidden"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	chat := func(key, body string) toolChatAnswer {
		t.Helper()
		r := do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json", "Authorization: Bearer "+key)
		var a toolChatAnswer
		if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("chat %s: %d %s", body, r.Status, r.Body)
		}
		return a
	}
	// refused is the message of a chat refused as naming a tool it does not offer.
	refused := func(body string) string {
		t.Helper()
		r := do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json", "Authorization: Bearer "+fedAPIKey)
		e, _ := r.JSON(t)["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if r.Status != 400 || e["param"] != "tool_choice" || !strings.Contains(msg, "this chat offers no tools") {
			t.Fatalf("chat %s: %d %s", body, r.Status, r.Body)
		}
		return msg
	}
	words := map[string]string{}
	for _, id := range []string{"hidden", "nonexistent"} {
		msg := refused(`{"model":"builtin-llm","mcp_server_ids":["` + id + `"],"tool_choice":{"type":"function","function":{"name":"mcp_` + id + `__echo"}},
			"messages":[{"role":"user","content":"{\"text\":\"pwned\"}"}]}`)
		words[id] = strings.ReplaceAll(msg, id, "ID")
	}
	if words["hidden"] != words["nonexistent"] {
		t.Fatalf("a hidden server's refusal %q differs from an unknown one's %q", words["hidden"], words["nonexistent"])
	}
	refused(`{"preset":"hp","tool_choice":{"type":"function","function":{"name":"mcp_hidden__echo"}},
		"messages":[{"role":"user","content":"{\"text\":\"pwned\"}"}]}`)
	for _, id := range []string{"hidden", "nonexistent"} {
		r := do(t, "POST", fedURL(s, id), fmt.Sprintf(initBody, "2025-11-25"), append(mcpHeaders, "Authorization: Bearer "+fedAPIKey)...)
		words["mcp "+id] = strings.ReplaceAll(string(r.Body), id, "ID")
		if r.Status != 404 {
			t.Fatalf("/mcp/servers/%s: %d %s", id, r.Status, r.Body)
		}
	}
	if words["mcp hidden"] != words["mcp nonexistent"] {
		t.Fatalf("/mcp/servers/{id} tells a hidden server (%s) from an unknown one (%s)", words["mcp hidden"], words["mcp nonexistent"])
	}
	if calls := activityCalls(t, s); len(calls) != 0 {
		t.Fatalf("the hidden server was called: %v", calls)
	}
	// An administrator's chat reaches it.
	a := chat(adminKey, `{"model":"builtin-llm","mcp_server_ids":["hidden"],"tool_choice":{"type":"function","function":{"name":"mcp_hidden__echo"}},
		"messages":[{"role":"user","content":"{\"text\":\"by the admin\"}"}]}`)
	if len(a.ZestToolCalls) != 1 || a.Choices[0].Message.Content != "The tool returned: by the admin" {
		t.Fatalf("the admin key's chat: %+v", a)
	}
}

// activityCalls are the tool calls mcpgateway recorded (GET /internal/mcp/activity).
func activityCalls(t *testing.T, s *Suite) []any {
	t.Helper()
	r := admin(t, s, "GET", "/activity", "")
	if r.Status != 200 {
		t.Fatalf("activity: %d %s", r.Status, r.Body)
	}
	return asSlice(r.JSON(t)["calls"])
}

// TestOneDoorApprovalByAdmin: a server that requires approval, with approval_by left at its
// default (admin), holds an API user's MCP call — its client declares elicitation, and is
// not asked — until the admin key approves it through the approvals route; then the call
// runs with the arguments the approval showed.
func TestOneDoorApprovalByAdmin(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=60s")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required"})
	accept := mcp.ElicitationResponseActionAccept
	cl, asked := approvalClient(t, fedURL(s, "guarded"), &accept)
	type answer struct {
		isErr bool
		text  string
	}
	done := make(chan answer, 1)
	go func() {
		call := mcp.CallToolRequest{}
		call.Params.Name, call.Params.Arguments = "echo", map[string]any{"text": "needs a person"}
		out, err := cl.CallTool(t.Context(), call)
		if err != nil {
			done <- answer{true, err.Error()}
			return
		}
		tc, _ := mcp.AsTextContent(out.Content[0])
		done <- answer{out.IsError, tc.Text}
	}()
	id := pendingApproval(t, s, "guarded", "echo", `{"text":"needs a person"}`)
	select {
	case a := <-done:
		t.Fatalf("the call did not wait for the administrator: %+v", a)
	default:
	}
	// The API key cannot decide it; the admin key can.
	if r := do(t, "POST", s.URL+"/internal/mcp/approvals/"+id+"/approve", `{}`, "Content-Type: application/json", "Authorization: Bearer "+fedAPIKey); r.Status != 401 {
		t.Fatalf("the API key approved: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/approvals/"+id+"/approve", `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	select {
	case a := <-done:
		if a.isErr || a.text != "needs a person" {
			t.Fatalf("the approved call: %+v", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call did not return")
	}
	if len(asked()) != 0 {
		t.Fatalf("the client was asked to approve its own call: %q", asked())
	}
}

// TestOneDoorApprovalCoversItsArguments: with approval_by client, a client of MCP 2026-07-28
// approves the arguments the input_required result showed; a retry that carries the signed
// requestState and its acceptance with other arguments is refused and never reaches the
// server, and the retry with the shown arguments runs.
func TestOneDoorApprovalCoversItsArguments(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=60s", "ZEST_ACTIVITY_DETAILS=true")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required", "approval_by": "client"})
	url := fedURL(s, "guarded")
	first := modernPost(t, url, "tools/call", "echo", `{"name":"echo","arguments":{"text":"echo harmless"}}`, `{"elicitation":{}}`)
	res, _ := first["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("first: %v", first)
	}
	retry := func(text string) map[string]any {
		return modernPost(t, url, "tools/call", "echo", `{"name":"echo","arguments":{"text":"`+text+`"},"requestState":"`+state+
			`","inputResponses":{"zest-approval":{"action":"accept"}}}`, `{"elicitation":{}}`)
	}
	swapped := retry("rm -rf /")
	e, _ := swapped["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), "an approval covers the call it showed, with its arguments, only") {
		t.Fatalf("a retry with other arguments: %v", swapped)
	}
	for _, c := range activityCalls(t, s) {
		if strings.Contains(jsonBody(t, c), "rm -rf") && c.(map[string]any)["outcome"] == "ok" {
			t.Fatalf("the swapped arguments ran: %v", c)
		}
	}
	ok := retry("echo harmless")
	res, _ = ok["result"].(map[string]any)
	if b := jsonBody(t, res); res["isError"] == true || !strings.Contains(b, "echo harmless") {
		t.Fatalf("the approved retry: %v", ok)
	}
}
