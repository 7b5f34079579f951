package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/zestmcp/zest/e2e/internal/oauthserver"
)

// TestConsoleSignIn: a server that signs in by OAuth shows "Needs sign-in" in the Servers view;
// its Sign in opens the authorization server, which (its user signed in at once) comes back to
// Zest's callback page, "signed in"; back in the console the server shows "Signed in as … until
// …", connects and its tool is listed; Sign out returns it to "Needs sign-in".
func TestConsoleSignIn(t *testing.T) {
	s, _, up := upstreamOAuthSuite(t)
	registerServer(t, s, map[string]any{"id": "tracker", "url": up.URL,
		"oauth": map[string]any{"client_id": oauthserver.ZestClientID, "scopes": []string{"mcp", "offline_access"}}})
	ctx := newBrowser(t)
	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	openView(t, ctx, s.URL, "#/servers")
	mustWaitText(t, ctx, `#server-tracker [data-part="oauth"]`, "Needs sign-in", uiWait)
	axeCheck(t, ctx, "a server that needs sign-in")

	do1(t, ctx, "sign in", chromedp.Click(chromedp.CSS(`button[aria-label="Sign in tracker"]`)))
	mustWaitText(t, ctx, "#result", "Zest is signed in to tracker as ", uiWait)
	if st := evalJS[string](t, ctx, `document.querySelector('#result').dataset.status`); st != "signed_in" {
		t.Fatalf("callback page status %q", st)
	}
	axeCheck(t, ctx, "the callback page")

	navigate(t, ctx, s.URL+"/#key="+adminKey)
	waitReady(t, ctx, "#/")
	openView(t, ctx, s.URL, "#/servers")
	mustWaitText(t, ctx, `#server-tracker [data-part="oauth"]`, "Signed in as ", uiWait)
	do1(t, ctx, "connect", chromedp.Click(chromedp.CSS(`button[aria-label="Connect tracker"]`)))
	mustWaitText(t, ctx, `#server-tracker [data-part="tools"]`, "Tools (2)", uiWait) // hello and whoami

	do1(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`button[aria-label="Sign out tracker"]`)))
	mustWaitText(t, ctx, `#server-tracker [data-part="oauth"]`, "Needs sign-in", uiWait)
}
