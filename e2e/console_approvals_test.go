package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleApprovals: a chat whose tool call waits for approval shows in the console's
// Approvals view with its arguments and who asked (axe-core clean); Deny with a reason and
// Approve, by their labelled buttons, end the waiting calls as decided.
func TestConsoleApprovals(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=1m")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required"})
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	openView(t, ctx, s.URL, "#/approvals")
	mustWaitText(t, ctx, "#main", "No tool call waits for approval.", uiWait)

	// chat runs one chat calling the guarded echo, and sends its final text on the channel.
	chat := func(text string) <-chan string {
		done := make(chan string, 1)
		go func() {
			done <- approvalChat(t, s, text, func(map[string]any) {})
		}()
		return done
	}
	denied := chat("please deny me")
	mustWaitText(t, ctx, "#main section pre", "please deny me", uiWait)
	mustWaitText(t, ctx, "#main section", "echo of guarded", uiWait)
	axeCheck(t, ctx, "approvals, one waiting")
	screenshot(t, ctx, "approvals")
	do1(t, ctx, "reason", chromedp.SendKeys(chromedp.CSS(`#main section input[type="text"]`), "not today"))
	do1(t, ctx, "deny", chromedp.Click(chromedp.CSS(`#main section button[aria-label^="Deny echo of guarded"]`)))
	if got := <-denied; !strings.Contains(got, "an administrator denied it (approval_denied): not today") {
		t.Fatalf("denied chat said %q", got)
	}
	mustWaitText(t, ctx, "#live", "Denied: echo of guarded.", uiWait)

	approved := chat("please approve me")
	mustWaitText(t, ctx, "#main section pre", "please approve me", uiWait)
	do1(t, ctx, "approve", chromedp.Click(chromedp.CSS(`#main section button[aria-label^="Approve echo of guarded"]`)))
	if got := <-approved; got != "The tool returned: please approve me" {
		t.Fatalf("approved chat said %q", got)
	}
	mustWaitText(t, ctx, "#main", "No tool call waits for approval.", uiWait)
}
