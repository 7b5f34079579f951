package edge

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// mustStruct is the Struct of a JSON object.
func mustStruct(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return s
}

// compact is b without insignificant whitespace (protojson adds some at random).
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return out.String()
}

// viaProtojson is the admin marshaler's answer for m as grpc-gateway's JSONPb writes it, in
// the admin answers' shape (adminjson.Shape).
func viaProtojson(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := newAdminMarshaler().JSONPb.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = adminjson.Shape(m.ProtoReflect().Descriptor(), b); err != nil {
		t.Fatal(err)
	}
	return compact(t, b)
}

// lazy is m as lazyAdminClient hands it to the marshaler: encoded, in the unknown fields.
func lazy(t *testing.T, m proto.Message) *mcpgatewayv1.ListToolsResponse {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := &mcpgatewayv1.ListToolsResponse{}
	out.ProtoReflect().SetUnknown(b)
	return out
}

// The JSON written from the encoding is protojson's, byte for byte once protojson's random
// whitespace is taken out: field order and names, unset fields, Struct key order, escapes,
// numbers, nesting, Unicode.
func TestToolsJSONIsProtojsons(t *testing.T) {
	schema := `{"type":"object","required":["a","b"],"additionalProperties":false,"properties":{
		"z":{"type":"string","enum":["x","y",""],"default":null},
		"a":{"type":"integer","minimum":-1,"maximum":1e21,"multipleOf":0.000001,"examples":[0,-0.5,123456789,1e-7,3.14159]},
		"nested":{"type":"object","properties":{"deep":{"type":"array","items":{"type":"object","properties":{}}}}},
		"esc":{"description":"quote \" backslash \\ newline \n tab \t cr \r bell \u0007 nul \u0000 unit \u001f ff \f bs \b del \u007f <html> & \u2028 \u2029 é 漢 😀"},
		"":{"type":"boolean","const":true},
		"empty":{},"list":[],"bools":[true,false,null]}}`
	entry := func(name string) *mcpgatewayv1.ToolEntry {
		return &mcpgatewayv1.ToolEntry{ServerId: "srv", ServerName: "Srv \"one\"", Name: name, ChatName: "mcp_srv__" + name,
			Title: "", Description: "dé\nscription", InputSchema: mustStruct(t, schema),
			Tool:       mustStruct(t, `{"name":"`+name+`","inputSchema":`+schema+`}`),
			OpenaiTool: mustStruct(t, `{"type":"function","function":{"name":"mcp_srv__`+name+`","parameters":`+schema+`}}`)}
	}
	cases := []struct {
		name string
		m    *mcpgatewayv1.ListToolsResponse
	}{
		{"no tools", &mcpgatewayv1.ListToolsResponse{}},
		{"one entry, every field", &mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{entry("a")}}},
		{"entries with unset fields", &mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{
			{}, {Name: "only-name"}, {InputSchema: &structpb.Struct{}}, entry("b")}}},
		{"many entries", &mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{entry("a"), entry("b"), entry("c"), entry("d")}}},
	}
	m := newAdminMarshaler()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := viaProtojson(t, c.m)
			got, err := m.Marshal(lazy(t, c.m))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("from the encoding:\n%s\nprotojson:\n%s", got, want)
			}
			b, _ := proto.Marshal(c.m)
			if _, ok := appendJSON(nil, c.m.ProtoReflect().Descriptor(), b); !ok {
				t.Fatal("appendJSON declined an encoding the catalog sends")
			}
		})
	}
}

// A ListServers answer (every server's state with its tools) is written from its encoding as
// protojson writes it too, in the admin answers' shape (each state one flat object, every
// field of its config): maps with sorted keys, int32, int64, repeated strings, optional fields
// set and unset, a state without a config; a state with a process start time (a Timestamp,
// which appendJSON leaves to protojson) is decoded and given to protojson.
func TestServersJSONIsProtojsons(t *testing.T) {
	info := mustStruct(t, `{"name":"srv","version":"1.0"}`)
	tool := &mcpgatewayv1.ToolEntry{ServerId: "a", Name: "t", ChatName: "mcp_a__t", InputSchema: mustStruct(t, `{"type":"object"}`)}
	full := &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "a", Name: "A \"quoted\"", Transport: "stdio", Command: "node", Args: []string{"x", "", "é\n"},
		WorkingDir: "/tmp", Env: map[string]string{"Z": "${Z}", "A": "${A}", "": "\u0001", "m": "é"}, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(-5),
		ToolsAllow: []string{"a*"}, ToolsDeny: []string{}, Expose: proto.Bool(false), RateLimit: proto.String("5/s"), MaxConcurrency: proto.Int32(0),
		Sandbox: &mcpgatewayv1.Sandbox{Enabled: proto.Bool(true), MemoryBytes: proto.Int64(1 << 40), WritablePaths: []string{"/w"}}},
		Status: "connected", Connected: true, ProtocolVersion: "2025-06-18", ServerInfo: info, Capabilities: &structpb.Struct{},
		Tools: []*mcpgatewayv1.ToolEntry{tool, tool}, TestOnly: proto.Bool(false), Placement: "th-1"}
	id := func(id string) *mcpgatewayv1.ServerConfig { return &mcpgatewayv1.ServerConfig{Id: id} }
	cases := []struct {
		name     string
		m        *mcpgatewayv1.ListServersResponse
		declined bool
	}{
		{"no servers", &mcpgatewayv1.ListServersResponse{}, false},
		{"states", &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{full, {Config: &mcpgatewayv1.ServerConfig{Id: "b", TimeoutMs: proto.Int32(2147483647)}}, {}}}, false},
		{"test_only true", &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{{Config: id("c"), TestOnly: proto.Bool(true)}}}, false},
		{"a process without a start time", &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{
			{Config: id("d"), Process: &mcpgatewayv1.ProcessState{State: "ready", Pid: 42, RestartCount: 1, StderrTail: "a\tb"}}}}, false},
		{"a process with a start time", &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{
			{Config: id("e"), Process: &mcpgatewayv1.ProcessState{State: "ready", StartTime: timestamppb.New(time.Unix(1700000000, 5))}}}}, true},
	}
	m := newAdminMarshaler()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := proto.Marshal(c.m)
			if _, ok := appendJSON(nil, c.m.ProtoReflect().Descriptor(), b); ok == c.declined {
				t.Fatalf("appendJSON ok = %v, want %v", ok, !c.declined)
			}
			lz := &mcpgatewayv1.ListServersResponse{}
			lz.ProtoReflect().SetUnknown(b)
			got, err := m.Marshal(lz)
			if err != nil {
				t.Fatal(err)
			}
			if want := viaProtojson(t, c.m); compact(t, got) != want {
				t.Fatalf("from the encoding:\n%s\nprotojson:\n%s", got, want)
			}
		})
	}
}

// An encoding appendJSON does not handle is decoded and written by protojson: the answer is
// the same (or protojson's error), only slower.
func TestToolsJSONDeclinesToProtojson(t *testing.T) {
	good, _ := proto.Marshal(&mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{{Name: "a", InputSchema: mustStruct(t, `{"k":1}`)}}})
	nanValue, _ := proto.Marshal(&mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{{Name: "a",
		InputSchema: &structpb.Struct{Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(math.NaN())}}}}})
	emptyValue, _ := proto.Marshal(&mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{{Name: "a",
		InputSchema: &structpb.Struct{Fields: map[string]*structpb.Value{"n": {}}}}}})
	// The same entry's name twice (proto: the last wins).
	twice := protowire.AppendTag(nil, 1, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendString(protowire.AppendTag(protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "first"), 3, protowire.BytesType), "second"))
	// A field this edge does not know (a newer mcpgateway): left out, as protojson does.
	unknown := protowire.AppendString(protowire.AppendTag(append([]byte(nil), good...), 99, protowire.BytesType), "future")
	invalidUTF8, _ := proto.Marshal(&mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{{Name: "ok"}}})
	invalidUTF8 = bytes.Replace(invalidUTF8, []byte("ok"), []byte{0xff, 0xfe}, 1)
	cases := []struct {
		name     string
		b        []byte
		declined bool
		wantErr  bool
	}{
		{"a NaN number", nanValue, true, true},
		{"a Value of no kind", emptyValue, true, true},
		{"a singular field twice", twice, true, false},
		{"an unknown field", unknown, false, false},
		{"invalid UTF-8", invalidUTF8, true, true},
	}
	m := newAdminMarshaler()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md := (&mcpgatewayv1.ListToolsResponse{}).ProtoReflect().Descriptor()
			if _, ok := appendJSON(nil, md, c.b); ok == c.declined {
				t.Fatalf("appendJSON ok = %v, want %v", ok, !c.declined)
			}
			lz := &mcpgatewayv1.ListToolsResponse{}
			lz.ProtoReflect().SetUnknown(c.b)
			got, err := m.Marshal(lz)
			full := &mcpgatewayv1.ListToolsResponse{}
			uerr := proto.Unmarshal(c.b, full)
			want, merr := m.JSONPb.Marshal(full)
			if c.wantErr {
				if err == nil || (uerr == nil && merr == nil) {
					t.Fatalf("no error: %s (unmarshal %v, marshal %v)", got, uerr, merr)
				}
				return
			}
			if err != nil || uerr != nil || merr != nil {
				t.Fatalf("errors: %v %v %v", err, uerr, merr)
			}
			if compact(t, got) != compact(t, want) {
				t.Fatalf("got %s, protojson %s", got, want)
			}
		})
	}
}

// GET /internal/mcp/tools through the edge answers what mcpgateway listed, as protojson
// writes it, with the admin routes' headers; a refused key keeps the admin error shape.
func TestToolsRouteWritesTheCatalog(t *testing.T) {
	te := startEdge(t, nil)
	list := &mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{
		{ServerId: "s", Name: "t", ChatName: "mcp_s__t", InputSchema: mustStruct(t, `{"type":"object","properties":{"b":{},"a":{"enum":["x"]}}}`)}}}
	te.admin.setTools(list)
	a := do(t, "GET", te.url+"/internal/mcp/tools", "", "Authorization", "Bearer "+adminKey)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v %s", a.status, a.header, a.body)
	}
	if want := viaProtojson(t, list); a.body != want {
		t.Fatalf("body:\n%s\nwant:\n%s", a.body, want)
	}
	if md := te.admin.calls(); len(md) != 1 || len(md[0].Get("authorization")) != 1 {
		t.Fatalf("metadata of the call: %v", md)
	}
	te.admin.setUnauthenticated()
	a = do(t, "GET", te.url+"/internal/mcp/tools", "", "Authorization", "Bearer "+adminKey)
	if a.status != http.StatusUnauthorized || shape(t, a) != "admin" {
		t.Fatalf("refused: %d %s", a.status, a.body)
	}
}

// BenchmarkToolsJSON writes a catalog of 390 tools (30 servers of 13) as JSON from its
// encoding, and, for comparison, as the edge did before: decoded, then written by protojson.
func BenchmarkToolsJSON(b *testing.B) {
	schema := `{"type":"object","additionalProperties":false,"required":["owner","repo"],"properties":{
		"owner":{"type":"string","description":"The repository's owner."},"repo":{"type":"string","description":"The repository's name."},
		"state":{"type":"string","description":"Which items to include.","enum":["open","closed","all"]},
		"page":{"type":"integer","description":"Page, from 1.","minimum":1,"maximum":100},
		"filters":{"type":"object","properties":{"labels":{"type":"array","items":{"type":"string"}},
		"author":{"type":"object","properties":{"login":{"type":"string"},"kind":{"type":"string","enum":["user","bot"]}}}}}}}`
	st := func(js string) *structpb.Struct {
		s := &structpb.Struct{}
		if err := s.UnmarshalJSON([]byte(js)); err != nil {
			b.Fatal(err)
		}
		return s
	}
	list := &mcpgatewayv1.ListToolsResponse{}
	for i := range 390 {
		name := "tool_" + strconv.Itoa(i)
		list.Tools = append(list.Tools, &mcpgatewayv1.ToolEntry{ServerId: "s", ServerName: "S", Name: name, ChatName: "mcp_s__" + name,
			Description: "A tool.", InputSchema: st(schema), Tool: st(`{"name":"` + name + `","inputSchema":` + schema + `}`),
			OpenaiTool: st(`{"type":"function","function":{"name":"mcp_s__` + name + `","parameters":` + schema + `}}`)})
	}
	wire, err := proto.Marshal(list)
	if err != nil {
		b.Fatal(err)
	}
	m := newAdminMarshaler()
	b.Run("from the encoding", func(b *testing.B) {
		b.SetBytes(int64(len(wire)))
		for b.Loop() {
			lz := &mcpgatewayv1.ListToolsResponse{}
			lz.ProtoReflect().SetUnknown(wire)
			if _, err := m.Marshal(lz); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoded, then protojson", func(b *testing.B) {
		b.SetBytes(int64(len(wire)))
		for b.Loop() {
			full := &mcpgatewayv1.ListToolsResponse{}
			if err := proto.Unmarshal(wire, full); err != nil {
				b.Fatal(err)
			}
			if _, err := m.JSONPb.Marshal(full); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same tools as 30 servers' states (GET /internal/mcp/servers), each state flat with
	// every field of its config.
	servers := &mcpgatewayv1.ListServersResponse{}
	for i := range 30 {
		id := "server-" + strconv.Itoa(i)
		servers.Servers = append(servers.Servers, &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: id, Name: id,
			Transport: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"}, Env: map[string]string{"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
			Enabled: proto.Bool(true), TimeoutMs: proto.Int32(30000), Expose: proto.Bool(true), Approval: proto.String("none"), ApprovalBy: proto.String("admin")},
			Status: "connected", Connected: true, ProtocolVersion: "2025-11-25", Tools: list.Tools[i*13 : i*13+13]})
	}
	swire, err := proto.Marshal(servers)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("servers from the encoding", func(b *testing.B) {
		b.SetBytes(int64(len(swire)))
		for b.Loop() {
			lz := &mcpgatewayv1.ListServersResponse{}
			lz.ProtoReflect().SetUnknown(swire)
			if _, err := m.Marshal(lz); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzToolsJSON feeds appendJSON any bytes as a ListToolsResponse (or, with servers, a
// ListServersResponse) encoding: whatever it accepts, proto must accept too, and the JSON it
// writes must be protojson's for the decoded message (byte for byte, whitespace aside);
// whatever it cannot write it must decline, so that the marshaler falls back to protojson.
func FuzzToolsJSON(f *testing.F) {
	schema := &structpb.Struct{Fields: map[string]*structpb.Value{
		"type": structpb.NewStringValue("object"), "n": structpb.NewNumberValue(-1.5e-7),
		"l": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewBoolValue(true), structpb.NewNullValue()}}),
		"s": structpb.NewStringValue("é \u2028 \" \\ \x01"),
	}}
	entry := &mcpgatewayv1.ToolEntry{Name: "a", ChatName: "mcp_s__a", InputSchema: schema, Tool: schema, OpenaiTool: schema}
	for _, m := range []proto.Message{
		&mcpgatewayv1.ListToolsResponse{},
		&mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{entry}},
		&mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{{}, {ServerId: "x", Description: "d\n"}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(false, b)
	}
	servers := &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{{Tools: []*mcpgatewayv1.ToolEntry{entry}}}}
	b, err := proto.Marshal(servers)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(true, b)
	jsonpb := newAdminMarshaler().JSONPb
	f.Fuzz(func(t *testing.T, servers bool, b []byte) {
		var m proto.Message = &mcpgatewayv1.ListToolsResponse{}
		if servers {
			m = &mcpgatewayv1.ListServersResponse{}
		}
		got, ok := appendJSON(nil, m.ProtoReflect().Descriptor(), b)
		if !ok {
			return
		}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatalf("appendJSON wrote %s for an encoding proto refuses: %v", got, err)
		}
		want, err := jsonpb.Marshal(m)
		if err != nil {
			t.Fatalf("appendJSON wrote %s for a message protojson refuses: %v", got, err)
		}
		if want, err = adminjson.Shape(m.ProtoReflect().Descriptor(), want); err != nil {
			t.Fatal(err)
		}
		if g, w := compact(t, got), compact(t, want); g != w {
			t.Fatalf("from the encoding:\n%s\nprotojson:\n%s", g, w)
		}
	})
}
