package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Tool search (issue 25): a preset with "tool_search": true serves search_tools and call_tool
// in place of its tools.

// searchNames are the tool names a search_tools result's text answers.
func searchNames(t *testing.T, text string) []string {
	t.Helper()
	var r struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("search_tools answered %q: %v", text, err)
	}
	var out []string
	for _, f := range r.Tools {
		if f.InputSchema["type"] != "object" {
			t.Errorf("search_tools answered %s without its input schema: %v", f.Name, f.InputSchema)
		}
		out = append(out, f.Name)
	}
	return out
}

// TestPresetToolSearch drives /mcp/presets/big (lemonade, everything with get-env denied,
// memory; tool_search on) with mark3labs/mcp-go's client in both eras (a 2025-11-25 session,
// and its defaults: 2026-07-28 without one): tools/list is the two meta-tools; search_tools
// finds tools by a request in plain words, with their schemas, narrowed by server; call_tool
// calls what it found; the denied tool is neither found nor callable.
func TestPresetToolSearch(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "E2E_MEMORY_FILE="+filepath.Join(t.TempDir(), "memory.jsonl"))
	registerPresetProviders(t, s)
	r := admin(t, s, "POST", "/presets", `{"id":"big","mcp_server_ids":["lemonade","everything","memory"],"tool_search":true}`)
	if p, _ := r.JSON(t)["preset"].(map[string]any); r.Status != 200 || p["tool_search"] != true {
		t.Fatalf("a preset with tool_search: %d %s", r.Status, r.Body)
	}
	call := func(c *mcpclient.Client, tool string, args map[string]any) (string, bool) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			return err.Error(), true
		}
		if len(res.Content) == 0 {
			t.Fatalf("%s %v: no content", tool, args)
		}
		return mcp.GetTextFromContent(res.Content[0]), res.IsError
	}
	session, _ := approvalClient(t, presetURL(s, "big"), nil)
	for era, c := range map[string]*mcpclient.Client{"2025-11-25": session, "2026-07-28": modernClient(t, presetURL(s, "big"), "zest-preset-big")} {
		t.Run(era, func(t *testing.T) {
			list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, tool := range list.Tools {
				listed = append(listed, tool.Name)
			}
			if slices.Sort(listed); !slices.Equal(listed, []string{"call_tool", "search_tools"}) {
				t.Fatalf("tools/list = %v, want the two meta-tools", listed)
			}
			for query, want := range map[string]string{
				"say back the words I give you":                    "mcp_everything__echo",
				"remember facts about people in a knowledge graph": "mcp_memory__create_entities",
				"list the models available":                        "lemonade_list_models",
			} {
				text, isErr := call(c, "search_tools", map[string]any{"query": query})
				if got := searchNames(t, text); isErr || !slices.Contains(got, want) {
					t.Errorf("search_tools %q found %v (isError %v), want %s among them", query, got, isErr, want)
				}
			}
			text, _ := call(c, "search_tools", map[string]any{"query": "add numbers", "server": "memory"})
			for _, n := range searchNames(t, text) {
				if !strings.HasPrefix(n, "mcp_memory__") {
					t.Errorf("search_tools with server memory found %s", n)
				}
			}
			text, _ = call(c, "search_tools", map[string]any{"query": "print the environment variables", "limit": 20})
			if strings.Contains(text, "get-env") {
				t.Errorf("search_tools found the denied get-env: %s", text)
			}
			if text, isErr := call(c, "call_tool", map[string]any{"name": "mcp_everything__echo", "arguments": map[string]any{"message": "found in " + era}}); isErr || text != "Echo: found in "+era {
				t.Errorf("call_tool echo: %q (isError %v)", text, isErr)
			}
			if text, isErr := call(c, "call_tool", map[string]any{"name": "mcp_everything__get-env"}); !isErr || strings.Contains(text, "PATH") {
				t.Errorf("call_tool of the denied get-env: %q (isError %v)", text, isErr)
			}
			if text, isErr := call(c, "search_tools", map[string]any{"query": "echo", "limit": 100}); !isErr || !strings.Contains(text, "limit must be 1 to 20") {
				t.Errorf("search_tools past its limit: %q (isError %v)", text, isErr)
			}
		})
	}
}

// TestChatToolSearch: a chat of a preset with tool_search offers the model search_tools and
// call_tool, not the catalog (the built-in engine calls the tool tool_choice names with the
// JSON of the message): search_tools answers the tools that fit a request, call_tool runs the
// one named through the pipeline and the chat records that tool's call; the denied get-env
// is neither found nor called.
func TestChatToolSearch(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}, "tools_deny": []string{"get-env"}})
	if r := admin(t, s, "POST", "/presets", `{"id":"finder","model":"builtin-llm","mcp_server_ids":["echo","everything","lemonade"],"tool_search":true}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	chat := func(tool, message string) (toolChatAnswer, Response) {
		t.Helper()
		return chatJSON(t, s, jsonBody(t, map[string]any{"preset": "finder",
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": tool}},
			"messages":    []map[string]any{{"role": "user", "content": message}}}))
	}
	a, r := chat("search_tools", `{"query":"repeat my words back to me"}`)
	if r.Status != 200 || len(a.ZestToolCalls) != 1 || a.ZestToolCalls[0].Name != "search_tools" || a.ZestToolCalls[0].IsError ||
		!strings.Contains(a.Choices[0].Message.Content, "mcp_echo__echo") || !strings.Contains(a.Choices[0].Message.Content, "inputSchema") {
		t.Fatalf("search_tools in a chat: %d %s", r.Status, r.Body)
	}
	a, r = chat("search_tools", `{"query":"print the environment variables","limit":20}`)
	if r.Status != 200 || strings.Contains(a.Choices[0].Message.Content, "get-env") {
		t.Fatalf("search_tools found the denied get-env: %d %s", r.Status, r.Body)
	}
	a, r = chat("call_tool", `{"name":"mcp_echo__echo","arguments":{"text":"found-by-search"}}`)
	if r.Status != 200 || a.Choices[0].Message.Content != "The tool returned: found-by-search" || len(a.ZestToolCalls) != 1 ||
		a.ZestToolCalls[0].Name != "mcp_echo__echo" || a.ZestToolCalls[0].ServerID != "echo" {
		t.Fatalf("call_tool in a chat: %d %s", r.Status, r.Body)
	}
	a, r = chat("call_tool", `{"name":"mcp_everything__get-env"}`)
	if r.Status != 200 || len(a.ZestToolCalls) != 1 || !a.ZestToolCalls[0].IsError || strings.Contains(a.Choices[0].Message.Content, "PATH=") {
		t.Fatalf("call_tool of the denied get-env: %d %s", r.Status, r.Body)
	}
	// The catalog is not offered: naming one of its tools is refused before the model runs.
	if _, r = chat("mcp_echo__echo", `{"text":"x"}`); r.Status != 400 || !strings.Contains(string(r.Body), "it offers call_tool, search_tools") {
		t.Fatalf("tool_choice of a tool tool search hides: %d %s", r.Status, r.Body)
	}
}
