package admin

import (
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestCallToolServerLimits: rate_limit and max_concurrency are checked with the field named
// (BadRequest), stored as written canonically, shown in the state, and a tools/call over the
// rate is ResourceExhausted with RetryInfo (the edge answers 429 with Retry-After).
func TestCallToolServerLimits(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	s := newService(t)
	ctx := t.Context()
	server := func(rate string, conc int32) *mcpgatewayv1.ServerConfig {
		return &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "http", Url: u.URL,
			RateLimit: proto.String(rate), MaxConcurrency: proto.Int32(conc)}
	}
	for _, c := range []struct {
		in    *mcpgatewayv1.ServerConfig
		field string
	}{
		{server("20", 0), "rate_limit"},
		{server("20/day", 0), "rate_limit"},
		{server("0/s", 0), "rate_limit"},
		{server("", -1), "max_concurrency"},
		{server("", 1025), "max_concurrency"},
	} {
		_, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: c.in})
		st := status.Convert(err)
		var field string
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok {
				field = br.GetFieldViolations()[0].GetField()
			}
		}
		if st.Code() != codes.InvalidArgument || field != c.field || !strings.Contains(st.Message(), "use") && !strings.Contains(st.Message(), "write") {
			t.Errorf("%s %q / %d: %v (field %q)", c.field, c.in.GetRateLimit(), c.in.GetMaxConcurrency(), err, field)
		}
	}
	// "" and 0, as a state sent back shows them: no limit.
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: server("", 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: server("1/h:1", 4)}); err != nil {
		t.Fatal(err)
	}
	st, err := s.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "echo"})
	if err != nil || st.GetServer().GetConfig().GetRateLimit() != "1/h" || st.GetServer().GetConfig().GetMaxConcurrency() != 4 {
		t.Fatalf("state %v %v", st, err)
	}
	call := func() error {
		_, err := s.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "echo", Name: "echo"})
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	err = call()
	stat := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range stat.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if stat.Code() != codes.ResourceExhausted || retry == nil || retry.GetRetryDelay().AsDuration().Seconds() < 3599 ||
		!strings.Contains(stat.Message(), `MCP server "echo" is over its rate_limit of 1 tool calls per hour`) {
		t.Fatalf("over the rate: %v (retry %v)", err, retry)
	}
	// Raising the limit applies at once, without reconnecting.
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: server("100/s", 0)}); err != nil {
		t.Fatal(err)
	}
	inits := u.Initializes()
	if err := call(); err != nil {
		t.Fatalf("after raising the limit: %v", err)
	}
	if u.Initializes() != inits {
		t.Fatal("a change of the limits reconnected the server")
	}
}
