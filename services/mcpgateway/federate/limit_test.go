package federate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
)

// TestToolResultOverTheServerLimit: /mcp/servers/{id} passes a tools/call result within the
// server's max_output_bytes whole, and answers one over it with a valid CallToolResult,
// isError true, that names the size and the limit — never cut JSON.
func TestToolResultOverTheServerLimit(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	f := newFixture(t, u.URL)
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "small")
	call := func(text string) (isError bool, got string) {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]string{"text": text}})
		_, msgs, err := f.exchange(ctx, "small", sess, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+string(args)+`}`)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%q %v", msgs, err)
		}
		var r struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			} `json:"result"`
		}
		if err := json.Unmarshal(msgs[0], &r); err != nil || len(r.Result.Content) != 1 {
			t.Fatalf("the answer %s is not a CallToolResult: %v", msgs[0], err)
		}
		return r.Result.IsError, r.Result.Content[0].Text
	}
	if isErr, got := call(strings.Repeat("a", 900)); isErr || got != "http-echo:"+strings.Repeat("a", 900) {
		t.Fatalf("within the limit: %v %q", isErr, got)
	}
	isErr, got := call(strings.Repeat("a", 2000))
	if !isErr || !strings.Contains(got, `over the limit of MCP server "small" (max_output_bytes 1024)`) || strings.Contains(got, "aaaa") {
		t.Fatalf("over the limit: %v %q", isErr, got)
	}
	noViolations(t, u)
}
