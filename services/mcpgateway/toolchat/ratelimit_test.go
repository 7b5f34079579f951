package toolchat

import (
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/mcptest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// TestToolCallOverTheServerRateLimit: in the chat loop a call over its server's rate_limit is
// not made; the model reads a tool result with isError that says why and to retry later, and
// the chat goes on.
func TestToolCallOverTheServerRateLimit(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{})
	cfg := &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000), RateLimit: proto.String("1/h")}
	if err := reg.PutServer(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	model := &fakeModel{args: `{"text":"hi"}`}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	l := newLoop(inference, reg, up, nil)
	if d := chatWith(t, l, "mcp_every__echo"); d.GetToolCalls()[0].GetIsError() {
		t.Fatalf("first call: %v", d.GetToolCalls()[0])
	}
	d := chatWith(t, l, "mcp_every__echo")
	model.mu.Lock()
	msg := model.toolMsg
	model.mu.Unlock()
	if !d.GetToolCalls()[0].GetIsError() || !strings.Contains(msg, `The tool was not called: MCP server "every" is over its rate_limit of 1 tool calls per hour: retry after 3600 s. Call it again later`) {
		t.Fatalf("the model read %q; record %v", msg, d.GetToolCalls()[0])
	}
	if n := len(u.ToolCalls()); n != 1 {
		t.Fatalf("the server saw %d calls", n)
	}
}
