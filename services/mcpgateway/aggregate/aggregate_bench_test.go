package aggregate

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
)

// BenchmarkPreset is one POST to /mcp/presets/all over loopback gRPC, upstreams in process
// (go test -bench Preset ./aggregate/): a server's tool by chat_name (and, to compare, the
// same tool at /mcp/servers/alpha), a built-in tool, and the tools/list of four providers, in
// a session and in 2026-07-28.
func BenchmarkPreset(b *testing.B) {
	quiet := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler)) // a log line per tool call is not measured here
	b.Cleanup(func() { slog.SetDefault(quiet) })
	f := newFixture(b, "")
	ctx := withKey(b.Context(), testKeys.API)
	sess, _, err := mcpservetest.Initialize(ctx, f.mcp, &mcpservetest.Request{PresetID: "all", Payload: []byte(initialize)})
	if err != nil {
		b.Fatal(err)
	}
	fed, _, err := mcpservetest.Initialize(ctx, f.mcp, &mcpservetest.Request{ServerID: "alpha", Payload: []byte(initialize)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("the same tool at /mcp/servers/alpha", func(b *testing.B) {
		req := &mcpservetest.Request{ServerID: "alpha", SessionID: fed, Payload: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`)}
		for b.Loop() {
			if _, msgs, err := mcpservetest.Exchange(ctx, f.mcp, req); err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "alpha echo: x") {
				b.Fatalf("%q %v", msgs, err)
			}
		}
	})
	// The same in 2026-07-28: no session, the checks of every modern request, a decorated
	// result.
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct{ name, method, mcpName, body, want string }{
		{"2026-07-28 server tool", "tools/call", "mcp_alpha__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp_alpha__echo","arguments":{"message":"x"},` + meta + `}}`, "alpha echo: x"},
		{"2026-07-28 built-in tool", "tools/call", "lemonade_echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lemonade_echo","arguments":{"message":"x"},` + meta + `}}`, "builtin echo: x"},
		{"2026-07-28 tools/list", "tools/list", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, "mcp_beta__echo"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := &mcpservetest.Request{PresetID: "all", ProtocolVersion: "2026-07-28", McpMethod: c.method, McpName: c.mcpName, Payload: []byte(c.body)}
			for b.Loop() {
				_, msgs, err := mcpservetest.Exchange(ctx, f.mcp, req)
				if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), c.want) || !strings.Contains(string(msgs[0]), `"resultType":"complete"`) {
					b.Fatalf("%q %v", msgs, err)
				}
			}
		})
	}
	for _, c := range []struct{ name, body, want string }{
		{"server tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp_alpha__echo","arguments":{"message":"x"}}}`, "alpha echo: x"},
		{"built-in tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lemonade_echo","arguments":{"message":"x"}}}`, "builtin echo: x"},
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "mcp_beta__echo"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := &mcpservetest.Request{PresetID: "all", SessionID: sess, Payload: []byte(c.body)}
			for b.Loop() {
				_, msgs, err := mcpservetest.Exchange(ctx, f.mcp, req)
				if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), c.want) {
					b.Fatalf("%q %v", msgs, err)
				}
			}
		})
	}
}
