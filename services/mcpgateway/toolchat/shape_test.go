package toolchat

import (
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/mcptest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestPresetShapesTheChatTools: a chat with a preset offers its tools shaped — renamed, a
// hidden one left out, a fixed argument out of the parameters, a defaulted one marked — and a
// call of a shaped name runs the tool itself with the arguments merged; a fixed argument sent
// with another value is refused to the model, not run; the old name is not offered.
func TestPresetShapesTheChatTools(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum", "get-env"}})
	ctx := t.Context()
	if err := reg.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000)}); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutPreset(ctx, &mcpgatewayv1.Preset{Id: "p", McpServerIds: []string{"every"}, Tools: []*mcpgatewayv1.PresetTool{
		{Tool: "mcp_every__get-sum", Name: "sum", Description: "Sums.", Arguments: &mcpgatewayv1.PresetToolArguments{Fixed: map[string]*structpb.Value{"text": structpb.NewStringValue("fixed")}}},
		{Tool: "mcp_every__echo", Name: "say", Arguments: &mcpgatewayv1.PresetToolArguments{Defaults: map[string]*structpb.Value{"text": structpb.NewStringValue("dflt")}}},
		{Tool: "mcp_every__get-env", Hidden: true},
	}}); err != nil {
		t.Fatal(err)
	}
	model := &fakeModel{args: "{}"}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	l := newLoop(inference, reg, up, nil)

	d, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "p"}, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if got := model.firstOffer(); !slices.Equal(got, []string{"say", "sum"}) {
		t.Fatalf("offered %q", got)
	}
	if d.GetMessage().GetContent() != "The tool returned: get-sum:fixed" || len(d.GetToolCalls()) != 1 || d.GetToolCalls()[0].GetName() != "sum" {
		t.Fatalf("done %v", d)
	}
	defs := map[string]map[string]any{}
	for _, v := range model.firstTools() {
		fn := v.(map[string]any)["function"].(map[string]any)
		defs[fn["name"].(string)] = fn
	}
	sumProps, _ := defs["sum"]["parameters"].(map[string]any)["properties"].(map[string]any)
	sayText, _ := defs["say"]["parameters"].(map[string]any)["properties"].(map[string]any)["text"].(map[string]any)
	if defs["sum"]["description"] != "Sums." || sumProps["text"] != nil || sayText["default"] != "dflt" {
		t.Fatalf("offered definitions %v", defs)
	}

	if d, err = chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "p"}, "say"); err != nil || d.GetMessage().GetContent() != "The tool returned: http-echo:dflt" {
		t.Fatalf("say: %v %v", d, err)
	}
	model.mu.Lock()
	model.args = `{"text":"mine"}`
	model.mu.Unlock()
	d, err = chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "p"}, "sum")
	if err != nil || !d.GetToolCalls()[0].GetIsError() || !strings.Contains(d.GetMessage().GetContent(), `The tool was not called: argument "text" of tool "sum" is set by this preset: leave it out of the call`) {
		t.Fatalf("a fixed argument sent: %v %v", d, err)
	}
	if _, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "p"}, "mcp_every__get-sum"); refusedField(err) != "tool_choice" {
		t.Fatalf("the old name: %v", err)
	}
	if got := strings.Join(u.ToolCalls(), ","); got != "get-sum,echo" {
		t.Fatalf("the server ran %q, want get-sum,echo", got)
	}
}
