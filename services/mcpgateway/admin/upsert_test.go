package admin

import (
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// policy is a stdio server with every Zest field set to something other than its default.
func policy() *mcpgatewayv1.ServerConfig {
	return &mcpgatewayv1.ServerConfig{Id: "guarded", Name: "Guarded", Command: "node", Args: []string{"a.js"}, WorkingDir: "/srv",
		Env: map[string]string{"K": "${K}"}, Enabled: proto.Bool(false), TimeoutMs: proto.Int32(5000),
		ToolsAllow: []string{"echo", "get-*"}, ToolsDeny: []string{"get-env"}, Expose: proto.Bool(false), ToolHost: proto.String("th-1"),
		MaxOutputBytes: proto.Int32(4096), Sandbox: &mcpgatewayv1.Sandbox{Network: proto.String("none"), WritablePaths: []string{"/srv"}},
		RateLimit: proto.String("100/m"), MaxConcurrency: proto.Int32(3), Approval: proto.String("required"),
		ApprovalTools: []string{"rm"}, ApprovalBy: proto.String("client"), PinTools: proto.Bool(false)}
}

// zestFields are the fields of a config that are not Lemonade's, but those only a
// streamable-http server may set (policy is a stdio server; oauth is checked moved there).
func zestFields(t *testing.T) []protoreflect.FieldDescriptor {
	t.Helper()
	var out []protoreflect.FieldDescriptor
	fields := (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); !serverconfig.LemonadeField(fd) && !serverconfig.HTTPOnlyField(fd) {
			out = append(out, fd)
		}
	}
	return out
}

// TestLemonadeShapedUpsertKeepsZestFields: an upsert that carries Lemonade's fields only — what
// GUI3's Edit → Save sends — replaces them (one left out takes its default) and keeps every
// Zest field as stored; a Zest field the upsert carries is set, and cleared when named empty.
func TestLemonadeShapedUpsertKeepsZestFields(t *testing.T) {
	s := newService(t)
	ctx := t.Context()
	first, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: policy()})
	if err != nil {
		t.Fatal(err)
	}
	stored := first.GetServer().ProtoReflect()
	for _, fd := range zestFields(t) {
		if !stored.Has(fd) {
			t.Fatalf("policy() leaves %s at its default: set it, so that this test shows it kept", fd.Name())
		}
	}
	lemonade := &mcpgatewayv1.ServerConfig{Id: "guarded", Name: "Renamed", Transport: "stdio", TimeoutMs: proto.Int32(30000),
		Enabled: proto.Bool(true), Command: "node", Args: []string{"b.js"}, Env: map[string]string{}}
	r, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: lemonade})
	if err != nil {
		t.Fatal(err)
	}
	got := r.GetServer()
	for _, fd := range zestFields(t) {
		if !got.ProtoReflect().Get(fd).Equal(stored.Get(fd)) {
			t.Errorf("%s = %v after a Lemonade-shaped upsert, want %v kept", fd.Name(), got.ProtoReflect().Get(fd), stored.Get(fd))
		}
	}
	if got.GetName() != "Renamed" || got.GetEnabled() != true || got.GetTimeoutMs() != 30000 || got.GetArgs()[0] != "b.js" ||
		got.GetWorkingDir() != "" || len(got.GetEnv()) != 0 {
		t.Errorf("Lemonade's fields are not replaced: %v", got)
	}
	if g, _ := s.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "guarded"}); g.GetServer().GetConfig().GetRateLimit() != "100/m" || g.GetServer().GetConfig().GetExpose() {
		t.Errorf("the stored server: %v", g.GetServer().GetConfig())
	}

	// Carried, a Zest field is set; carried empty and named in the mask (or, with presence,
	// carried empty), it is cleared; the others stay.
	clear := &mcpgatewayv1.ServerConfig{Id: "guarded", Command: "node", RateLimit: proto.String(""), ApprovalTools: []string{"x*"}}
	r, err = s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: clear, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tools_deny"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetServer(); got.RateLimit != nil || got.GetToolsDeny() != nil || got.GetApprovalTools()[0] != "x*" ||
		got.GetMaxConcurrency() != 3 || got.GetExpose() || got.GetApproval() != "required" {
		t.Errorf("after clearing rate_limit and tools_deny, setting approval_tools: %v", got)
	}

	// Moved to streamable-http, the server drops the stdio-only Zest fields it kept.
	http := &mcpgatewayv1.ServerConfig{Id: "guarded", Transport: "streamable-http", Url: "https://h.example/mcp"}
	if r, err = s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: http}); err != nil {
		t.Fatal(err)
	}
	if got := r.GetServer(); got.ToolHost != nil || got.Sandbox != nil || got.GetExpose() || got.GetMaxConcurrency() != 3 {
		t.Errorf("moved to streamable-http: %v", got)
	}
	// There it takes an oauth block, which a Lemonade-shaped upsert keeps, as every Zest field.
	withOAuth := &mcpgatewayv1.ServerConfig{Id: "guarded", Transport: "streamable-http", Url: "https://h.example/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	if _, err = s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: withOAuth}); err != nil {
		t.Fatal(err)
	}
	if r, err = s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: http}); err != nil || r.GetServer().GetOauth().GetClientId() != "zest" {
		t.Errorf("a Lemonade-shaped upsert of a server signing in by OAuth: %v, %v; want oauth kept", r.GetServer(), err)
	}
	// Named, they are refused there as before.
	http.ToolHost = proto.String("th-1")
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: http}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("tool_host on a streamable-http server: %v", err)
	}

	// A new server gets the defaults; a mask path that names no field is refused.
	r, err = s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "fresh", Command: "node"}})
	if err != nil || !r.GetServer().GetEnabled() || !r.GetServer().GetExpose() || r.GetServer().GetTimeoutMs() != 30000 || r.GetServer().RateLimit != nil {
		t.Errorf("a new server: %v %v", r.GetServer(), err)
	}
	_, err = s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "fresh", Command: "node"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits"}}})
	if status.Code(err) != codes.InvalidArgument || !containsAll(err.Error(), `update_mask path "rate_limits" names no field`) {
		t.Errorf("a misspelt mask path: %v", err)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
