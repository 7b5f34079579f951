package toolshape

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

func testShape() *Shape {
	return New([]*mcpgatewayv1.PresetTool{
		{Tool: "mcp_fs__read_file", Name: "read", Description: "Read a file under /srv.", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed:    map[string]*structpb.Value{"root": structpb.NewStringValue("/srv")},
			Defaults: map[string]*structpb.Value{"limit": structpb.NewNumberValue(10)}}},
		{Tool: "mcp_fs__delete", Hidden: true},
		{Tool: "mcp_fs__stat", Description: "Only the description."},
	})
}

const readFile = `{"name":"mcp_fs__read_file","description":"Reads.","inputSchema":{"type":"object","properties":{"root":{"type":"string"},"path":{"type":"string"},"limit":{"type":"integer"}},"required":["root","path","limit"]},"annotations":{"readOnlyHint":true}}`

func TestTools(t *testing.T) {
	s := testShape()
	in := []json.RawMessage{json.RawMessage(readFile), json.RawMessage(`{"name":"mcp_fs__delete","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"mcp_fs__stat","description":"Stats.","inputSchema":{"type":"object"}}`), json.RawMessage(`{"name":"mcp_fs__other","inputSchema":{"type":"object"}}`)}
	out := s.Tools(in)
	if len(out) != 3 {
		t.Fatalf("tools = %s", out)
	}
	var read struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		InputSchema struct {
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		} `json:"inputSchema"`
		Annotations map[string]any `json:"annotations"`
	}
	if err := json.Unmarshal(out[0], &read); err != nil {
		t.Fatal(err)
	}
	props := read.InputSchema.Properties
	if read.Name != "read" || read.Description != "Read a file under /srv." || props["root"] != nil || props["limit"]["default"] != 10.0 ||
		props["path"]["type"] != "string" || len(read.InputSchema.Required) != 1 || read.InputSchema.Required[0] != "path" || read.Annotations["readOnlyHint"] != true {
		t.Fatalf("read = %s", out[0])
	}
	if string(out[1]) != `{"description":"Only the description.","inputSchema":{"type":"object"},"name":"mcp_fs__stat"}` {
		t.Fatalf("stat = %s", out[1])
	}
	if string(out[2]) != string(in[3]) {
		t.Fatalf("an unshaped tool changed: %s", out[2])
	}
	if string(in[0]) != readFile {
		t.Fatal("the input was modified")
	}
	var none *Shape
	if got := none.Tools(in); len(got) != 4 {
		t.Fatalf("a nil shape: %s", got)
	}
}

func TestFunction(t *testing.T) {
	s := testShape()
	params := map[string]any{"type": "object", "properties": map[string]any{"root": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}}, "required": []any{"root"}}
	name, desc, got, ok := s.Function("mcp_fs__read_file", "Reads.", params)
	props := got["properties"].(map[string]any)
	if !ok || name != "read" || desc != "Read a file under /srv." || props["root"] != nil || props["limit"].(map[string]any)["default"] != 10.0 || len(got["required"].([]any)) != 0 {
		t.Fatalf("%s %s %v %v", name, desc, got, ok)
	}
	if _, err := structpb.NewStruct(got); err != nil { // the chat loop sends it as a Struct
		t.Fatal(err)
	}
	if params["properties"].(map[string]any)["root"] == nil {
		t.Fatal("the parameters given were modified")
	}
	if _, _, _, ok := s.Function("mcp_fs__delete", "", nil); ok {
		t.Fatal("a hidden tool is offered")
	}
}

func TestCall(t *testing.T) {
	s := testShape()
	for _, c := range []struct {
		name, args   string
		chat, merged string
		ok           bool
		fixed        string
	}{
		{"read", `{"path":"a"}`, "mcp_fs__read_file", `{"limit":10,"path":"a","root":"/srv"}`, true, ""},
		{"read", `{"path":"a","limit":3}`, "mcp_fs__read_file", `{"limit":3,"path":"a","root":"/srv"}`, true, ""},
		{"read", ``, "mcp_fs__read_file", `{"limit":10,"root":"/srv"}`, true, ""},
		{"read", `{"path":"a","root":"/srv"}`, "mcp_fs__read_file", `{"limit":10,"path":"a","root":"/srv"}`, true, ""}, // the same value passes
		{"read", `{"path":"a","root":"/etc"}`, "mcp_fs__read_file", ``, true, "root"},
		{"mcp_fs__read_file", `{}`, "", "", false, ""}, // the old name of a renamed tool
		{"mcp_fs__delete", `{}`, "", "", false, ""},    // hidden
		{"mcp_fs__stat", `{"x":1}`, "mcp_fs__stat", `{"x":1}`, true, ""},
		{"mcp_fs__other", `{"x":1}`, "mcp_fs__other", `{"x":1}`, true, ""},
	} {
		chat, merged, ok, err := s.Call(c.name, json.RawMessage(c.args))
		var fixed *FixedArgumentError
		switch {
		case c.fixed != "":
			if !errors.As(err, &fixed) || fixed.Argument != c.fixed || fixed.Tool != c.name || err.Error() != `argument "root" of tool "read" is set by this preset: leave it out of the call` {
				t.Errorf("%s %s: err = %v", c.name, c.args, err)
			}
		case err != nil || ok != c.ok || chat != c.chat || string(merged) != c.merged && c.ok:
			t.Errorf("%s %s: %q %s %v %v, want %q %s %v", c.name, c.args, chat, merged, ok, err, c.chat, c.merged, c.ok)
		}
	}
	if _, _, _, err := s.Call("read", json.RawMessage(`[1]`)); err == nil {
		t.Fatal("arguments that are not an object pass")
	}
	var none *Shape
	if chat, args, ok, err := none.Call("mcp_fs__x", json.RawMessage(`{"a":1}`)); chat != "mcp_fs__x" || string(args) != `{"a":1}` || !ok || err != nil {
		t.Fatal("a nil shape changes a call")
	}
	if !s.Has("mcp_fs__stat") || s.Has("mcp_fs__other") || none.Has("mcp_fs__stat") {
		t.Fatal("Has is wrong")
	}
	if served, ok := s.Served("mcp_fs__read_file"); served != "read" || !ok {
		t.Fatal(served)
	}
	if _, ok := s.Served("mcp_fs__delete"); ok {
		t.Fatal("a hidden tool is served")
	}
}

func TestEqual(t *testing.T) {
	other := New([]*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__delete", Hidden: false}})
	if !Equal(testShape(), testShape()) || !Equal(nil, New(nil)) || Equal(testShape(), other) || Equal(nil, other) {
		t.Fatal("Equal is wrong")
	}
}

// BenchmarkTools: a page of 500 tools of which a preset shapes 10 (what shaping adds to a
// preset's tools/list).
func BenchmarkTools(b *testing.B) {
	var tools []json.RawMessage
	var shaped []*mcpgatewayv1.PresetTool
	for i := range 500 {
		tools = append(tools, json.RawMessage(fmt.Sprintf(`{"name":"mcp_fs__t%d","description":"A tool that does thing %d with some words.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}}`, i, i)))
		if i%50 == 0 {
			shaped = append(shaped, &mcpgatewayv1.PresetTool{Tool: fmt.Sprintf("mcp_fs__t%d", i), Name: fmt.Sprint("t", i),
				Arguments: &mcpgatewayv1.PresetToolArguments{Defaults: map[string]*structpb.Value{"limit": structpb.NewNumberValue(5)}}})
		}
	}
	s := New(shaped)
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Tools(tools)) != 500 {
			b.Fatal("tools lost")
		}
	}
}
