package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// consoleDocsShots is the variable that names the directory the docs' screenshots are written
// to (docs/user/console/): unset, none is written.
const consoleDocsShots = "ZEST_CONSOLE_DOCS_SHOTS"

// TestConsoleLook: every view at a desktop width (the harness's 1280×900), light and dark (the
// system's colour scheme, emulated): axe-core finds nothing, nothing is wider than the window,
// the navigation stays in view when the page is scrolled, the body follows the scheme.
// With ZEST_CONSOLE_DOCS_SHOTS=dir each view is also written as dir/<view>-<light|dark>.png,
// at the viewport: the docs' images are made by
//
//	ZEST_CONSOLE_DOCS_SHOTS=$PWD/../docs/user/console go test -run TestConsoleLook .
func TestConsoleLook(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	everything := filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	registerServer(t, s, map[string]any{"id": "everything", "name": "Everything (reference server)", "command": "node", "args": []string{everything}})
	if r := admin(t, s, "POST", "/servers/everything/connect", ""); r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/presets", `{"id":"helper","name":"Helper","model":"builtin-llm","mcp_server_ids":["everything"],"system_prompt":"You help."}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	for _, args := range []string{`{"message":"hello"}`, `{"message":"a longer message, to see how a row wraps"}`} {
		if r := admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"echo","arguments":`+args+`}`); r.Status != 200 {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
	}
	if r := admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"get-sum","arguments":{"a":1,"b":2}}`); r.Status != 200 {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	dir := os.Getenv(consoleDocsShots)
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("%s: %v", consoleDocsShots, err)
		}
	}

	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	// A conversation with a tool call, which the chat keeps while the other views are shown.
	goTo(t, ctx, "#/chat")
	chatSelect(t, ctx, "preset", "helper")
	chatSelect(t, ctx, "tool", "mcp_everything__echo")
	chatSend(t, ctx, `please echo {"message":"from the chat"}`)
	mustWaitText(t, ctx, ".chat-log", "The tool returned", uiWait)

	names := map[string]string{"#/": "dashboard", "#/servers": "servers", "#/tools": "tools", "#/presets": "presets", "#/chat": "chat", "#/activity": "activity", "#/audit": "audit", "#/approvals": "approvals", "#/pins": "pins"}
	for _, scheme := range []struct{ name, bg string }{{"light", "rgb(255, 255, 255)"}, {"dark", "rgb(20, 20, 20)"}} {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme.name}}}); err != nil {
			t.Fatal(err)
		}
		for _, hash := range consoleViews {
			what := scheme.name + " " + hash
			goTo(t, ctx, hash)
			waitfor.True(t, uiWait, what+" loaded (its requests answered)", func() bool {
				return !evalJS[bool](t, ctx, `document.querySelector('#main').innerText.includes('Loading')`)
			})
			if bg := evalJS[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != scheme.bg {
				t.Errorf("%s: body background %s, want %s", what, bg, scheme.bg)
			}
			if w := evalJS[int](t, ctx, `document.documentElement.scrollWidth`); w > viewportWidth {
				t.Errorf("%s: the page is %d px wide in a %d px window", what, w, viewportWidth)
			}
			if w := evalJS[string](t, ctx, brokenWords); w != "" {
				t.Errorf("%s: table cells break words: %s", what, w)
			}
			// Scrolled to the bottom, the navigation is still in view.
			if got := evalJS[string](t, ctx, `(() => { scrollTo(0, document.documentElement.scrollHeight); const r = document.querySelector('nav').getBoundingClientRect();
				const ok = r.top >= 0 && r.bottom <= innerHeight; scrollTo(0, 0); return ok ? '' : 'nav at ' + r.top + '..' + r.bottom + ' of ' + innerHeight + ', page ' + document.documentElement.scrollHeight; })()`); got != "" {
				t.Errorf("%s: the navigation scrolled away: %s", what, got)
			}
			axeCheck(t, ctx, what)
			if dir == "" {
				continue
			}
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatalf("%s: screenshot: %v", what, err)
			}
			path := filepath.Join(dir, names[hash]+"-"+scheme.name+".png")
			if err := os.WriteFile(path, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s (%d bytes)", what, path, len(png))
		}
	}
	if dir != "" {
		entries, _ := os.ReadDir(dir)
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		t.Logf("%s: %s", dir, strings.Join(got, " "))
	}
}
