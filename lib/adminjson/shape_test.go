package adminjson

import (
	"encoding/json"
	"slices"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// shaped is m as the admin answers write it, decoded.
func shaped(t *testing.T, m proto.Message, protoNames bool) map[string]any {
	t.Helper()
	b, err := protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: protoNames}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = Shape(m.ProtoReflect().Descriptor(), b); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}

// TestShapeFlattensStates: a state is one object with its config's fields among its own (no
// "config"), every field of the config present, an unset one as its zero value; a config
// alone has every field too; in a list, wrapped, with JSON or proto names.
func TestShapeFlattensStates(t *testing.T) {
	cfg := &mcpgatewayv1.ServerConfig{Id: "a", Transport: "stdio", Command: "node", Enabled: proto.Bool(false), Expose: proto.Bool(false),
		TimeoutMs: proto.Int32(5000), RateLimit: proto.String("5/s"), Sandbox: &mcpgatewayv1.Sandbox{MemoryBytes: proto.Int64(1 << 40)}}
	st := &mcpgatewayv1.ServerState{Config: cfg, Status: "disabled", Placement: "th-1", TestOnly: proto.Bool(true)}
	configFields := cfg.ProtoReflect().Descriptor().Fields()
	check := func(t *testing.T, got map[string]any) {
		t.Helper()
		if _, ok := got["config"]; ok {
			t.Fatalf("the state has a config member: %v", got)
		}
		for i := range configFields.Len() {
			if _, ok := got[configFields.Get(i).JSONName()]; !ok {
				t.Errorf("%s is missing: %v", configFields.Get(i).JSONName(), got)
			}
		}
		for k, want := range map[string]any{"id": "a", "enabled": false, "expose": false, "timeout_ms": 5000.0, "rate_limit": "5/s",
			"max_concurrency": 0.0, "max_output_bytes": 0.0, "tool_host": "", "approval": "", "url": "", "args": []any{}} {
			if g, _ := json.Marshal(got[k]); string(g) != func() string { w, _ := json.Marshal(want); return string(w) }() {
				t.Errorf("%s = %s, want %v", k, g, want)
			}
		}
		if sb, _ := got["sandbox"].(map[string]any); sb["memory_bytes"] != "1099511627776" {
			t.Errorf("sandbox = %v", got["sandbox"])
		}
	}
	for _, protoNames := range []bool{false, true} {
		got := shaped(t, &mcpgatewayv1.GetServerResponse{Server: st}, protoNames)["server"].(map[string]any)
		check(t, got)
		if got["status"] != "disabled" || got["placement"] != "th-1" || got["test_only"] != true || got["connected"] != false {
			t.Errorf("the state's own fields: %v", got)
		}
		list := shaped(t, &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{st, {}}}, protoNames)["servers"].([]any)
		check(t, list[0].(map[string]any))
		if empty := list[1].(map[string]any); empty["id"] != "" || empty["enabled"] != false || empty["sandbox"] != nil {
			t.Errorf("a state without a config: %v", empty)
		}
		check(t, shaped(t, &mcpgatewayv1.UpsertServerResponse{Server: cfg}, protoNames)["server"].(map[string]any))
	}
	// A message without states or configs is left as protojson wrote it.
	b := []byte(`{"tools": [ ]}`)
	if got, err := Shape((&mcpgatewayv1.ListToolsResponse{}).ProtoReflect().Descriptor(), b); err != nil || string(got) != string(b) {
		t.Errorf("a tool list was changed: %s %v", got, err)
	}
}

// TestStateFieldsDoNotShadowConfigFields: flattened, a state field named like a config field
// would hide one of them; and every config field's JSON name is its proto name, which the
// flat JSON, adminjson and the console use alike.
func TestStateFieldsDoNotShadowConfigFields(t *testing.T) {
	cfg := (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().Fields()
	sandbox := (&mcpgatewayv1.Sandbox{}).ProtoReflect().Descriptor().Fields()
	state := (&mcpgatewayv1.ServerState{}).ProtoReflect().Descriptor().Fields()
	var names []string
	for _, fields := range []protoreflect.FieldDescriptors{cfg, sandbox} {
		for i := range fields.Len() {
			if fd := fields.Get(i); fd.JSONName() != string(fd.Name()) {
				t.Errorf("%s has the JSON name %q: give it json_name = %q", fd.FullName(), fd.JSONName(), fd.Name())
			}
		}
	}
	for i := range cfg.Len() {
		names = append(names, cfg.Get(i).JSONName())
	}
	for i := range state.Len() {
		if fd := state.Get(i); !Inlined(fd) && (slices.Contains(names, fd.JSONName()) || slices.Contains(names, string(fd.Name()))) {
			t.Errorf("ServerState.%s shares its name with a ServerConfig field: the flat state would hold two", fd.Name())
		}
	}
}
