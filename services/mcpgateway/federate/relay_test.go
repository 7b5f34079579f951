package federate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"github.com/zestmcp/zest/services/mcpgateway/session"
)

const initializeSampling = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"t","version":"1"}}}`

// TestRelayThroughAnHTTPUpstream: a request the upstream sends on the SSE stream of a
// forwarded call reaches the client on the POST's stream under a signed id; the client's
// answer, POSTed in the same session, goes back to the upstream; the same id is refused in
// another session; a client that declared no sampling does not get it.
func TestRelayThroughAnHTTPUpstream(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{Ask: true})
	f := newFixture(t, u.URL)
	ctx := withKey(t.Context(), testKeys.API)
	sess, msgs, err := f.exchange(ctx, "up", "", initializeSampling)
	if err != nil || sess == "" || len(msgs) != 1 {
		t.Fatalf("initialize: %q %q %v", sess, msgs, err)
	}
	if cl, err := f.codec.Parse(sess); err != nil || cl.Relays != "sr" {
		t.Fatalf("claims %+v, %v; want relays sr", cl, err)
	}
	other, _ := f.open(t, ctx, "up") // declared no capabilities

	stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{ServerID: "up", SessionID: sess,
		Payload: []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{"method":"sampling/createMessage"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	item, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(item.Message, &req); err != nil || req.Method != "sampling/createMessage" || !strings.HasPrefix(req.ID, session.RelayPrefix) ||
		item.Final || string(req.Params) != `{"asked":"sampling/createMessage"}` {
		t.Fatalf("first item %s (final %v), want the upstream's request", item.Message, item.Final)
	}
	answer := `{"jsonrpc":"2.0","id":"` + req.ID + `","result":{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}}`
	// Another session cannot answer it.
	if _, msgs, err := f.exchange(ctx, "up", other, answer); err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "its id was not issued for it") {
		t.Fatalf("answer from another session: %q %v", msgs, err)
	}
	if _, msgs, err := f.exchange(ctx, "up", sess, answer); err != nil || len(msgs) != 0 {
		t.Fatalf("answer: %q %v, want 202", msgs, err)
	}
	item, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(item.Message); !item.Final || !strings.Contains(got, `"id":5`) || !strings.Contains(got, `sampled`) {
		t.Fatalf("final %s", got)
	}
	// Answered once: a second answer is refused, saying so.
	if _, msgs, err := f.exchange(ctx, "up", sess, answer); err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "no request of the MCP server waits for this answer") {
		t.Fatalf("second answer: %q %v", msgs, err)
	}

	// The client that declared neither sampling nor roots: no relay, and answers that say why.
	for method, want := range map[string]string{"sampling/createMessage": "does not accept sampling/createMessage", "roots/list": `\"roots\":[]`} {
		_, msgs, err := f.exchange(ctx, "up", other, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ask","arguments":{"method":"`+method+`"}}}`)
		if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), want) {
			t.Fatalf("%s without the capability: %q %v", method, msgs, err)
		}
	}
	noViolations(t, u)
}

func noViolations(t *testing.T, u *mcptest.Upstream) {
	t.Helper()
	if v := u.Violations(); len(v) > 0 {
		t.Fatalf("the upstream saw violations: %v", v)
	}
}

// Every request of a session that /mcp/servers/{id} and /mcp/presets/{id} forward is ordered
// after the server's notifications (upstream.Hooks.Ordered): those reach the same client on
// its GET streams (Notify), and an answer must not overtake the log messages its server wrote
// before it. A request of MCP 2026-07-28 has no GET stream to be ordered with: it never waits.
func TestSessionRequestsFollowTheirNotifications(t *testing.T) {
	for name, c := range map[string]*call{"session era": {sessionID: "s"}, "2026-07-28": {modern: true}} {
		for _, params := range []string{`{}`, `{"_meta":{"progressToken":1}}`} {
			if got, want := c.hooks(json.RawMessage(params)).Ordered, !c.modern; got != want {
				t.Errorf("%s, params %s: Ordered %v, want %v", name, params, got, want)
			}
		}
	}
}
