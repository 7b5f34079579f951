package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// The console's defects a new user met (issue 24), each as that user meets it in Chromium:
// the Approvals tab the chat opens knows the admin key; leaving the chat and coming back keeps
// the conversation (its tool-call cards) and the preset; Activity and Audit stamp a call with
// the same time (when it began) in the one format, and break no word at desktop width; a Test
// that fails does not say "Not saved"; an error shows a person's message, its raw text on
// demand.

// chatSelect sets a select of the chat's setup and fires its change.
func chatSelect(t *testing.T, ctx context.Context, name, value string) {
	t.Helper()
	js := `(() => { const s = document.querySelector('select[name="` + name + `"]'); s.value = '` + value + `'; s.dispatchEvent(new Event('change')); return s.value === '` + value + `'; })()`
	waitfor.True(t, uiWait, name+" "+value+" chosen", func() bool { return evalJS[bool](t, ctx, js) })
}

// chatSend types a message in the chat and sends it.
func chatSend(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	do1(t, ctx, "message", chromedp.SendKeys(chromedp.CSS(`textarea[name="message"]`), text))
	do1(t, ctx, "send", chromedp.Click(chromedp.CSS(`section[aria-labelledby="conv-h"] button[type="submit"]`)))
}

// goTo changes view inside the page (the router, no reload), as the navigation does.
func goTo(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	evalJS[bool](t, ctx, `(location.hash = '`+hash+`', true)`)
	waitReady(t, ctx, hash)
}

// brokenWords lists the words of the tables' cells in #main that the layout split over two
// lines (a word is a run of non-space characters; text in <pre> is left out).
const brokenWords = `(() => {
  const out = [];
  for (const cell of document.querySelectorAll('#main td, #main th')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.parentElement.closest('pre, details:not([open])')) continue;
      const re = /\S+/g;
      let m;
      while ((m = re.exec(n.data))) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
  }
  return out.join(' ');
})()`

// rowTime is the <time> of the first table row of #main that mentions text: its shown text
// and its datetime.
func rowTime(t *testing.T, ctx context.Context, text string) (shown, datetime string) {
	t.Helper()
	js := `(() => { const r = [...document.querySelectorAll('#main tbody tr')].find((r) => r.textContent.includes(` + "`" + text + "`" + `));
		const tm = r && r.querySelector('time'); return tm ? tm.textContent + '|' + tm.getAttribute('datetime') : ''; })()`
	var got string
	waitfor.NoError(t, uiWait, func() error {
		if got = evalJS[string](t, ctx, js); got == "" {
			return fmt.Errorf("no row of %s in %q", text, clip(evalJS[string](t, ctx, `document.querySelector('#main').innerText`), 600))
		}
		return nil
	})
	shown, datetime, _ = strings.Cut(got, "|")
	return shown, datetime
}

func TestConsoleDefects(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=1m")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	everything := filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{everything}})
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required"})
	for _, id := range []string{"everything", "guarded"} {
		if r := admin(t, s, "POST", "/servers/"+id+"/connect", ""); r.Status != 200 {
			t.Fatalf("connect %s: %d %s", id, r.Status, r.Body)
		}
	}
	if r := admin(t, s, "POST", "/presets", `{"id":"helper","model":"builtin-llm","mcp_server_ids":["everything","guarded"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")

	t.Run("leaving the chat keeps it", func(t *testing.T) {
		goTo(t, ctx, "#/chat")
		chatSelect(t, ctx, "preset", "helper")
		chatSelect(t, ctx, "tool", "mcp_everything__echo")
		chatSend(t, ctx, `please echo {"message":"kept"}`)
		mustWaitText(t, ctx, ".chat-log .toolcall", "mcp_everything__echo", uiWait)
		mustWaitText(t, ctx, ".chat-log", "The tool returned", uiWait)
		goTo(t, ctx, "#/activity")
		goTo(t, ctx, "#/chat")
		mustWaitText(t, ctx, ".chat-log .toolcall", "Echo: kept", uiWait)
		if got := evalJS[string](t, ctx, `document.querySelector('select[name="preset"]').value + ' ' + document.querySelector('select[name="tool"]').value`); got != "helper mcp_everything__echo" {
			t.Fatalf("back in the chat, preset and tool are %q, want the ones chosen (helper mcp_everything__echo)", got)
		}
		mustWaitText(t, ctx, "#chat-tools", "tools of preset helper", uiWait)
		// The next message still runs with the preset's tools.
		chatSend(t, ctx, `again {"message":"still tools"}`)
		mustWaitText(t, ctx, ".chat-log", "Echo: still tools", uiWait)
		axeCheck(t, ctx, "chat, back again")
	})

	t.Run("the approvals tab knows the key", func(t *testing.T) {
		goTo(t, ctx, "#/chat")
		chatSelect(t, ctx, "preset", "helper")
		chatSelect(t, ctx, "tool", "mcp_guarded__echo")
		chatSend(t, ctx, `please {"text":"wait for me"}`)
		mustWaitText(t, ctx, ".chat-log", "decide in Approvals (new tab)", uiWait)
		opened := chromedp.WaitNewTarget(ctx, func(i *target.Info) bool { return strings.Contains(i.URL, "#/approvals") })
		do1(t, ctx, "open approvals", chromedp.Click(chromedp.CSS(`.chat-log a[href="#/approvals"]`)))
		var id target.ID
		select {
		case id = <-opened:
		case <-ctx.Done():
			t.Fatal("no tab opened")
		}
		tab, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
		defer cancel()
		mustWaitText(t, tab, "#main section pre", "wait for me", uiWait)
		cancel() // the tab has shown what it had to; the call is approved through the API
		pending := pendingApproval(t, s, "guarded", "echo", `{"text":"wait for me"}`)
		if r := admin(t, s, "POST", "/approvals/"+pending+"/approve", ""); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		mustWaitText(t, ctx, ".chat-log", "The tool returned: wait for me", uiWait)
	})

	t.Run("one stamp and whole words in Activity and Audit", func(t *testing.T) {
		// A call of 2 s: its start and its end are in different seconds.
		if r := admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":2}}`); r.Status != 200 {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		goTo(t, ctx, "#/activity")
		act, actAt := rowTime(t, ctx, "trigger-long-running-operation")
		if w := evalJS[string](t, ctx, brokenWords); w != "" {
			t.Errorf("activity at 1280 px breaks words: %s", w)
		}
		if w := evalJS[int](t, ctx, `document.querySelector('#main table').scrollWidth - document.querySelector('#main .table-wrap').clientWidth`); w > 0 {
			t.Errorf("the activity table is %d px wider than its place at 1280 px", w)
		}
		// The audit trail is appended in batches: the view shows what is written when it opens.
		waitfor.NoError(t, uiWait, func() error {
			a, _ := listAudit(t, s, "?kind=tool&server=everything&limit=5")
			for _, e := range a.Entries {
				if e.Tool == "trigger-long-running-operation" {
					return nil
				}
			}
			return fmt.Errorf("not in the trail yet: %s", summary(a.Entries))
		})
		goTo(t, ctx, "#/audit")
		aud, audAt := rowTime(t, ctx, "trigger-long-running-operation")
		if w := evalJS[string](t, ctx, brokenWords); w != "" {
			t.Errorf("audit at 1280 px breaks words: %s", w)
		}
		if w := evalJS[int](t, ctx, `document.querySelector('#main table').scrollWidth - document.querySelector('#main .table-wrap').clientWidth`); w > 0 {
			t.Errorf("the audit table is %d px wider than its place at 1280 px", w)
		}
		t.Logf("activity %q (%s), audit %q (%s)", act, actAt, aud, audAt)
		if act != aud {
			t.Errorf("the same call is stamped %q in Activity and %q in Audit", act, aud)
		}
		screenshot(t, ctx, "audit")
	})

	t.Run("a test is not a save", func(t *testing.T) {
		goTo(t, ctx, "#/servers")
		do1(t, ctx, "name", chromedp.SendKeys(chromedp.CSS(`#server-form input[name="name"]`), "broken"))
		do1(t, ctx, "test", chromedp.Click(chromedp.CSS("#test-button")))
		mustWaitText(t, ctx, `#server-form .field-error`, "command is required", uiWait)
		mustWaitText(t, ctx, "#form-result", "The test failed", uiWait)
		if got := evalJS[string](t, ctx, `document.querySelector('#form-result').innerText`); strings.Contains(got, "Not saved") {
			t.Errorf("after a Test the form says %q", got)
		}
	})

	t.Run("an error for a person", func(t *testing.T) {
		// A call that outlasts its server's timeout (long enough for the reconnection the
		// edit makes: a node server takes a second or two to start on a busy machine).
		if r := admin(t, s, "PATCH", "/servers/everything", `{"timeout_ms":8000}`); r.Status != 200 {
			t.Fatalf("timeout: %d %s", r.Status, r.Body)
		}
		waitfor.True(t, uiWait, "everything's tools listed again", func() bool {
			if strings.Contains(string(admin(t, s, "GET", "/tools", "").Body), "trigger-long-running-operation") {
				return true
			}
			admin(t, s, "POST", "/servers/everything/connect", "")
			return false
		})
		openView(t, ctx, s.URL, "#/tools?server=everything&tool=trigger-long-running-operation")
		evalJS[bool](t, ctx, `(document.querySelector('section[aria-labelledby="args-h"] [name="duration"]').value = '12') === '12'`)
		do1(t, ctx, "call", chromedp.Click(chromedp.CSS(`section[aria-labelledby="args-h"] button[type="submit"]`)))
		do1(t, ctx, "the error", chromedp.WaitVisible(chromedp.CSS("#tool-result .error strong")))
		got := evalJS[string](t, ctx, `(() => { const b = document.querySelector('#tool-result .error'); const d = b.querySelector('details'); return b.innerText + '|' + (d ? d.open + ' ' + d.textContent : 'no details'); })()`)
		shown, details, _ := strings.Cut(got, "|")
		t.Logf("shown %q; details %q", shown, details)
		for _, raw := range []string{"deadline", "context", "Internal error", "-326"} {
			if strings.Contains(shown, raw) {
				t.Errorf("the error shows the raw text (%s): %q", raw, shown)
			}
		}
		if !strings.HasPrefix(details, "false ") || !strings.Contains(details, "everything") {
			t.Errorf("the details (closed, with the raw message): %q", details)
		}
		axeCheck(t, ctx, "try a tool, an error")
	})
}
