package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
)

func TestLimitToolResult(t *testing.T) {
	small := json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)
	if got := LimitToolResult("s", len(small), small); string(got) != string(small) {
		t.Fatalf("a result of exactly the limit changed: %s", got)
	}
	got := LimitToolResult("s", len(small)-1, small)
	var r struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"isError"`
	}
	if err := json.Unmarshal(got, &r); err != nil || !r.IsError || len(r.Content) != 1 || r.Content[0].Type != "text" ||
		r.Content[0].Text != `The tool's output was 41 bytes, over the limit of MCP server "s" (max_output_bytes 40); it was not passed on. `+
			`Ask the tool for less (a narrower query, a page of the results), or have an admin raise max_output_bytes in the server's config (up to 41943040) `+
			`or ZEST_TOOL_OUTPUT_MAX_BYTES for servers that set none.` {
		t.Fatalf("over the limit: %s %v", got, err)
	}
}

// TestOutputLimitDefault: a server without max_output_bytes is held to the manager's default
// (ZEST_TOOL_OUTPUT_MAX_BYTES), its own limit wins, and only tools/call results are checked.
func TestOutputLimitDefault(t *testing.T) {
	m := New(nil, nil, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "s"}
	if m.MaxOutputBytes(cfg) != serverconfig.DefaultMaxOutputBytes {
		t.Fatalf("default %d", m.MaxOutputBytes(cfg))
	}
	m.SetMaxOutputBytes(2048)
	if m.MaxOutputBytes(cfg) != 2048 || m.MaxOutputBytes(&mcpgatewayv1.ServerConfig{MaxOutputBytes: proto.Int32(4096)}) != 4096 {
		t.Fatal("the operator's default or the server's own limit is not used")
	}

	u := mcptest.Start(t, mcptest.Options{})
	http := &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(5000)}
	t.Cleanup(func() { m.Close(t.Context()) })
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]string{"text": strings.Repeat("a", 3000)}})
	raw, err := m.CallTool(t.Context(), http, "echo", params, 0)
	if err != nil || !strings.Contains(string(raw), `"isError":true`) || !strings.Contains(string(raw), "(max_output_bytes 2048)") {
		t.Fatalf("over the default: %s %v", raw, err)
	}
	if Outcome(raw, nil) != OutcomeIsError {
		t.Fatalf("outcome %s", Outcome(raw, nil))
	}
	big := json.RawMessage(`{"tools":[],"pad":"` + strings.Repeat("a", 4096) + `"}`)
	if got, err := m.limitOutput(http, "tools/list")(big, nil); err != nil || string(got) != string(big) {
		t.Fatalf("a tools/list answer was checked: %.80s %v", got, err)
	}
	if got, _ := m.limitOutput(http, "tools/call")(big, nil); string(got) == string(big) {
		t.Fatal("a tools/call result over the limit passed")
	}
}
