package e2e

import (
	"net/http"
	"strconv"
	"testing"
)

// TestWholeAnswerHasItsLength: a tool call on /mcp/servers/{id} answered with one JSON body
// reaches the client with its Content-Length, in one piece, as the one-process proxies answer
// it — not chunked and then ended by a second write (the edge flushed the exchange's head and
// its body, then ended the chunked body when the exchange ended). A notification's 202 has a
// length of 0.
func TestWholeAnswerHasItsLength(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	sess := mustInit(t, s, "everything")

	r := fedCall(t, s, "everything", sess, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, fedAPIAuth, "MCP-Protocol-Version: 2025-11-25")
	if r.Status != http.StatusAccepted || r.Header.Get("Content-Length") != "0" {
		t.Errorf("notification: %d, Content-Length %q (want 202 and 0)", r.Status, r.Header.Get("Content-Length"))
	}
	r = fedCall(t, s, "everything", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"whole"}}}`,
		fedAPIAuth, "MCP-Protocol-Version: 2025-11-25")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("tools/call: %d %v %s", r.Status, r.Header, r.Body)
	}
	if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(r.Body)) {
		t.Errorf("tools/call answered Content-Length %q for a body of %d bytes (chunked: the edge wrote it in two pieces)", got, len(r.Body))
	}
	if text := firstResult(t, r)["content"].([]any)[0].(map[string]any)["text"]; text != "Echo: whole" {
		t.Errorf("echo answered %v", text)
	}
}
