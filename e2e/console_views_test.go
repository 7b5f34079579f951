package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/zestmcp/zest/lib/waitfor"
)

// The console in a real browser (Debian's Chromium through chromedp) against the suite: each
// view loads and passes axe-core's WCAG 2.1 A/AA rules, and the flows a newcomer goes
// through work — add a local-process server through the form (by mouse, and by keyboard
// alone), see a wrong field reported next to that field, call a tool from its generated
// form, save a preset, chat with a preset and see the tool call inline, and find the calls
// in Activity and in Audit. Each view's screenshot is written to ZEST_SCREENSHOT_DIR.

const uiWait = 20 * time.Second

// openView navigates to a view of the console and waits until the router has rendered it.
func openView(t *testing.T, ctx context.Context, url, hash string) {
	t.Helper()
	navigate(t, ctx, url+"/"+hash)
	waitReady(t, ctx, hash)
}

// waitReady waits until the router has rendered the view of hash (main[data-ready]).
func waitReady(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	sel := `main[data-ready="` + strings.SplitN(hash, "?", 2)[0] + `"]`
	wctx, cancel := context.WithTimeout(ctx, uiWait)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("view %s did not render: %v", hash, err)
	}
}

func do1(t *testing.T, ctx context.Context, what string, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, uiWait)
	defer cancel()
	if err := chromedp.Do(wctx, a); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func TestConsole(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	ctx := newBrowser(t)
	everything := filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")

	// The key arrives in the URL's fragment, as make run prints it, and leaves the address bar.
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	if got := evalJS[string](t, ctx, `location.hash + ' ' + sessionStorage.getItem('zest.adminKey')`); got != "#/ "+adminKey {
		t.Fatalf("the key from the fragment: %q", got)
	}

	t.Run("dashboard", func(t *testing.T) {
		mustWaitText(t, ctx, "#mcp-url", s.URL+"/mcp", uiWait)
		mustWaitText(t, ctx, "#mcp-versions", "2026-07-28", uiWait)
		mustWaitText(t, ctx, "#health", "mcpgateway", uiWait)
		mustWaitText(t, ctx, "pre.config", "mcp-remote", uiWait)
		if n := evalJS[int](t, ctx, `document.querySelectorAll('.tool-card').length`); n != len(builtinTools) {
			t.Fatalf("%d tool cards of /mcp, want %d", n, len(builtinTools))
		}
		// Each client's configuration, by keyboard on the tab list.
		do1(t, ctx, "focus the Claude tab", chromedp.Focus(chromedp.CSS("#tab-claude")))
		press(t, ctx, kb.ArrowRight)
		mustWaitText(t, ctx, `pre.config[data-client="cursor"]`, `"url": "`+s.URL+`/mcp"`, uiWait)
		axeCheck(t, ctx, "dashboard")
		screenshot(t, ctx, "dashboard")
	})

	t.Run("add a server", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/servers")
		mustWaitText(t, ctx, "#servers-summary", "0/0 connected", uiWait)
		axeCheck(t, ctx, "servers, empty")
		// A wrong field is reported next to that field: a local process without a command.
		do1(t, ctx, "name", chromedp.SendKeys(chromedp.CSS(`#server-form input[name="name"]`), "broken"))
		do1(t, ctx, "save", chromedp.Click(chromedp.CSS("#save-button")))
		mustWaitText(t, ctx, `#server-form .field-error`, "command is required", uiWait)
		if got := evalJS[string](t, ctx, `(() => { const i = document.querySelector('#server-form [name="command"]'); const e = document.getElementById(i.getAttribute('aria-errormessage')); return i.getAttribute('aria-invalid') + ' ' + (e && i.closest('.field').contains(e)) + ' ' + (document.activeElement === i); })()`); got != "true true true" {
			t.Fatalf("the error is not at the command field (aria-invalid, aria-errormessage in its field, focus): %s", got)
		}
		axeCheck(t, ctx, "servers, field error")
		// Fixed and saved: connected, listed, focused, announced.
		do1(t, ctx, "command", chromedp.SendKeys(chromedp.CSS(`#server-form input[name="command"]`), "node"))
		do1(t, ctx, "args", chromedp.SendKeys(chromedp.CSS(`#server-form textarea[name="args"]`), everything))
		evalJS[bool](t, ctx, `(document.querySelector('#server-form input[name="name"]').value = '') === ''`)
		do1(t, ctx, "name", chromedp.SendKeys(chromedp.CSS(`#server-form input[name="name"]`), "everything"))
		do1(t, ctx, "test", chromedp.Click(chromedp.CSS("#test-button")))
		mustWaitText(t, ctx, "#form-result", "Connection works", uiWait)
		do1(t, ctx, "save", chromedp.Click(chromedp.CSS("#save-button")))
		mustWaitText(t, ctx, "#server-everything .status", "Connected", uiWait)
		mustWaitText(t, ctx, "#servers-summary", "1/1 connected", uiWait)
		mustWaitText(t, ctx, "#live", "everything: Connected", uiWait)
		if f := evalJS[string](t, ctx, `document.activeElement.id`); f != "server-everything" {
			t.Fatalf("focus after adding is on %q, want the new entry", f)
		}
		mustWaitText(t, ctx, "#server-everything details summary", "Tools (", uiWait)
		axeCheck(t, ctx, "servers, one connected")
		screenshot(t, ctx, "servers")
	})

	t.Run("keyboard only", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/servers")
		mustWaitText(t, ctx, "#servers-summary", "1/1 connected", uiWait)
		do1(t, ctx, "start at the top", chromedp.Focus(chromedp.CSS("#main")))
		tabTo(t, ctx, `#server-form input[name="name"]`, 60)
		typeText(t, ctx, "kbd")
		tabTo(t, ctx, `#server-form input[name="command"]`, 5)
		typeText(t, ctx, "node")
		tabTo(t, ctx, `#server-form textarea[name="args"]`, 5)
		typeText(t, ctx, everything)
		tabTo(t, ctx, "#save-button", 10)
		pressEnter(t, ctx)
		mustWaitText(t, ctx, "#server-kbd .status", "Connected", uiWait)
		mustWaitText(t, ctx, "#servers-summary", "2/2 connected", uiWait)
		// Disconnect it by keyboard: its buttons are reachable in order.
		tabTo(t, ctx, `#server-kbd button[aria-label="Disconnect kbd"]`, 15)
		pressEnter(t, ctx)
		mustWaitText(t, ctx, "#server-kbd .status", "Disconnected", uiWait)
		mustWaitText(t, ctx, "#live", "kbd: Disconnected", uiWait)
		evalJS[bool](t, ctx, `(window.confirm = () => true, true)`) // Remove asks first
		do1(t, ctx, "remove", chromedp.Click(chromedp.CSS(`#server-kbd button[aria-label="Remove kbd"]`)))
		mustWaitText(t, ctx, "#servers-summary", "1/1 connected", uiWait)
	})

	t.Run("edit and refresh", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/servers")
		mustWaitText(t, ctx, "#server-everything .status", "Connected", uiWait)
		do1(t, ctx, "edit", chromedp.Click(chromedp.CSS(`#server-everything button[aria-label="Edit everything"]`)))
		mustWaitText(t, ctx, "#form-h", "Edit everything", uiWait)
		if got := evalJS[string](t, ctx, `document.querySelector('#server-form [name="args"]').value`); got != everything {
			t.Fatalf("the form holds the stored arguments: %q", got)
		}
		evalJS[bool](t, ctx, `(document.querySelector('#server-form [name="timeout_ms"]').value = '45000') === '45000'`)
		do1(t, ctx, "save", chromedp.Click(chromedp.CSS("#save-button")))
		mustWaitText(t, ctx, "#live", "everything: Connected", uiWait)
		if r := admin(t, s, "GET", "/servers/everything", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"timeout_ms":45000`) {
			t.Fatalf("the edit was not saved: %d %s", r.Status, r.Body)
		}
		do1(t, ctx, "refresh", chromedp.Click(chromedp.CSS(`#server-everything button[aria-label="Refresh tools everything"]`)))
		mustWaitText(t, ctx, "#live", "everything: Tools refreshed", uiWait)
	})

	t.Run("try a tool", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/tools?server=everything&tool=echo")
		mustWaitText(t, ctx, `section[aria-labelledby="pick-h"]`, "echo", uiWait)
		do1(t, ctx, "message", chromedp.SendKeys(chromedp.CSS(`section[aria-labelledby="args-h"] [name="message"]`), "hello console"))
		do1(t, ctx, "call", chromedp.Click(chromedp.CSS(`section[aria-labelledby="args-h"] button[type="submit"]`)))
		mustWaitText(t, ctx, "#tool-result", "Echo: hello console", uiWait)
		mustWaitText(t, ctx, "#tool-result", "took", uiWait)
		// A required field left empty is reported at the field, and nothing is called.
		evalJS[bool](t, ctx, `(document.querySelector('section[aria-labelledby="args-h"] [name="message"]').value = '') === ''`)
		do1(t, ctx, "call", chromedp.Click(chromedp.CSS(`section[aria-labelledby="args-h"] button[type="submit"]`)))
		mustWaitText(t, ctx, `section[aria-labelledby="args-h"] .field-error`, "", uiWait)
		axeCheck(t, ctx, "try a tool")
		screenshot(t, ctx, "tools")
	})

	t.Run("preset", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/presets")
		do1(t, ctx, "id", chromedp.SendKeys(chromedp.CSS(`input[name="id"]`), "helper"))
		evalJS[bool](t, ctx, `(() => { const m = document.querySelector('select[name="model"]'); m.value = 'builtin-llm'; m.dispatchEvent(new Event('change')); return true; })()`)
		do1(t, ctx, "everything", chromedp.Click(chromedp.CSS("#prov-everything")))
		do1(t, ctx, "save", chromedp.Click(chromedp.CSS(`form button[type="submit"]`)))
		mustWaitText(t, ctx, `section[aria-labelledby="presets-h"]`, "helper", uiWait)
		if r := admin(t, s, "GET", "/presets/helper", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"mcp_server_ids":["everything"]`) || !strings.Contains(string(r.Body), `"model":"builtin-llm"`) {
			t.Fatalf("the saved preset: %d %s", r.Status, r.Body)
		}
		axeCheck(t, ctx, "presets")
		screenshot(t, ctx, "presets")
	})

	t.Run("chat with a tool call", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/chat")
		evalJS[bool](t, ctx, `(() => { const p = document.querySelector('select[name="preset"]'); p.value = 'helper'; p.dispatchEvent(new Event('change')); return true; })()`)
		mustWaitText(t, ctx, `select[name="tool"]`, "echo", uiWait)
		evalJS[bool](t, ctx, `(() => { const t = document.querySelector('select[name="tool"]'); t.value = 'mcp_everything__echo'; t.dispatchEvent(new Event('change')); return t.value === 'mcp_everything__echo'; })()`)
		do1(t, ctx, "message", chromedp.SendKeys(chromedp.CSS(`textarea[name="message"]`), `please echo {"message":"from the chat"}`))
		do1(t, ctx, "send", chromedp.Click(chromedp.CSS(`section[aria-labelledby="conv-h"] button[type="submit"]`)))
		mustWaitText(t, ctx, ".chat-log .toolcall", "mcp_everything__echo", uiWait)
		mustWaitText(t, ctx, ".chat-log", "Echo: from the chat", uiWait)
		mustWaitText(t, ctx, ".chat-log", "The tool returned", uiWait)
		axeCheck(t, ctx, "chat")
		screenshot(t, ctx, "chat")
	})

	t.Run("activity", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/activity")
		mustWaitText(t, ctx, "#main table", "mcp", uiWait)  // the call of "try a tool" (MCP, /mcp/servers/everything)
		mustWaitText(t, ctx, "#main table", "chat", uiWait) // the chat loop's call
		mustWaitText(t, ctx, "#main table", "echo", uiWait)
		// A new call appears while the view is open (polled), and is announced.
		if r := admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"get-sum","arguments":{"a":1,"b":2}}`); r.Status != 200 {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		mustWaitText(t, ctx, "#main table", "get-sum", uiWait)
		axeCheck(t, ctx, "activity")
		screenshot(t, ctx, "activity")
	})

	// The audit trail: the server registered by the form and the tool calls above, newest
	// first; the kind filter keeps the admin changes only.
	t.Run("audit", func(t *testing.T) {
		openView(t, ctx, s.URL, "#/audit")
		mustWaitText(t, ctx, "#main table", "upsert_server", uiWait)
		mustWaitText(t, ctx, "#main table", "get-sum", uiWait)
		evalJS[bool](t, ctx, `(() => { const k = document.querySelector('select[name="kind"]'); k.value = 'admin'; k.form.requestSubmit(); return true; })()`)
		waitfor.True(t, uiWait, "the kind filter leaving the admin changes only", func() bool {
			return evalJS[bool](t, ctx, `(() => { const rows = [...document.querySelectorAll('#main tbody tr')]; return rows.length > 0 && rows.every((r) => r.textContent.includes('Admin change')); })()`)
		})
		axeCheck(t, ctx, "audit")
		screenshot(t, ctx, "audit")
	})

	// Every view again, dark and 375 px wide: still no violation (contrast included), and
	// nothing wider than the screen.
	t.Run("dark and narrow", func(t *testing.T) {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
			t.Fatal(err)
		}
		do1(t, ctx, "narrow", chromedp.EmulateViewport(375, 800))
		for _, hash := range consoleViews {
			openView(t, ctx, s.URL, hash)
			waitfor.True(t, uiWait, hash+" loaded (its requests answered)", func() bool {
				return !evalJS[bool](t, ctx, `document.querySelector('#main').innerText.includes('Loading')`)
			})
			if bg := evalJS[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(20, 20, 20)" {
				t.Fatalf("%s: body background %s in dark mode", hash, bg)
			}
			if w := evalJS[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
				t.Errorf("%s: the page is %d px wide on a 375 px screen", hash, w)
			}
			axeCheck(t, ctx, "dark, narrow "+hash)
			screenshot(t, ctx, "dark-narrow-"+strings.Trim(hash, "#/"))
		}
	})

	t.Run("edit sets approval and limits and keeps the rest", func(t *testing.T) {
		// Fields set through the API. The console's edit is a PATCH of the fields its form
		// shows: what it does not show (expose, the sandbox's details) stays as stored.
		stored := func() map[string]any {
			st, _ := admin(t, s, "GET", "/servers/everything", "").JSON(t)["server"].(map[string]any)
			return st
		}
		set := map[string]any{"approval_tools": []any{"nothing-*"}, "max_output_bytes": float64(65536), "rate_limit": "100/s", "max_concurrency": float64(8),
			"expose": false, "sandbox": map[string]any{"enabled": false, "network": "host"}}
		cfg := map[string]any{}
		for k, v := range stored() {
			switch k {
			case "id", "name", "transport", "command", "args", "timeout_ms":
				cfg[k] = v
			}
		}
		for k, v := range set {
			cfg[k] = v
		}
		if r := admin(t, s, "POST", "/servers", jsonBody(t, cfg)); r.Status != 200 {
			t.Fatalf("setting the fields through the API: %d %s", r.Status, r.Body)
		}
		if r := admin(t, s, "POST", "/servers/everything/connect", ""); r.Status != 200 {
			t.Fatalf("connect: %d %s", r.Status, r.Body)
		}
		set["sandbox"] = stored()["sandbox"] // as the state spells it (empty lists included)
		openView(t, ctx, s.URL, "#/servers")
		mustWaitText(t, ctx, "#server-everything .status", "Connected", uiWait)
		do1(t, ctx, "edit", chromedp.Click(chromedp.CSS(`#server-everything button[aria-label="Edit everything"]`)))
		mustWaitText(t, ctx, "#form-h", "Edit everything", uiWait)
		for name, want := range map[string]string{"rate_limit": "100/s", "max_concurrency": "8", "max_output_bytes": "65536", "approval_tools": "nothing-*", "approval": "none", "sandbox": "off"} {
			if got := evalJS[string](t, ctx, `document.querySelector('#server-form [name="`+name+`"]').value`); got != want {
				t.Errorf("the form shows %s %q, stored as %q", name, got, want)
			}
		}
		evalJS[bool](t, ctx, `(document.querySelector('#server-form [name="approval"]').value = 'required') === 'required'`)
		evalJS[bool](t, ctx, `(document.querySelector('#server-form [name="rate_limit"]').value = '50/s') === '50/s'`)
		axeCheck(t, ctx, "edit form with approval and limits")
		do1(t, ctx, "save", chromedp.Click(chromedp.CSS("#save-button")))
		waitfor.NoError(t, uiWait, func() error {
			if got := stored()["approval"]; got != "required" {
				return fmt.Errorf("approval %v after the edit, want required", got)
			}
			return nil
		})
		after := stored()
		set["rate_limit"], set["approval"] = "50/s", "required"
		for k, v := range set {
			got, _ := json.Marshal(after[k])
			if want, _ := json.Marshal(v); string(got) != string(want) {
				t.Errorf("after the console's edit %s is %s, want %s", k, got, want)
			}
		}
		// The save was an update of the two fields changed, not an upsert of the whole config
		// (its audit entry is written within 100 ms; a connect may follow it).
		waitfor.NoError(t, uiWait, func() error {
			a, _ := listAudit(t, s, "?kind=admin&server=everything&limit=5")
			for _, e := range a.Entries {
				if e.Action == "upsert_server" || e.Action == "update_server" {
					if e.Action != "update_server" || strings.Join(e.Changed, ",") != "rate_limit,approval" {
						return fmt.Errorf("the console's save: %s %v, want update_server of rate_limit, approval", e.Action, e.Changed)
					}
					return nil
				}
			}
			return fmt.Errorf("no write in %s", summary(a.Entries))
		})
	})

}

// consoleViews are the console's views.
var consoleViews = []string{"#/", "#/servers", "#/tools", "#/presets", "#/chat", "#/activity", "#/audit", "#/approvals", "#/pins"}

// TestConsoleKeys: the admin key is asked for when the API answers 401, kept for the tab
// (sessionStorage, never localStorage) and sent only to the admin API; a server without an
// admin key gets the panel that says so with the lines that fix it, and chat still works.
func TestConsoleKeys(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#/servers") // the view waits for the key
	do1(t, ctx, "the key dialog", chromedp.WaitVisible(chromedp.CSS("#key-dialog[open] #key-input")))
	axeCheck(t, ctx, "key dialog")
	typeText(t, ctx, adminKey)
	pressEnter(t, ctx)
	mustWaitText(t, ctx, "#servers-summary", "0/0 connected", uiWait)
	if got := evalJS[string](t, ctx, `sessionStorage.getItem('zest.adminKey') + '|' + localStorage.length`); got != adminKey+"|0" {
		t.Fatalf("the key is kept in sessionStorage only: %q", got)
	}

	bare := startSuite(t) // no admin key at all
	openView(t, ctx, bare.URL, "#/servers")
	mustWaitText(t, ctx, "#main .notice", "no admin key configured", uiWait)
	mustWaitText(t, ctx, "#main .notice pre", "LEMONADE_ADMIN_API_KEY", uiWait)
	axeCheck(t, ctx, "servers without an admin key")
	openView(t, ctx, bare.URL, "#/chat")
	do1(t, ctx, "message", chromedp.SendKeys(chromedp.CSS(`textarea[name="message"]`), "hello without MCP"))
	do1(t, ctx, "send", chromedp.Click(chromedp.CSS(`section[aria-labelledby="conv-h"] button[type="submit"]`)))
	mustWaitText(t, ctx, ".chat-log", "builtin-llm heard: hello without MCP", uiWait)
	// The built-in tools need no preset and no admin key.
	evalJS[bool](t, ctx, `(() => { const p = document.querySelector('select[name="preset"]'); p.value = '@lemonade'; p.dispatchEvent(new Event('change')); return true; })()`)
	mustWaitText(t, ctx, `select[name="tool"]`, "lemonade_list_models", uiWait)
	evalJS[bool](t, ctx, `(() => { const t = document.querySelector('select[name="tool"]'); t.value = 'lemonade_list_models'; t.dispatchEvent(new Event('change')); return t.value === 'lemonade_list_models'; })()`)
	do1(t, ctx, "message", chromedp.SendKeys(chromedp.CSS(`textarea[name="message"]`), `which models? {}`))
	do1(t, ctx, "send", chromedp.Click(chromedp.CSS(`section[aria-labelledby="conv-h"] button[type="submit"]`)))
	mustWaitText(t, ctx, ".chat-log .toolcall", "lemonade_list_models", uiWait)
	mustWaitText(t, ctx, ".chat-log", "builtin-llm", uiWait)
	mustWaitText(t, ctx, ".chat-log", "The tool returned", uiWait)
	axeCheck(t, ctx, "chat without an admin key")
}
