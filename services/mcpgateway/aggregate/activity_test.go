package aggregate

import (
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
)

// Each tools/call is recorded once, by the endpoint that answers it: a preset's server tool
// (under its chat_name) and built-in tool, the same server at /mcp/servers/{id}, /mcp's own
// built-in tool, in a session and in 2026-07-28; who is the hash of the caller's key.
func TestActivityOfEveryEndpoint(t *testing.T) {
	f := newFixture(t, "")
	ctx := withKey(t.Context(), testKeys.API)
	sess, _, err := f.exchange(ctx, "all", "", initialize)
	if err != nil {
		t.Fatal(err)
	}
	fed, _, err := mcpservetest.Initialize(ctx, f.mcp, &mcpservetest.Request{ServerID: "alpha", Payload: []byte(initialize)})
	if err != nil {
		t.Fatal(err)
	}
	own, _, err := f.exchange(ctx, "", "", initialize)
	if err != nil {
		t.Fatal(err)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, req := range []*mcpservetest.Request{
		{PresetID: "all", SessionID: sess, Payload: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp_alpha__echo","arguments":{"message":"x"}}}`)},
		{PresetID: "all", SessionID: sess, Payload: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_echo","arguments":{"message":"x"}}}`)},
		{ServerID: "alpha", SessionID: fed, Payload: []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`)},
		{SessionID: own, Payload: []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lemonade_echo","arguments":{"message":"x"}}}`)},
		{PresetID: "all", ProtocolVersion: "2026-07-28", McpMethod: "tools/call", McpName: "mcp_alpha__echo",
			Payload: []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp_alpha__echo","arguments":{"message":"x"},` + meta + `}}`)},
		{ServerID: "alpha", ProtocolVersion: "2026-07-28", McpMethod: "tools/call", McpName: "nope",
			Payload: []byte(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope","arguments":{},` + meta + `}}`)},
	} {
		if _, _, err := mcpservetest.Exchange(ctx, f.mcp, req); err != nil {
			t.Fatalf("%s: %v", req.Payload, err)
		}
	}
	calls, latest := f.activity.List(0, 0)
	type rec struct{ server, tool, chat, preset, outcome string }
	want := []rec{ // oldest first
		{"alpha", "echo", "mcp_alpha__echo", "all", "ok"},
		{"lemonade", "lemonade_echo", "", "all", "ok"},
		{"alpha", "echo", "", "", "ok"},
		{"lemonade", "lemonade_echo", "", "", "ok"},
		{"alpha", "echo", "mcp_alpha__echo", "all", "ok"},
		{"alpha", "nope", "", "", "error"},
	}
	if latest != uint64(len(want)) || len(calls) != len(want) {
		t.Fatalf("%d calls recorded (latest %d), want %d: %+v", len(calls), latest, len(want), calls)
	}
	for i, w := range want {
		c := calls[len(calls)-1-i]
		got := rec{c.Server, c.Tool, c.ChatName, c.Preset, c.Outcome}
		if got != w || c.Path != activity.PathMCP || c.Who != activity.Who(testKeys.API) || c.Arguments != "" || c.Result != "" {
			t.Errorf("call %d: %+v, want %+v", i+1, c, w)
		}
	}
	if e := calls[0].Error; e == "" {
		t.Errorf("the failed call has no error message")
	}
}
