package toolchat

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/mcptest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestToolSearchChat: a chat of a preset with tool_search offers the model search_tools and
// call_tool only; search_tools answers the chat's tools (not one a filter hides), call_tool
// runs the named tool through the pipeline and the chat records that tool's call. The preset
// names a server before the built-in provider, whose tools the loop gathers while the server's
// are read (the race detector held the two against each other).
func TestToolSearchChat(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum", "get-env"}})
	ctx := t.Context()
	if err := reg.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true),
		Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000), ToolsDeny: []string{"get-env"}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutPreset(ctx, &mcpgatewayv1.Preset{Id: "finder", McpServerIds: []string{"every", "lemonade"}, ToolSearch: true}); err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("builtin", "1")
	srv.AddTool(mcp.NewTool("lemonade_list_models", mcp.WithDescription("List the models the inference server can run.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("builtin-llm"), nil
	})
	var builtins []json.RawMessage
	for _, st := range srv.ListTools() {
		raw, err := json.Marshal(st.Tool)
		if err != nil {
			t.Fatal(err)
		}
		builtins = append(builtins, raw)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pipeline := toolcall.New(toolcall.Config{}, reg, up, keyauth.Keys{}, toolcall.WithBuiltin(mcpserve.NewBuiltin(srv)), toolcall.WithLogger(log))
	model := &fakeModel{}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	l := New(Config{}, inference, reg, up, srv, pipeline, keyauth.Keys{}, log,
		WithToolSearch(toolsearch.NewShared(catalog.New(reg, up, log), toolsearch.OwnNames("lemonade", builtins))))
	chat := func(fn, args string) *mcpgatewayv1.ChatDone {
		t.Helper()
		model.mu.Lock()
		model.args = args
		model.mu.Unlock()
		d, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "finder"}, fn)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	d := chat("search_tools", `{"query":"answer get sum"}`)
	if got := model.firstOffer(); !slices.Equal(got, []string{"call_tool", "search_tools"}) {
		t.Fatalf("offered %q, want the two meta-tools", got)
	}
	if text := d.GetMessage().GetContent(); !strings.Contains(text, catalog.ChatName("every", "get-sum")) || strings.Contains(text, "get-env") {
		t.Fatalf("search_tools answered %q", text)
	}
	if d := chat("search_tools", `{"query":"which models can run"}`); !strings.Contains(d.GetMessage().GetContent(), "lemonade_list_models") {
		t.Fatalf("search_tools for a built-in tool answered %q", d.GetMessage().GetContent())
	}
	d = chat("call_tool", `{"name":"mcp_every__get-sum","arguments":{"text":"found"}}`)
	calls := d.GetToolCalls()
	if d.GetMessage().GetContent() != "The tool returned: get-sum:found" || len(calls) != 1 || calls[0].GetName() != "mcp_every__get-sum" || calls[0].GetServerId() != "every" {
		t.Fatalf("call_tool: %v", d)
	}
	if d := chat("call_tool", `{"name":"mcp_every__get-env"}`); len(d.GetToolCalls()) != 1 || !d.GetToolCalls()[0].GetIsError() ||
		!strings.Contains(model.lastToolMsg(), "Unknown tool mcp_every__get-env") {
		t.Fatalf("call_tool of a filtered tool: %v (the model read %q)", d, model.lastToolMsg())
	}
}

// TestShapedToolSearchChat: a chat of a preset with tool_search and shaping answers
// search_tools with its tools shaped — the hidden one never found, the renamed one by its new
// name and description, its fixed argument out of the schema — and call_tool of the new name
// runs the tool itself with the fixed argument; the hidden tool and the old name are unknown.
func TestShapedToolSearchChat(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum", "get-env"}})
	ctx := t.Context()
	if err := reg.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true),
		Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000)}); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutPreset(ctx, &mcpgatewayv1.Preset{Id: "finder", McpServerIds: []string{"every"}, ToolSearch: true, Tools: []*mcpgatewayv1.PresetTool{
		{Tool: "mcp_every__get-sum", Name: "sum", Description: "Sums two numbers.", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed: map[string]*structpb.Value{"text": structpb.NewStringValue("fixed")}}},
		{Tool: "mcp_every__get-env", Hidden: true},
	}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	model := &fakeModel{}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	l := newLoop(inference, reg, up, nil)
	WithToolSearch(toolsearch.NewShared(catalog.New(reg, up, log), nil))(l)
	chat := func(fn, args string) *mcpgatewayv1.ChatDone {
		t.Helper()
		model.mu.Lock()
		model.args = args
		model.mu.Unlock()
		d, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "finder"}, fn)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	text := chat("search_tools", `{"query":"get the sum or the env","limit":10}`).GetMessage().GetContent()
	if !strings.Contains(text, `"name":"sum"`) || !strings.Contains(text, "Sums two numbers.") || strings.Contains(text, "get-env") || strings.Contains(text, "mcp_every__get-sum") {
		t.Fatalf("search_tools answered %q, want sum (get-sum renamed) only", text)
	}
	if strings.Contains(text, `"text"`) {
		t.Fatalf("search_tools answered sum's fixed argument in its schema: %q", text)
	}
	d := chat("call_tool", `{"name":"sum"}`)
	if calls := d.GetToolCalls(); d.GetMessage().GetContent() != "The tool returned: get-sum:fixed" || len(calls) != 1 || calls[0].GetName() != "sum" || calls[0].GetServerId() != "every" {
		t.Fatalf("call_tool sum: %v", d)
	}
	for _, name := range []string{"mcp_every__get-env", "mcp_every__get-sum"} {
		if d := chat("call_tool", `{"name":"`+name+`"}`); len(d.GetToolCalls()) != 1 || !d.GetToolCalls()[0].GetIsError() ||
			!strings.Contains(model.lastToolMsg(), "Unknown tool "+name) {
			t.Fatalf("call_tool %s: %v (the model read %q)", name, d, model.lastToolMsg())
		}
	}
	if got := strings.Join(u.ToolCalls(), ","); got != "get-sum" {
		t.Fatalf("the server ran %q, want get-sum once", got)
	}
}

// lastToolMsg is the last tool message the model was sent.
func (m *fakeModel) lastToolMsg() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.toolMsg
}
