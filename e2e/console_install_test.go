package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestConsoleInstall: the Servers view searches the MCP Registry through Zest's admin route
// (the registry fixture), shows what each server would run or why it cannot be installed, and
// Install registers server-memory from it, which connects. axe-core finds nothing.
func TestConsoleInstall(t *testing.T) {
	peers := peersAsInstalled(t)
	s, _ := registrySuite(t)
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	openView(t, ctx, s.URL, "#/servers")

	search := func(t *testing.T, text string) {
		t.Helper()
		evalJS[bool](t, ctx, `(() => { document.querySelector('input[name="registry-search"]').value = ''; return true; })()`)
		do1(t, ctx, "type the search", chromedp.SendKeys(chromedp.CSS(`input[name="registry-search"]`), text))
		do1(t, ctx, "search", chromedp.Click(chromedp.CSS(`#registry-search-button`)))
	}

	t.Run("what each server runs", func(t *testing.T) {
		search(t, "io.github.modelcontextprotocol")
		mustWaitText(t, ctx, "#registry-status", "3 servers from", uiWait)
		mustWaitText(t, ctx, "#registry-results", "npx -y @modelcontextprotocol/server-memory@2026.8.31", uiWait)
		mustWaitText(t, ctx, "#registry-results", "uvx mcp-server-fetch==2025.4.7", uiWait)
		mustWaitText(t, ctx, "#registry-results", "MEMORY_FILE_PATH — optional, left out", uiWait)
		axeCheck(t, ctx, "install search")
	})

	t.Run("why one cannot be installed", func(t *testing.T) {
		search(t, "legacy")
		mustWaitText(t, ctx, `#registry-results [data-part="refused"]`, "streamable-http only", uiWait)
		if n := evalJS[int](t, ctx, `document.querySelectorAll('#registry-results button').length`); n != 0 {
			t.Fatalf("a refused server offers %d buttons", n)
		}
		axeCheck(t, ctx, "install search, a refusal")
	})

	t.Run("install server-memory", func(t *testing.T) {
		search(t, "server-memory")
		mustWaitText(t, ctx, "#registry-results", "Saved as", uiWait)
		do1(t, ctx, "working dir", chromedp.SendKeys(chromedp.CSS(`input[name="registry-working-dir"]`), peers))
		do1(t, ctx, "install", chromedp.Click(chromedp.CSS(`button[aria-label="Install io.github.modelcontextprotocol/server-memory"]`)))
		mustWaitText(t, ctx, "#registry-results", "Installed as server-memory", uiWait)
		waitfor.True(t, uiWait, "server-memory connected in the list", func() bool {
			return evalJS[string](t, ctx, `(document.querySelector('#server-server-memory') || {dataset: {}}).dataset.status || ''`) == "connected"
		})
		m := admin(t, s, "GET", "/servers/server-memory", "").JSON(t)["server"].(map[string]any)
		if m["command"] != "npx" || m["name"] != "io.github.modelcontextprotocol/server-memory" || !strings.HasSuffix(m["working_dir"].(string), "peers") {
			t.Fatalf("stored %v", m)
		}
		axeCheck(t, ctx, "install search, installed")
		// A second install of the same id is refused in the page, never saved over the first.
		do1(t, ctx, "install again", chromedp.Click(chromedp.CSS(`button[aria-label="Install io.github.modelcontextprotocol/server-memory"]`)))
		mustWaitText(t, ctx, "#registry-results", "registered already", uiWait)
	})
}
