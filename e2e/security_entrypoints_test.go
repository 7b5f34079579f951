package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// entryCall is one tool call through one entry point: the tool's text, whether it was an
// isError result, and the refusal (an error status or a JSON-RPC error) when no result came.
type entryCall struct {
	text    string
	isError bool
	refused string
}

// String shows a call's answer cut to 200 bytes.
func (c entryCall) String() string {
	return fmt.Sprintf("text %.200q, isError %v, refused %.200q", c.text, c.isError, c.refused)
}

// TestOneDoorEveryEntryPoint: the same server policy holds on each way a tool call comes in —
// the admin API, /mcp/servers/{id}, /mcp/presets/{id}, /mcp/servers/{id}/sse (HTTP+SSE, mcp-go's
// SSE client) and a chat — with each entry point's own words: a denied tool never runs, a
// result over max_output_bytes is replaced by an isError result saying so, the server's
// rate_limit counts the calls of all of them together (the eleventh refused on each), and
// every call is in the activity under its path; /mcp's built-in tools are recorded the same
// way.
func TestOneDoorEveryEntryPoint(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_ACTIVITY_DETAILS=true")
	registerServer(t, s, map[string]any{"id": "every", "command": "node", "args": []string{serverEverything(t)},
		"tools_deny": []string{"get-env"}, "max_output_bytes": 1024, "rate_limit": "12/h"})
	for _, p := range []string{
		`{"id":"pe","model":"builtin-llm","mcp_server_ids":["every","lemonade"]}`,
		`{"id":"ps","model":"builtin-llm","mcp_server_ids":["every","lemonade"],"tool_search":true}`,
	} {
		if r := admin(t, s, "POST", "/presets", p); r.Status != 200 {
			t.Fatalf("preset: %d %s", r.Status, r.Body)
		}
	}
	session := func(url string) *mcpclient.Client {
		cl, _ := approvalClient(t, url, nil)
		return cl
	}
	server, preset, searched := session(fedURL(s, "every")), session(presetURL(s, "pe")), session(presetURL(s, "ps"))
	legacy, err := mcpclient.NewSSEMCPClient(fedURL(s, "every")+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + fedAPIKey}))
	if err != nil {
		t.Fatal(err)
	}
	if err := legacy.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { legacy.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2024-11-05"
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-sse", Version: "1"}
	if _, err := legacy.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	mcpCall := func(cl *mcpclient.Client, tool string, args map[string]any) entryCall {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		out, err := cl.CallTool(t.Context(), req)
		if err != nil {
			return entryCall{refused: err.Error()}
		}
		text := ""
		if len(out.Content) > 0 {
			if tc, ok := mcp.AsTextContent(out.Content[0]); ok {
				text = tc.Text
			}
		}
		return entryCall{text: text, isError: out.IsError}
	}
	entries := []struct {
		name, path string
		call       func(tool string, args map[string]any) entryCall
	}{
		{"admin API", "admin", func(tool string, args map[string]any) entryCall {
			r := admin(t, s, "POST", "/servers/every/tools/call", jsonBody(t, map[string]any{"name": tool, "arguments": args}))
			if r.Status != 200 {
				return entryCall{refused: fmt.Sprintf("%d %s", r.Status, r.Body)}
			}
			res, _ := r.JSON(t)["result"].(map[string]any)
			c := entryCall{isError: res["isError"] == true}
			if content := asSlice(res["content"]); len(content) > 0 {
				c.text, _ = content[0].(map[string]any)["text"].(string)
			}
			return c
		}},
		{"/mcp/servers/{id}", "mcp", func(tool string, args map[string]any) entryCall { return mcpCall(server, tool, args) }},
		{"/mcp/servers/{id}/sse", "mcp", func(tool string, args map[string]any) entryCall { return mcpCall(legacy, tool, args) }},
		{"/mcp/presets/{id}", "mcp", func(tool string, args map[string]any) entryCall {
			return mcpCall(preset, "mcp_every__"+tool, args)
		}},
		{"/mcp/presets/{id} call_tool", "mcp", func(tool string, args map[string]any) entryCall {
			return mcpCall(searched, "call_tool", map[string]any{"name": "mcp_every__" + tool, "arguments": args})
		}},
		{"chat", "chat", func(tool string, args map[string]any) entryCall {
			msg, _ := json.Marshal(args)
			body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"every"},
				"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "mcp_every__" + tool}},
				"messages":    []map[string]any{{"role": "user", "content": string(msg)}}})
			r := do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json", "Authorization: Bearer "+fedAPIKey)
			var a toolChatAnswer
			if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
				return entryCall{refused: fmt.Sprintf("%d %s", r.Status, r.Body)}
			}
			if len(a.ZestToolCalls) == 0 { // not one of the loop's tools: handed back, never run
				return entryCall{refused: "not offered: finish " + a.Choices[0].FinishReason}
			}
			return entryCall{text: strings.TrimPrefix(a.Choices[0].Message.Content, "The tool returned: "), isError: a.ZestToolCalls[0].IsError}
		}},
	}
	big := strings.Repeat("a", 2000)
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) {
			if c := e.call("get-env", map[string]any{}); c.refused == "" && !c.isError {
				t.Fatalf("a denied tool answered: %v", c)
			}
			if c := e.call("echo", map[string]any{"message": big}); !c.isError || !strings.Contains(c.text, `over the limit of MCP server "every" (max_output_bytes 1024)`) {
				t.Fatalf("a result over max_output_bytes: %v", c)
			}
			if c := e.call("echo", map[string]any{"message": "through " + e.name}); c.isError || c.refused != "" || !strings.Contains(c.text, "through "+e.name) {
				t.Fatalf("an allowed call: %v", c)
			}
		})
	}
	// 6 entry points × 2 echo calls: the rate_limit of 12/h is spent, whichever way they came.
	for _, e := range entries {
		c := e.call("echo", map[string]any{"message": "one too many"})
		if !strings.Contains(c.refused+c.text, "rate_limit") || strings.Contains(c.text, "Echo: one too many") {
			t.Errorf("%s, a call past the rate_limit: %v", e.name, c)
		}
	}
	// search_tools never finds what a filter hides.
	if c := mcpCall(searched, "search_tools", map[string]any{"query": "environment variables get-env", "limit": 20}); c.isError || strings.Contains(c.text, "get-env") || !strings.Contains(c.text, "mcp_every__") {
		t.Errorf("search_tools for the denied get-env: %v", c)
	}
	// /mcp's built-in tools take the same door.
	mcpOwn := session(s.URL + "/mcp")
	if c := mcpCall(mcpOwn, "lemonade_list_models", map[string]any{}); c.isError || c.refused != "" {
		t.Fatalf("a built-in tool: %v", c)
	}
	paths := map[string]int{}
	for _, c := range activityCalls(t, s) {
		rec := c.(map[string]any)
		paths[fmt.Sprint(rec["path"], " ", rec["server_id"])]++
		if rec["tool"] == "get-env" && rec["outcome"] == "ok" {
			t.Errorf("get-env ran: %v", rec)
		}
	}
	// admin: get-env, two echoes, one refused; mcp: the same on three endpoints and call_tool,
	// and the built-in tool; chat: two echoes and the refused one (a tool not offered is never
	// a call).
	if paths["admin every"] != 4 || paths["mcp every"] != 16 || paths["mcp lemonade"] != 1 || paths["chat every"] != 3 {
		t.Fatalf("activity by path and server: %v", paths)
	}
}
