package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestConsoleToolSearch: the presets view sets a preset's tool search and shows the mode in
// the list; the edit view of a preset with it lets a person try a search, answered over MCP by
// /mcp/presets/{id}'s search_tools (a tool the server's filter hides is not found); without
// it the view offers no search. axe-core finds nothing.
func TestConsoleToolSearch(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}, "tools_deny": []string{"get-env"}})
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	openView(t, ctx, s.URL, "#/presets")
	do1(t, ctx, "id", chromedp.SendKeys(chromedp.CSS(`input[name="id"]`), "finder"))
	do1(t, ctx, "everything", chromedp.Click(chromedp.CSS("#prov-everything")))
	do1(t, ctx, "tool search", chromedp.Click(chromedp.CSS("#preset-tool-search")))
	do1(t, ctx, "save", chromedp.Click(chromedp.CSS(`form[aria-labelledby="preset-form-h"] button[type="submit"]`)))
	mustWaitText(t, ctx, `section[aria-labelledby="presets-h"]`, "Tool search: search_tools, call_tool", uiWait)
	if r := admin(t, s, "GET", "/presets/finder", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"tool_search":true`) {
		t.Fatalf("the saved preset: %d %s", r.Status, r.Body)
	}
	search := func(query string) {
		t.Helper()
		evalJS[bool](t, ctx, `(() => { const q = document.querySelector('#try-search-query'); q.value = '`+query+`'; return true; })()`)
		do1(t, ctx, "search", chromedp.Click(chromedp.CSS(`section[aria-labelledby="try-search-h"] button[type="submit"]`)))
	}
	search("add two numbers together")
	mustWaitText(t, ctx, "#try-search-result", "mcp_everything__get-sum", uiWait)
	mustWaitText(t, ctx, "#try-search-ranking", "Ranked by BM25 alone", uiWait) // no embedding model named
	axeCheck(t, ctx, "presets, try a search")
	evalJS[bool](t, ctx, `(() => { document.querySelector('#try-search-result').replaceChildren(); return true; })()`)
	search("print the environment variables")
	var got string
	waitfor.True(t, uiWait, "the second search's answer", func() bool {
		got = evalJS[string](t, ctx, `document.querySelector('#try-search-result').textContent`)
		return got != "" && !strings.Contains(got, "Searching")
	})
	if strings.Contains(got, "get-env") {
		t.Fatalf("a search found the denied get-env: %s", got)
	}
	// Tool search off: the list says so, and the view offers no search.
	do1(t, ctx, "tool search off", chromedp.Click(chromedp.CSS("#preset-tool-search")))
	do1(t, ctx, "save", chromedp.Click(chromedp.CSS(`form[aria-labelledby="preset-form-h"] button[type="submit"]`)))
	mustWaitText(t, ctx, `section[aria-labelledby="presets-h"] tbody`, "Every tool", uiWait)
	if hidden := evalJS[bool](t, ctx, `document.querySelector('section[aria-labelledby="try-search-h"]').hidden`); !hidden {
		t.Fatal("a preset without tool search offers a search")
	}
	if r := admin(t, s, "GET", "/presets/finder", ""); r.Status != 200 || strings.Contains(string(r.Body), `"tool_search":true`) {
		t.Fatalf("the preset saved without tool search: %d %s", r.Status, r.Body)
	}
}
