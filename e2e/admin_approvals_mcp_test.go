package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// approvalClient opens a 2025-11-25 session of url with mark3labs/mcp-go's client; with
// answer set it declares elicitation and answers every elicitation/create with that action,
// noting the message.
func approvalClient(t *testing.T, url string, answer *mcp.ElicitationResponseAction) (*mcpclient.Client, func() []string) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + fedAPIKey}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	var opts []mcpclient.ClientOption
	if answer != nil {
		opts = append(opts, mcpclient.WithElicitationHandler(elicitorFunc(func(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			mu.Lock()
			asked = append(asked, r.Params.Message)
			mu.Unlock()
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: *answer}}, nil
		})))
	}
	cl := mcpclient.NewClient(tr, opts...)
	if err := cl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-approvals", Version: "1"}
	if _, err := cl.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return cl, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// callEcho calls tool with {"text": text} and returns isError and the text.
func callEcho(t *testing.T, cl *mcpclient.Client, tool, text string) (bool, string) {
	t.Helper()
	call := mcp.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = tool, map[string]any{"text": text}
	out, err := cl.CallTool(t.Context(), call)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	got := ""
	if len(out.Content) > 0 {
		if tc, ok := mcp.AsTextContent(out.Content[0]); ok {
			got = tc.Text
		}
	}
	return out.IsError, got
}

// TestApprovalThroughMCPElicitation: a tools/call of a tool whose server requires approval by
// the client (approval_by client), on /mcp/servers/{id} and /mcp/presets/{id}, asks mcp-go's
// client through elicitation (the message names the server, the tool and the arguments):
// accepted, the call runs; declined, it is refused; a client without the elicitation
// capability is refused with a result that says why and what else works. The admin API's own
// call is held for an administrator (it has no client to ask): it runs once approved through
// the approvals route, and a denied one answers 403 saying why.
func TestApprovalThroughMCPElicitation(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=20s")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval_tools": []string{"ech?"}, "approval_by": "client"})
	if r := admin(t, s, "POST", "/presets", `{"id":"pg","mcp_server_ids":["guarded"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	accept, decline := mcp.ElicitationResponseActionAccept, mcp.ElicitationResponseActionDecline
	for _, ep := range []struct{ name, url string }{{"server", fedURL(s, "guarded")}, {"preset", presetURL(s, "pg")}} {
		t.Run(ep.name, func(t *testing.T) {
			tool := "echo"
			if ep.name == "preset" {
				cl, _ := approvalClient(t, ep.url, nil)
				list, err := cl.ListTools(t.Context(), mcp.ListToolsRequest{})
				if err != nil || len(list.Tools) != 1 {
					t.Fatalf("tools: %+v %v", list, err)
				}
				tool = list.Tools[0].Name
			}
			cl, asked := approvalClient(t, ep.url, &accept)
			if isErr, got := callEcho(t, cl, tool, "approved-"+ep.name); isErr || got != "approved-"+ep.name {
				t.Fatalf("accepted: isError %v, %q", isErr, got)
			}
			if a := asked(); len(a) != 1 || !strings.Contains(a[0], "MCP server: guarded\nTool: echo\n") || !strings.Contains(a[0], `"text":"approved-`+ep.name+`"`) {
				t.Fatalf("asked %q", a)
			}
			cl, asked = approvalClient(t, ep.url, &decline)
			if isErr, got := callEcho(t, cl, tool, "declined"); !isErr || !strings.Contains(got, "it was declined (approval_denied: the MCP client's user chose decline)") || len(asked()) != 1 {
				t.Fatalf("declined: isError %v, %q, asked %q", isErr, got, asked())
			}
			cl, _ = approvalClient(t, ep.url, nil)
			if isErr, got := callEcho(t, cl, tool, "unasked"); !isErr || !strings.Contains(got, "did not declare the elicitation capability") ||
				!strings.Contains(got, "POST /internal/mcp/servers/guarded/tools/call") {
				t.Fatalf("without elicitation: isError %v, %q", isErr, got)
			}
		})
	}
	// The administrator's own call (what Lemonade's GUI3 sends when its chat runs a tool) is
	// held until an administrator decides it, with the arguments it will run with.
	for _, approve := range []bool{true, false} {
		done := make(chan Response, 1)
		go func() {
			done <- admin(t, s, "POST", "/servers/guarded/tools/call", `{"name":"echo","arguments":{"text":"admin"}}`)
		}()
		id := pendingApproval(t, s, "guarded", "echo", `{"text":"admin"}`)
		decision := "deny"
		if approve {
			decision = "approve"
		}
		if r := admin(t, s, "POST", "/approvals/"+id+"/"+decision, `{"reason":"checked"}`); r.Status != 200 {
			t.Fatalf("%s: %d %s", decision, r.Status, r.Body)
		}
		r := <-done
		res, _ := r.JSON(t)["result"].(map[string]any)
		switch {
		case approve && (r.Status != 200 || res["isError"] == true || !strings.Contains(string(r.Body), `"admin"`)):
			t.Fatalf("approved admin call: %d %s", r.Status, r.Body)
		case !approve && (r.Status != 403 || !strings.Contains(string(r.Body), "an administrator denied it (approval_denied): checked")):
			t.Fatalf("denied admin call: %d %s", r.Status, r.Body)
		}
	}
	if r := admin(t, s, "GET", "/approvals", ""); len(asSlice(r.JSON(t)["approvals"])) != 0 {
		t.Fatalf("left pending: %s", r.Body)
	}
}

// pendingApproval waits until exactly one approval is pending, for tool of server with the
// arguments args (compared as JSON), and returns its id.
func pendingApproval(t *testing.T, s *Suite, server, tool, args string) string {
	t.Helper()
	var id string
	waitfor.NoError(t, 30*time.Second, func() error {
		r := admin(t, s, "GET", "/approvals", "")
		list := asSlice(r.JSON(t)["approvals"])
		if len(list) != 1 {
			return fmt.Errorf("%d approvals pending: %s", len(list), r.Body)
		}
		a := list[0].(map[string]any)
		if a["server_id"] != server || a["tool"] != tool || !sameJSON(a["arguments"].(string), args) {
			return fmt.Errorf("pending %v", a)
		}
		id = a["id"].(string)
		return nil
	})
	return id
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// TestApprovalThroughModernInputRequired: a request of MCP 2026-07-28 (no session) for a tool
// that requires approval gets an input_required result asking for it (an elicitation/create
// under "zest-approval"); mcp-go's client answers it and its retry runs the call. A raw
// retry that declines is refused, and so is a client that does not accept elicitation; on a
// preset's endpoint too.
func TestApprovalThroughModernInputRequired(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=20s")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required", "approval_by": "client"})
	if r := admin(t, s, "POST", "/presets", `{"id":"pg","mcp_server_ids":["guarded"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}

	cl, asked := modernAskedClient(t, fedURL(s, "guarded"), "unused")
	call := mcp.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = "echo", map[string]any{"text": "modern approval"}
	out, err := cl.CallTool(t.Context(), call)
	if err != nil || out.IsError || len(out.Content) == 0 {
		t.Fatalf("mcp-go's retry: %+v %v", out, err)
	}
	if tc, _ := mcp.AsTextContent(out.Content[0]); tc.Text != "modern approval" {
		t.Fatalf("mcp-go's retry answered %q", tc.Text)
	}
	if a := asked(); len(a) != 1 || !strings.Contains(a[0], "MCP server: guarded\nTool: echo\n") || !strings.Contains(a[0], "modern approval") {
		t.Fatalf("asked %q", a)
	}

	for _, url := range []string{fedURL(s, "guarded"), presetURL(s, "pg")} {
		tool := "echo"
		if strings.Contains(url, "/presets/") {
			listed := modernPost(t, url, "tools/list", "", `{}`, `{}`)
			tool = asSlice(listed["result"].(map[string]any)["tools"])[0].(map[string]any)["name"].(string)
		}
		params := `{"name":"` + tool + `","arguments":{"text":"declined"}}`
		first := modernPost(t, url, "tools/call", tool, params, `{"elicitation":{}}`)
		res, _ := first["result"].(map[string]any)
		q, _ := res["inputRequests"].(map[string]any)["zest-approval"].(map[string]any)
		state, _ := res["requestState"].(string)
		if res["resultType"] != "input_required" || q["method"] != "elicitation/create" || state == "" {
			t.Fatalf("%s first: %v", url, first)
		}
		if r := admin(t, s, "GET", "/approvals", ""); len(asSlice(r.JSON(t)["approvals"])) != 1 {
			t.Fatalf("%s: not listed: %s", url, r.Body)
		}
		retry := modernPost(t, url, "tools/call", tool, `{"name":"`+tool+`","arguments":{"text":"declined"},"requestState":"`+state+`","inputResponses":{"zest-approval":{"action":"decline"}}}`, `{"elicitation":{}}`)
		res, _ = retry["result"].(map[string]any)
		if b := jsonBody(t, res); res["isError"] != true || !strings.Contains(b, "it was declined (approval_denied: the MCP client's user chose decline)") {
			t.Fatalf("%s declined: %v", url, retry)
		}
		none := modernPost(t, url, "tools/call", tool, params, `{}`)
		res, _ = none["result"].(map[string]any)
		if b := jsonBody(t, res); res["isError"] != true || !strings.Contains(b, "did not declare the elicitation capability") {
			t.Fatalf("%s without elicitation: %v", url, none)
		}
	}
	if r := admin(t, s, "GET", "/approvals", ""); len(asSlice(r.JSON(t)["approvals"])) != 0 {
		t.Fatalf("left pending: %s", r.Body)
	}
}

// TestApprovalThroughTheTypeScriptSDK: the official TypeScript SDK's client, answering
// elicitation, on /mcp/servers/{id}: accepted, the call runs; declined, refused; without the
// capability, refused with why.
func TestApprovalThroughTheTypeScriptSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=20s")
	peers := peersDir(t)
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{filepath.Join(peers, "echo-server.mjs")}, "approval": "required", "approval_by": "client"})
	run := func(action, text string) (got struct {
		Asked   []string `json:"asked"`
		IsError bool     `json:"isError"`
		Text    string   `json:"text"`
	}) {
		t.Helper()
		out, err := exec.Command("node", filepath.Join(peers, "approval-client.mjs"), fedURL(s, "guarded"), "echo", text, action, fedAPIKey).Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", action, err, out)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v\n%s", action, err, out)
		}
		return got
	}
	if got := run("accept", "from the sdk"); got.IsError || got.Text != "from the sdk" || len(got.Asked) != 1 || !strings.Contains(got.Asked[0], "Tool: echo") {
		t.Fatalf("accept: %+v", got)
	}
	if got := run("decline", "no"); !got.IsError || !strings.Contains(got.Text, "approval_denied: the MCP client's user chose decline") {
		t.Fatalf("decline: %+v", got)
	}
	if got := run("none", "unasked"); !got.IsError || !strings.Contains(got.Text, "did not declare the elicitation capability") || len(got.Asked) != 0 {
		t.Fatalf("without elicitation: %+v", got)
	}
}
