package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/waitfor"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
)

// callText sends a tools/call to preset "search" and returns the text of its result's first
// content item, and whether the result is an error.
func (f fixture) callText(t *testing.T, sess, name, args string) (string, bool) {
	t.Helper()
	ctx := withKey(t.Context(), testKeys.API)
	res := f.result(t, ctx, "search", sess, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, name, args))
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("%s %s: no content: %v", name, args, res)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	isErr, _ := res["isError"].(bool)
	return text, isErr
}

// found is the names a search_tools result answers.
func found(t *testing.T, text string) []string {
	t.Helper()
	var r struct {
		Tools []toolsearch.Found `json:"tools"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("search_tools answered %s: %v", text, err)
	}
	var out []string
	for _, f := range r.Tools {
		out = append(out, f.Name)
	}
	return out
}

// TestToolSearchSessions: a preset with tool_search lists search_tools and call_tool only;
// 100 sessions search it and the index is built at most once per catalog version, a
// list_changed builds one more; what the preset hides from the caller (a denied tool, a
// server with expose false) is neither found nor callable through call_tool; call_tool calls
// a found tool through the pipeline, recorded as any call.
func TestToolSearchSessions(t *testing.T) {
	f := newFixture(t, "")
	ctx := withKey(t.Context(), testKeys.API)
	const sessions = 100
	search := func(query string) [][]string {
		var wg sync.WaitGroup
		results := make([][]string, sessions)
		for i := range sessions {
			wg.Go(func() {
				sess, _ := f.open(t, ctx, "search")
				list := names(f.result(t, ctx, "search", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)["tools"], "name")
				if !slices.Equal(list, []string{"call_tool", "search_tools"}) {
					t.Errorf("tools/list = %v, want the two meta-tools", list)
				}
				text, isErr := f.callText(t, sess, "search_tools", fmt.Sprintf(`{"query":%q,"limit":10}`, query))
				if isErr {
					t.Errorf("search_tools: %s", text)
					return
				}
				results[i] = found(t, text)
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		return results
	}
	// Each version of the catalog is indexed once, whatever the number of sessions: the
	// versions here are the providers' first listings (two sessions that connect a server at
	// once may each list it), then alpha's list_changed.
	for _, got := range search("echo a message back") {
		if !slices.Contains(got, "mcp_alpha__echo") || !slices.Contains(got, "mcp_beta__echo") || !slices.Contains(got, "lemonade_echo") {
			t.Fatalf("search_tools found %v, want alpha's, beta's and the built-in echo", got)
		}
		for _, n := range got {
			if n == "mcp_alpha__secret" || strings.HasPrefix(n, "mcp_hidden__") {
				t.Fatalf("search_tools found %s, which the preset hides from this caller: %v", n, got)
			}
		}
	}
	builds, versions := f.search.Builds(), f.versions.count()
	t.Logf("%d sessions: %d catalog versions, %d index builds", sessions, versions, builds)
	if builds > versions || builds >= sessions/10 {
		t.Fatalf("%d sessions built the index %d times over %d catalog versions, want at most once per version", sessions, builds, versions)
	}
	// A real upstream's change: alpha gets a tool and says so (list_changed).
	f.alpha.AddTool(mcp.NewTool("translate", mcp.WithDescription("Translate a text into another language.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("translated"), nil
	})
	sess, _ := f.open(t, ctx, "search")
	waitfor.True(t, 10*time.Second, "search_tools finds alpha's new tool", func() bool {
		text, _ := f.callText(t, sess, "search_tools", `{"query":"translate into another language"}`)
		return slices.Contains(found(t, text), "mcp_alpha__translate")
	})
	for _, got := range search("translate into another language") {
		if len(got) == 0 || got[0] != "mcp_alpha__translate" {
			t.Fatalf("after list_changed, search_tools found %v", got)
		}
	}
	if b, v := f.search.Builds()-builds, f.versions.count()-versions; b > v || b < 1 {
		t.Fatalf("one list_changed and %d sessions: %d index builds over %d new catalog versions, want one per version", sessions, b, v)
	}

	if text, isErr := f.callText(t, sess, "search_tools", `{"query":"secret","server":"hidden"}`); !isErr || !strings.Contains(text, `"hidden"`) || strings.Contains(text, "hidden,") {
		t.Fatalf("a server filter on a hidden server: %s (isError %v)", text, isErr)
	}
	if text, isErr := f.callText(t, sess, "search_tools", `{"query":"echo","limit":21}`); !isErr || !strings.Contains(text, "limit must be 1 to 20") {
		t.Fatalf("limit past the max: %s", text)
	}
	if text, _ := f.callText(t, sess, "search_tools", `{"query":"echo","server":"beta"}`); !slices.Equal(found(t, text), []string{"mcp_beta__echo"}) {
		t.Fatalf("server filter beta: %s", text)
	}
	if text, isErr := f.callText(t, sess, "call_tool", `{"name":"mcp_alpha__echo","arguments":{"message":"hi"}}`); isErr || text != "alpha echo: hi" {
		t.Fatalf("call_tool mcp_alpha__echo: %q (isError %v)", text, isErr)
	}
	if text, isErr := f.callText(t, sess, "call_tool", `{"name":"lemonade_echo","arguments":{"message":"hi"}}`); isErr || text != "builtin echo: hi" {
		t.Fatalf("call_tool lemonade_echo: %q (isError %v)", text, isErr)
	}
	for _, hidden := range []string{"mcp_alpha__secret", "mcp_hidden__echo", "search_tools"} {
		_, msgs, err := f.exchange(ctx, "search", sess, fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":%q}}}`, hidden))
		if err != nil || len(msgs) == 0 || !strings.Contains(string(msgs[len(msgs)-1]), "Unknown tool") {
			t.Fatalf("call_tool %s: %q %v, want an unknown tool", hidden, msgs, err)
		}
	}
	var searched []activity.Record
	calls, _ := f.activity.List(0, 0)
	for _, c := range calls {
		if c.Preset == "search" && c.Tool == "echo" {
			searched = append(searched, c)
		}
	}
	if len(searched) != 1 || searched[0].Server != "alpha" {
		t.Fatalf("the activity has %+v, want call_tool's call of alpha's echo", searched)
	}
}

// TestToolSearchModern: a 2026-07-28 request lists the meta-tools, searches and calls without
// a session, as a session does.
func TestToolSearchModern(t *testing.T) {
	f := newFixture(t, "")
	ctx := withKey(t.Context(), testKeys.API)
	list := f.modernItems(t, ctx, "search", "tools/list", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":`+modernMeta+`}}`)
	if last := string(list[len(list)-1].GetMessage()); !strings.Contains(last, `"name":"search_tools"`) || !strings.Contains(last, `"name":"call_tool"`) || strings.Contains(last, "mcp_alpha__echo") {
		t.Fatalf("tools/list: %s", last)
	}
	items := f.modernItems(t, ctx, "search", "tools/call", "search_tools", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":`+modernMeta+`,"name":"search_tools","arguments":{"query":"echo a message","server":"alpha"}}}`)
	if last := string(items[len(items)-1].GetMessage()); !strings.Contains(last, `mcp_alpha__echo`) {
		t.Fatalf("search_tools: %s", last)
	}
	items = f.modernItems(t, ctx, "search", "tools/call", "call_tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":`+modernMeta+`,"name":"call_tool","arguments":{"name":"mcp_alpha__echo","arguments":{"message":"modern"}}}}`)
	if last := string(items[len(items)-1].GetMessage()); !strings.Contains(last, `alpha echo: modern`) {
		t.Fatalf("call_tool: %s", last)
	}
}

// TestToolSearchOnMCP: /mcp serving a preset with tool_search (ZEST_MCP_PRESET) lists and
// serves the meta-tools as /mcp/presets/{id} does.
func TestToolSearchOnMCP(t *testing.T) {
	f := newFixture(t, "search")
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "")
	if got := names(f.result(t, ctx, "", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)["tools"], "name"); !slices.Equal(got, []string{"call_tool", "search_tools"}) {
		t.Fatalf("/mcp's tools/list = %v, want the two meta-tools", got)
	}
	res := f.result(t, ctx, "", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"mcp_beta__echo","arguments":{"message":"on /mcp"}}}}`)
	if content, _ := res["content"].([]any); len(content) == 0 || content[0].(map[string]any)["text"] != "beta echo: on /mcp" {
		t.Fatalf("call_tool on /mcp: %v", res)
	}
}
