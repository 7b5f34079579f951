package admin

import (
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

func update(t *testing.T, s *Service, in *mcpgatewayv1.ServerConfig, paths ...string) (*mcpgatewayv1.ServerConfig, error) {
	t.Helper()
	var mask *fieldmaskpb.FieldMask
	if paths != nil {
		mask = &fieldmaskpb.FieldMask{Paths: paths}
	}
	r, err := s.UpdateServer(t.Context(), &mcpgatewayv1.UpdateServerRequest{Server: in, UpdateMask: mask})
	return r.GetServer(), err
}

// sameBut reports the fields of got that differ from want, but for those named.
func sameBut(got, want *mcpgatewayv1.ServerConfig, named ...protoreflect.Name) []protoreflect.Name {
	var out []protoreflect.Name
	fields := want.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		skip := false
		for _, n := range named {
			skip = skip || n == fd.Name()
		}
		if !skip && (got.ProtoReflect().Has(fd) != want.ProtoReflect().Has(fd) || !got.ProtoReflect().Get(fd).Equal(want.ProtoReflect().Get(fd))) {
			out = append(out, fd.Name())
		}
	}
	return out
}

// TestUpdateServerChangesWhatItNames: UpdateServer sets the fields its mask names (cleared to
// their defaults when the request leaves them unset), one field of the sandbox when the path
// names it, and keeps every other field, Lemonade's and Zest's alike.
func TestUpdateServerChangesWhatItNames(t *testing.T) {
	s := newService(t)
	ctx := t.Context()
	r, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: policy()})
	if err != nil {
		t.Fatal(err)
	}
	stored := r.GetServer()

	got, err := update(t, s, &mcpgatewayv1.ServerConfig{Id: "guarded", Name: "Renamed", Expose: proto.Bool(true)}, "name", "expose", "rate_limit", "enabled")
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameBut(got, stored, "name", "expose", "rate_limit", "enabled"); len(diff) > 0 {
		t.Errorf("fields the mask does not name changed: %v", diff)
	}
	if got.GetName() != "Renamed" || !got.GetExpose() || got.RateLimit != nil || !got.GetEnabled() {
		t.Errorf("named: name %q, expose %v, rate_limit %v (cleared), enabled %v (its default, true)", got.GetName(), got.GetExpose(), got.RateLimit, got.GetEnabled())
	}
	stored = got

	// One field of the sandbox, the rest of it kept.
	got, err = update(t, s, &mcpgatewayv1.ServerConfig{Id: "guarded", Sandbox: &mcpgatewayv1.Sandbox{Network: proto.String("host")}}, "sandbox.network")
	if err != nil {
		t.Fatal(err)
	}
	if sb := got.GetSandbox(); sb.GetNetwork() != "host" || sb.GetWritablePaths()[0] != "/srv" || !sb.GetEnabled() || len(sameBut(got, stored, "sandbox")) > 0 {
		t.Errorf("sandbox.network: %v", got)
	}

	// No mask: the fields the request populates (AIP-134).
	if got, err = update(t, s, &mcpgatewayv1.ServerConfig{Id: "guarded", MaxConcurrency: proto.Int32(9)}); err != nil || got.GetMaxConcurrency() != 9 || got.GetName() != "Renamed" {
		t.Errorf("no mask: %v %v", got, err)
	}

	// Checked as an upsert: a bad value, a stdio field left on a move to streamable-http.
	for _, c := range []struct {
		in    *mcpgatewayv1.ServerConfig
		paths []string
		code  codes.Code
		msg   string
	}{
		{&mcpgatewayv1.ServerConfig{Id: "guarded", TimeoutMs: proto.Int32(10)}, []string{"timeout_ms"}, codes.InvalidArgument, "timeout_ms 10 is out of range"},
		{&mcpgatewayv1.ServerConfig{Id: "guarded", Transport: "http", Url: "https://h/mcp"}, []string{"transport", "url"}, codes.InvalidArgument, "command is a stdio field"},
		{&mcpgatewayv1.ServerConfig{Id: "guarded"}, []string{"rate_limits"}, codes.InvalidArgument, `update_mask path "rate_limits" names no field`},
		{&mcpgatewayv1.ServerConfig{Id: "guarded"}, []string{"tools_deny.x"}, codes.InvalidArgument, `update_mask path "tools_deny.x" names no field`},
		{&mcpgatewayv1.ServerConfig{Id: "guarded"}, []string{"*", "name"}, codes.InvalidArgument, `update_mask "*" replaces the whole config: send it alone`},
		{&mcpgatewayv1.ServerConfig{Id: "nope"}, []string{"name"}, codes.NotFound, "nope"},
		{&mcpgatewayv1.ServerConfig{}, []string{"name"}, codes.InvalidArgument, "server.id is required"},
	} {
		if _, err := update(t, s, c.in, c.paths...); status.Code(err) != c.code || !containsAll(err.Error(), c.msg) {
			t.Errorf("%v %v: %v, want %v %q", c.in, c.paths, err, c.code, c.msg)
		}
	}
	// The move with the stdio fields cleared; "*" replaces the whole config.
	got, err = update(t, s, &mcpgatewayv1.ServerConfig{Id: "guarded", Transport: "http", Url: "https://h/mcp"},
		"transport", "url", "command", "args", "working_dir", "env", "tool_host", "sandbox")
	if err != nil || got.GetTransport() != "streamable-http" || got.GetCommand() != "" || got.GetApproval() != "required" {
		t.Errorf("moved to streamable-http: %v %v", got, err)
	}
	got, err = update(t, s, &mcpgatewayv1.ServerConfig{Id: "guarded", Command: "node"}, "*")
	if err != nil || got.GetApproval() != "" || got.GetExpose() != true || got.GetTransport() != "stdio" || got.GetName() != "guarded" {
		t.Errorf(`"*": %v %v`, got, err)
	}
}

// TestUpdateKeepsAServerStoredDisabled: a server stored without an enabled field (as a build
// before presence stored a disabled one) stays disabled when an update names other fields.
func TestUpdateKeepsAServerStoredDisabled(t *testing.T) {
	s := newService(t)
	old := &mcpgatewayv1.ServerConfig{Id: "off", Name: "off", Transport: "stdio", Command: "node", TimeoutMs: proto.Int32(30000), Expose: proto.Bool(true)}
	if err := s.reg.PutServer(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	got, err := update(t, s, &mcpgatewayv1.ServerConfig{Id: "off", Name: "Off"}, "name")
	if err != nil || got.GetEnabled() || got.GetName() != "Off" {
		t.Fatalf("updated: %v %v, want it still disabled", got, err)
	}
}
