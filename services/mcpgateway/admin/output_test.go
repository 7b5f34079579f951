package admin

import (
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestCallToolOutputLimit: a result over the server's max_output_bytes comes back as a
// valid CallToolResult with isError true naming its size and the limit; one within it whole.
// The field is stored, shown in the state, and refused out of range with the field named.
func TestCallToolOutputLimit(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	s := newService(t)
	ctx := t.Context()
	for _, n := range []int32{1023, 40<<20 + 1, -5} {
		in := &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "http", Url: u.URL, MaxOutputBytes: proto.Int32(n)}
		_, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "max_output_bytes") || !strings.Contains(err.Error(), "from 1024 (1 KiB) to 41943040") {
			t.Errorf("max_output_bytes %d: %v", n, err)
		}
	}
	in := &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "http", Url: u.URL, MaxOutputBytes: proto.Int32(1024)}
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "echo"}); err != nil || st.GetServer().GetConfig().GetMaxOutputBytes() != 1024 {
		t.Fatalf("state %v %v", st, err)
	}
	call := func(text string) *structpb.Struct {
		args, _ := structpb.NewStruct(map[string]any{"text": text})
		r, err := s.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "echo", Name: "echo", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetResult()
	}
	if r := call(strings.Repeat("a", 900)); r.GetFields()["isError"].GetBoolValue() || !strings.HasSuffix(text(r), strings.Repeat("a", 900)) {
		t.Fatalf("within the limit: %v", r)
	}
	r := call(strings.Repeat("a", 2000))
	if !r.GetFields()["isError"].GetBoolValue() || !strings.Contains(text(r), `over the limit of MCP server "echo" (max_output_bytes 1024)`) ||
		!strings.Contains(text(r), "raise max_output_bytes") {
		t.Fatalf("over the limit: %v", r)
	}
}

// text is the text of a CallToolResult's first content item.
func text(r *structpb.Struct) string {
	c := r.GetFields()["content"].GetListValue().GetValues()
	if len(c) == 0 {
		return ""
	}
	return c[0].GetStructValue().GetFields()["text"].GetStringValue()
}
