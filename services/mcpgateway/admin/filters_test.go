package admin

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

func names(entries []*mcpgatewayv1.ToolEntry) string {
	var out []string
	for _, e := range entries {
		out = append(out, e.GetName())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// The tool filters apply on every path that shows or runs a tool: the tool list, the
// server's state (ConnectServer, GetServer, ListServers), TestServer and CallTool; a filter
// change applies at once, without a new connection.
func TestToolFilters(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{Tools: []string{"get-sum", "get-env", "print-env"}})
	s := newService(t)
	ctx := t.Context()
	upsert := func(allow, deny []string) {
		t.Helper()
		in := &mcpgatewayv1.ServerConfig{Id: "every", Transport: "http", Url: u.URL, ToolsAllow: allow, ToolsDeny: deny}
		// Named in the mask, an empty list clears the stored one.
		mask := &fieldmaskpb.FieldMask{Paths: []string{"tools_allow", "tools_deny"}}
		r, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in, UpdateMask: mask})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.GetServer().GetToolsAllow(), allow) || !slices.Equal(r.GetServer().GetToolsDeny(), deny) {
			t.Fatalf("stored %v", r.GetServer())
		}
	}
	// shown checks every path that lists the server's tools.
	shown := func(want string) {
		t.Helper()
		lt, err := s.ListTools(ctx, &mcpgatewayv1.ListToolsRequest{})
		if err != nil || names(lt.GetTools()) != want {
			t.Fatalf("ListTools: %q %v, want %q", names(lt.GetTools()), err, want)
		}
		gs, err := s.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "every"})
		if err != nil || names(gs.GetServer().GetTools()) != want {
			t.Fatalf("GetServer: %q %v, want %q", names(gs.GetServer().GetTools()), err, want)
		}
		ls, err := s.ListServers(ctx, &mcpgatewayv1.ListServersRequest{})
		if err != nil || names(ls.GetServers()[0].GetTools()) != want {
			t.Fatalf("ListServers: %v %v, want %q", ls, err, want)
		}
	}
	call := func(tool string) error {
		_, err := s.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "every", Name: tool})
		return err
	}
	refused := func(tool, field, pattern, msg string) {
		t.Helper()
		err := call(tool)
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), msg) {
			t.Fatalf("CallTool(%s) = %v, want FailedPrecondition with %q", tool, err, msg)
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			info, _ = d.(*errdetails.ErrorInfo)
		}
		want := map[string]string{"server_id": "every", "tool": tool, "field": field, "pattern": pattern}
		if info.GetReason() != "ADMIN_ERROR_REASON_TOOL_FILTERED" || info.GetDomain() != "zest.mcpgateway.v1" || !maps.Equal(info.GetMetadata(), want) {
			t.Fatalf("ErrorInfo %v, want the TOOL_FILTERED reason and %v", info, want)
		}
	}

	upsert([]string{"echo", "get-*"}, nil)
	c, err := s.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "every"})
	if err != nil || names(c.GetServer().GetTools()) != "echo,get-env,get-sum" || !slices.Equal(c.GetServer().GetConfig().GetToolsAllow(), []string{"echo", "get-*"}) {
		t.Fatalf("ConnectServer: %v %v", c, err)
	}
	shown("echo,get-env,get-sum")
	refused("print-env", "tools_allow", "", `tool "print-env" of server "every" is filtered out: it matches no tools_allow pattern ("echo", "get-*")`)
	refused("Echo", "tools_allow", "", "matches no tools_allow pattern") // case-sensitive
	if err := call("get-env"); err != nil {
		t.Fatal(err)
	}

	upsert([]string{"echo", "get-*"}, []string{"get-env"})
	shown("echo,get-sum")
	refused("get-env", "tools_deny", "get-env", `it matches tools_deny pattern "get-env"`)
	if err := call("get-sum"); err != nil {
		t.Fatal(err)
	}

	upsert(nil, nil)
	shown("echo,get-env,get-sum,print-env")
	if err := call("print-env"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(u.ToolCalls(), ","); got != "get-env,get-sum,print-env" {
		t.Fatalf("the server ran %q: a refused call reached it", got)
	}
	if n := u.Initializes(); n != 1 {
		t.Fatalf("%d initializes: a filter change reconnected", n)
	}

	// A change of more than the filters reconnects on next use, as any config change does.
	in := &mcpgatewayv1.ServerConfig{Id: "every", Transport: "http", Url: u.URL, TimeoutMs: proto.Int32(5000), ToolsDeny: []string{"echo"}}
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in}); err != nil {
		t.Fatal(err)
	}
	if s.up.State("every").Connected {
		t.Fatal("a changed timeout_ms kept the connection")
	}
	refused("echo", "tools_deny", "echo", `tools_deny pattern "echo"`)

	ts, err := s.TestServer(ctx, &mcpgatewayv1.TestServerRequest{Server: &mcpgatewayv1.ServerConfig{
		Transport: "http", Url: u.URL, ToolsDeny: []string{"*-env"}}})
	if err != nil || names(ts.GetServer().GetTools()) != "echo,get-sum" || !slices.Equal(ts.GetServer().GetConfig().GetToolsDeny(), []string{"*-env"}) {
		t.Fatalf("TestServer: %v %v", ts, err)
	}
	noViolations(t, u)
}

func noViolations(t *testing.T, u *mcptest.Upstream) {
	t.Helper()
	if v := u.Violations(); len(v) > 0 {
		t.Fatalf("the client broke the server's rules: %v", v)
	}
}

// A bad pattern is refused with InvalidArgument (the edge answers 400) naming the field.
func TestUpsertRefusesABadPattern(t *testing.T) {
	s := newService(t)
	_, err := s.UpsertServer(t.Context(), &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{
		Id: "e", Command: "node", ToolsDeny: []string{"echo", "[a"}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `tools_deny[1] "[a" is not a valid glob pattern`) {
		t.Fatalf("err = %v", err)
	}
}
