package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestConsoleTryMCP: Try a tool speaks MCP to /mcp/servers/{id} from the page, as the
// Inspector does, against server-everything: the tool list is searched, a call's progress shows as a bar
// (notifications/progress), Cancel ends a call on the server (notifications/cancelled: the
// call ends long before its 30 s), a sampling request and an elicitation request are
// answered by a person in a form, resources are listed and read, a prompt is got with its
// arguments. axe-core finds nothing in each state.
func TestConsoleTryMCP(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	everything := filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{everything}})
	if r := admin(t, s, "POST", "/servers/everything/connect", ""); r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")

	// setArg sets an argument's field of the generated form.
	setArg := func(name, value string) {
		t.Helper()
		js := fmt.Sprintf(`(() => { const i = document.querySelector('section[aria-labelledby="args-h"] [name=%q]'); if (!i) return false; i.value = %q; return true; })()`, name, value)
		if !evalJS[bool](t, ctx, js) {
			t.Fatalf("no field %s in the form", name)
		}
	}
	call := func() {
		t.Helper()
		do1(t, ctx, "call", chromedp.Click(chromedp.CSS(`section[aria-labelledby="args-h"] button[type="submit"]`)))
	}
	tool := func(name string) {
		t.Helper()
		openView(t, ctx, s.URL, "#/tools?server=everything&tool="+name)
		mustWaitText(t, ctx, `section[aria-labelledby="pick-h"]`, name, uiWait)
	}

	t.Run("progress", func(t *testing.T) {
		tool("trigger-long-running-operation")
		setArg("duration", "2")
		setArg("steps", "4")
		call()
		mustWaitText(t, ctx, "#progress-text", " of 4", uiWait)
		if v := evalJS[string](t, ctx, `(() => { const p = document.querySelector('#call-progress'); return p ? p.value + '/' + p.max : 'gone'; })()`); v != "gone" && !strings.HasSuffix(v, "/4") {
			t.Errorf("the progress bar: %s, want a value out of 4", v)
		}
		axeCheck(t, ctx, "try a tool, progress")
		mustWaitText(t, ctx, "#tool-result", "Long running operation completed", uiWait)
	})

	// The tool list is searched: only the tools that match stay, and the first is chosen.
	t.Run("search", func(t *testing.T) {
		tool("echo")
		do1(t, ctx, "search", chromedp.SendKeys(chromedp.CSS(`input[name="tool-search"]`), "get-sum"))
		mustWaitText(t, ctx, "#tool-search-count", "1 of ", uiWait)
		if got := evalJS[string](t, ctx, `[...document.querySelectorAll('select[name="tool"] option:not([hidden])')].map((o) => o.textContent).join('|')`); !strings.HasPrefix(got, "get-sum") || strings.Contains(got, "|") {
			t.Errorf("the tools left by the search: %q, want get-sum alone", got)
		}
		waitfor.True(t, uiWait, "get-sum chosen (its form shown)", func() bool {
			return evalJS[bool](t, ctx, `!!document.querySelector('section[aria-labelledby="args-h"] [name="a"]')`)
		})
		axeCheck(t, ctx, "try a tool, a search")
	})

	t.Run("sampling", func(t *testing.T) {
		tool("trigger-sampling-request")
		setArg("prompt", "a haiku")
		call()
		if err := waitText(ctx, "#server-requests", "a haiku", uiWait); err != nil {
			t.Fatalf("%v; the result says %q", err, evalJS[string](t, ctx, `document.querySelector('#tool-result').innerText`))
		}
		axeCheck(t, ctx, "try a tool, a sampling request")
		screenshot(t, ctx, "sampling")
		do1(t, ctx, "answer", chromedp.SendKeys(chromedp.CSS(`#server-requests textarea[name="sampling-answer"]`), "Leaves fall on the gate"))
		do1(t, ctx, "send", chromedp.Click(chromedp.CSS(`#server-requests button[type="submit"]`)))
		mustWaitText(t, ctx, "#tool-result", "Leaves fall on the gate", uiWait)
	})

	t.Run("elicitation", func(t *testing.T) {
		tool("trigger-elicitation-request")
		call()
		mustWaitText(t, ctx, "#server-requests", "Please provide inputs", uiWait)
		axeCheck(t, ctx, "try a tool, an elicitation request")
		do1(t, ctx, "name", chromedp.SendKeys(chromedp.CSS(`#server-requests input[name="name"]`), "Ada Lovelace"))
		do1(t, ctx, "accept", chromedp.Click(chromedp.CSS(`#server-requests button[type="submit"]`)))
		mustWaitText(t, ctx, "#tool-result", "Ada Lovelace", uiWait)
	})

	t.Run("resources", func(t *testing.T) {
		do1(t, ctx, "list", chromedp.Click(chromedp.CSS("#list-resources")))
		mustWaitText(t, ctx, "#resources", "resources of everything", uiWait)
		do1(t, ctx, "read", chromedp.Click(chromedp.CSS(`#resources button[aria-label^="Read "]`)))
		mustWaitText(t, ctx, "#resource-content", "Content 1 of", uiWait)
		axeCheck(t, ctx, "try a tool, a resource read")
	})

	t.Run("prompts", func(t *testing.T) {
		do1(t, ctx, "list", chromedp.Click(chromedp.CSS("#list-prompts")))
		mustWaitText(t, ctx, "#prompts", "args-prompt", uiWait)
		do1(t, ctx, "use", chromedp.Click(chromedp.CSS(`#prompts button[aria-label="Use the prompt args-prompt"]`)))
		do1(t, ctx, "get without the city", chromedp.Click(chromedp.CSS(`#prompt-form button[type="submit"]`)))
		mustWaitText(t, ctx, "#prompt-form .field-error", "city is required", uiWait)
		do1(t, ctx, "city", chromedp.SendKeys(chromedp.CSS(`#prompt-form input[name="prompt-city"]`), "Lyon"))
		do1(t, ctx, "get", chromedp.Click(chromedp.CSS(`#prompt-form button[type="submit"]`)))
		mustWaitText(t, ctx, "#prompt-result", "What's weather in Lyon?", uiWait)
		axeCheck(t, ctx, "try a tool, a prompt")
		screenshot(t, ctx, "tools-mcp")
	})
	// Last: server-everything's operation runs on to its end after the cancel (it does not
	// watch the signal), and a stdio server's sampling and elicitation reach a client only
	// while one call is in flight on it.
	t.Run("cancel", func(t *testing.T) {
		tool("trigger-long-running-operation")
		setArg("duration", "30")
		setArg("steps", "30")
		call()
		mustWaitText(t, ctx, "#progress-text", " of 30", uiWait)
		do1(t, ctx, "cancel", chromedp.Click(chromedp.CSS("#cancel-call")))
		mustWaitText(t, ctx, "#tool-result", "Cancelled", uiWait)
		// The server was told: the call ends (and is recorded) long before its 30 s.
		waitfor.NoError(t, uiWait, func() error {
			var got struct {
				Calls []struct{ Tool, Outcome, Path string } `json:"calls"`
			}
			if err := json.Unmarshal(admin(t, s, "GET", "/activity", "").Body, &got); err != nil {
				return err
			}
			for _, c := range got.Calls {
				if c.Tool == "trigger-long-running-operation" && c.Outcome != "ok" {
					if c.Path != "mcp" {
						return fmt.Errorf("the cancelled call came through %s, want mcp", c.Path)
					}
					return nil
				}
			}
			return fmt.Errorf("no ended, cancelled call in %+v", got.Calls)
		})
	})
}
