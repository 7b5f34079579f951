package zestctl

import (
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestPresetTools: presets add names tools in its mask when its JSON names them (so that
// "tools": [] clears them, and leaving them out keeps them), and show puts each in a line.
func TestPresetTools(t *testing.T) {
	for body, want := range map[string]bool{
		`{"id":"p","tools":[]}`:             true,
		`{"preset":{"id":"p","tools":[]}}`:  true,
		`{"id":"p","mcp_server_ids":["a"]}`: false,
		`{"preset":{"id":"p"}}`:             false,
		`not json`:                          false,
	} {
		if got := namesTools([]byte(body)); got != want {
			t.Errorf("namesTools(%s) = %v", body, got)
		}
	}
	for _, c := range []struct {
		t    *mcpgatewayv1.PresetTool
		want string
	}{
		{&mcpgatewayv1.PresetTool{Tool: "mcp_e__get-sum", Name: "add", Description: "d", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed: map[string]*structpb.Value{"a": structpb.NewNumberValue(1), "c": structpb.NewNullValue()}, Defaults: map[string]*structpb.Value{"b": structpb.NewNumberValue(2)}}},
			"add ← mcp_e__get-sum: new description; fixed a, c; defaults b"},
		{&mcpgatewayv1.PresetTool{Tool: "mcp_e__get-env", Hidden: true}, "mcp_e__get-env: hidden"},
		{&mcpgatewayv1.PresetTool{Tool: "mcp_e__echo"}, "mcp_e__echo"},
	} {
		if got := shapedTool(c.t); got != c.want {
			t.Errorf("shapedTool = %q, want %q", got, c.want)
		}
	}
}
