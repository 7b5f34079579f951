package aggregate

import (
	"encoding/json"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// TestToolResultOverTheServerLimit: a preset's tools/call is held to its server's
// max_output_bytes as /mcp/servers/{id} is: within it whole, over it a valid CallToolResult,
// isError true, that names the size and the limit.
func TestToolResultOverTheServerLimit(t *testing.T) {
	f := newFixture(t, "")
	alpha, err := f.reg.GetServer(t.Context(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	tight := &mcpgatewayv1.ServerConfig{Id: "tight", Transport: alpha.GetTransport(), Url: alpha.GetUrl(), Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000), MaxOutputBytes: proto.Int32(1024)}
	if err := f.reg.PutServer(t.Context(), tight); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.PutPreset(t.Context(), &mcpgatewayv1.Preset{Id: "tight", McpServerIds: []string{"tight"}}); err != nil {
		t.Fatal(err)
	}
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "tight")
	call := func(message string) (bool, string) {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"name": "mcp_tight__echo", "arguments": map[string]string{"message": message}})
		r := f.result(t, api, "tight", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`+string(args)+`}`)
		content, _ := r["content"].([]any)
		if len(content) != 1 {
			t.Fatalf("the answer %v is not a CallToolResult", r)
		}
		text, _ := content[0].(map[string]any)["text"].(string)
		isErr, _ := r["isError"].(bool)
		return isErr, text
	}
	if isErr, got := call(strings.Repeat("a", 700)); isErr || got != "alpha echo: "+strings.Repeat("a", 700) {
		t.Fatalf("within the limit: %v %q", isErr, got)
	}
	isErr, got := call(strings.Repeat("a", 2000))
	if !isErr || !strings.Contains(got, `over the limit of MCP server "tight" (max_output_bytes 1024)`) || strings.Contains(got, "aaaa") {
		t.Fatalf("over the limit: %v %q", isErr, got)
	}
}
