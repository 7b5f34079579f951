package e2e

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// Bridging the MCP eras on /mcp/presets/{id}, as on /mcp/servers/{id} (mcp_bridge_test.go).

// TestPresetBridgeModernClientOfStdioProvider: mark3labs/mcp-go's client (2026-07-28, with a
// sampling handler) calls the stdio fixture's test_sampling under its chat_name through a
// preset whose providers are the fixture and the built-in tools: the fixture's
// sampling/createMessage (session era) reaches the client as an input_required result, and
// its retry resumes the call parked in the tool host, which answers with the sampled text.
func TestPresetBridgeModernClientOfStdioProvider(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "fixture", "command": conformanceFixture(t)})
	putPreset(t, s, "bridged", "fixture", "lemonade")
	cl, asked := modernAskedClient(t, presetURL(s, "bridged"), "sampled through the preset")
	call := mcp.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = "mcp_fixture__test_sampling", map[string]any{"prompt": "what is a preset?"}
	out, err := cl.CallTool(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	if len(out.Content) > 0 {
		if tc, ok := mcp.AsTextContent(out.Content[0]); ok {
			text = tc.Text
		}
	}
	if out.IsError || out.ResultType != "complete" || text != "LLM response: sampled through the preset" {
		t.Fatalf("test_sampling: isError %v, resultType %q, text %q", out.IsError, out.ResultType, text)
	}
	if got := asked(); strings.Join(got, "|") != "sampling: what is a preset?" {
		t.Fatalf("the client was asked %v", got)
	}
}

// TestPresetBridgeSessionClientOfModernProvider: the TS SDK (session era, with sampling and
// elicitation handlers) calls a 2026-07-28 provider's tools under their chat_names through a
// preset: each input_required round reaches it as ordinary requests on the call's stream
// (federate.Handler.Forward bridges a session's calls), one round and two in a row.
func TestPresetBridgeSessionClientOfModernProvider(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "mrtr", "transport": "streamable-http", "url": mrtrFixture(t)})
	putPreset(t, s, "rounds", "mrtr", "lemonade")
	got := bridgeClient(t, presetURL(s, "rounds"), "mcp_mrtr__test_sampling", `{"prompt":"what is zest?"}`)
	if got.IsError || got.Text != "LLM response: sampled by the e2e client" || strings.Join(got.Asked, "|") != "sampling: what is zest?" {
		t.Fatalf("one round: %+v", got)
	}
	got = bridgeClient(t, presetURL(s, "rounds"), "mcp_mrtr__zest_two_rounds", `{}`)
	if got.IsError || got.Text != "about:zest → sampled by the e2e client" || strings.Join(got.Asked, "|") != "elicitation: Which topic?|sampling: tell me about zest" {
		t.Fatalf("two rounds: %+v", got)
	}
}
