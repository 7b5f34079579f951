package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsolePresetShaping: the console's preset view shows a preset's shaped tools and edits
// them — a rename saved, an argument that is not a JSON object reported at its field before
// anything is sent, a tool shaped anew (hidden) — and saving keeps the entries it did not
// touch. Before, the form knew no tools, and saving a preset erased its shaping.
func TestConsolePresetShaping(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	putShapedPreset(t, s)
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	openView(t, ctx, s.URL, "#/presets")
	mustWaitText(t, ctx, `section[aria-labelledby="presets-h"]`, "4 tools shaped", uiWait)
	do1(t, ctx, "edit", chromedp.Click(chromedp.CSS(`button[aria-label="Edit preset shaped"]`)))
	value := func(name string) string {
		return evalJS[string](t, ctx, `(document.querySelector('form [name="`+name+`"]') || {value: 'missing'}).value`)
	}
	if got := value("tools.0.tool") + " " + value("tools.0.name") + " " + value("tools.0.fixed") + " " + value("tools.0.defaults"); got != `mcp_everything__get-sum add {"a":40} {"b":2}` {
		t.Fatalf("the first shaped tool in the form: %s", got)
	}
	if hidden := evalJS[bool](t, ctx, `document.querySelector('form [name="tools.2.hidden"]').checked`); !hidden {
		t.Fatal("get-env is not shown hidden")
	}
	set := func(name, v string) {
		t.Helper()
		evalJS[bool](t, ctx, `(() => { const i = document.querySelector('form [name="`+name+`"]'); i.value = `+jsString(v)+`; return true; })()`)
	}
	set("tools.0.name", "plus")
	set("tools.1.fixed", "[1]")
	do1(t, ctx, "save", chromedp.Click(chromedp.CSS(`form button[type="submit"]`)))
	mustWaitText(t, ctx, `form .field-error`, "as one JSON object", uiWait)
	if r := admin(t, s, "GET", "/presets/shaped", ""); !strings.Contains(string(r.Body), `"name":"add"`) {
		t.Fatalf("a form with a bad argument was sent: %s", r.Body)
	}
	axeCheck(t, ctx, "presets, shaped tool error")
	set("tools.1.fixed", "")
	do1(t, ctx, "shape a tool", chromedp.Click(chromedp.CSS(`form button.secondary.small:not([aria-label])`)))
	set("tools.4.tool", "mcp_everything__get-tiny-image")
	evalJS[bool](t, ctx, `(document.querySelector('form [name="tools.4.hidden"]').checked = true)`)
	do1(t, ctx, "save", chromedp.Click(chromedp.CSS(`form button[type="submit"]`)))
	mustWaitText(t, ctx, `form .okbox`, "Preset shaped saved", uiWait)
	r := admin(t, s, "GET", "/presets/shaped", "")
	var saved bytes.Buffer // protojson spaces its output at random (", " or ","): compared compact
	if err := json.Compact(&saved, r.Body); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	for _, want := range []string{`"name":"plus"`, `"tool":"mcp_everything__get-env","name":"","description":"","hidden":true`,
		`"tool":"mcp_everything__get-tiny-image","name":"","description":"","hidden":true`, `"fixed":{"a":40}`, `"name":"models"`} {
		if !strings.Contains(saved.String(), want) {
			t.Errorf("the saved preset lacks %s: %s", want, saved.String())
		}
	}
	axeCheck(t, ctx, "presets, shaped tools")

	// The chat view offers the shaped names to tool_choice: the ones a chat of it may call, not
	// the admin catalog's (everything connected, so that the catalog lists its tools).
	if r := admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"echo","arguments":{"message":"x"}}`); r.Status != 200 {
		t.Fatalf("connect everything: %d %s", r.Status, r.Body)
	}
	openView(t, ctx, s.URL, "#/chat?preset=shaped")
	mustWaitText(t, ctx, `select[name="tool"]`, "plus", uiWait)
	got := " " + evalJS[string](t, ctx, `[...document.querySelectorAll('select[name="tool"] option')].map((o) => o.value).join(' ')`) + " "
	for _, name := range []string{"plus", "say", "models", "mcp_everything__echo", "mcp_everything__get-sum", "mcp_everything__get-env", "mcp_everything__get-tiny-image"} {
		offered, want := strings.Contains(got, " "+name+" "), name == "plus" || name == "say" || name == "models"
		if offered != want {
			t.Errorf("the chat's tools offer %s: %v, want %v (%s)", name, offered, want, got)
		}
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}
