package serverconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func shapedPreset(tools ...*mcpgatewayv1.PresetTool) *mcpgatewayv1.PresetInput {
	return &mcpgatewayv1.PresetInput{Id: proto.String("p"), McpServerIds: []string{"fs", "my.srv", LemonadeProvider}, Tools: tools}
}

func TestPresetToolsAccepted(t *testing.T) {
	in := shapedPreset(
		&mcpgatewayv1.PresetTool{Tool: "mcp_fs__read_file", Name: "read", Description: "Read one file.",
			Arguments: &mcpgatewayv1.PresetToolArguments{Fixed: map[string]*structpb.Value{"root": structpb.NewStringValue("/srv")},
				Defaults: map[string]*structpb.Value{"limit": structpb.NewNumberValue(10)}}},
		&mcpgatewayv1.PresetTool{Tool: "mcp_fs__delete", Hidden: true},
		&mcpgatewayv1.PresetTool{Tool: "mcp_my_srv__x_0123456789abcdef", Name: "x"}, // a hashed chat_name of server "my.srv"
		&mcpgatewayv1.PresetTool{Tool: "lemonade_list_models", Name: "models"},
		&mcpgatewayv1.PresetTool{Tool: "mcp_fs__not_listed_yet"}, // a tool may appear later
	)
	p, err := ParsePreset(in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GetTools()) != 5 || !proto.Equal(p.GetTools()[0], in.GetTools()[0]) {
		t.Fatalf("tools = %v", p.GetTools())
	}
	if p.GetTools()[0] == in.GetTools()[0] {
		t.Fatal("the stored tools share the input's messages")
	}
}

func TestPresetToolsRefused(t *testing.T) {
	args := func(n int) *mcpgatewayv1.PresetToolArguments {
		a := &mcpgatewayv1.PresetToolArguments{Fixed: map[string]*structpb.Value{}}
		for i := range n {
			a.Fixed[fmt.Sprint("a", i)] = structpb.NewNullValue()
		}
		return a
	}
	many := make([]*mcpgatewayv1.PresetTool, MaxPresetTools+1)
	for i := range many {
		many[i] = &mcpgatewayv1.PresetTool{Tool: fmt.Sprint("mcp_fs__t", i)}
	}
	for _, c := range []struct {
		name  string
		tools []*mcpgatewayv1.PresetTool
		want  string
	}{
		{"no tool", []*mcpgatewayv1.PresetTool{{Name: "x"}}, "tools[0].tool is required"},
		{"another server's tool", []*mcpgatewayv1.PresetTool{{Tool: "mcp_github__search"}}, `tools[0].tool "mcp_github__search" is not a tool of this preset's providers (fs, my.srv, lemonade)`},
		{"a prefix of a selected id", []*mcpgatewayv1.PresetTool{{Tool: "mcp_f__x"}}, "is not a tool of this preset's providers"},
		{"twice", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a"}, {Tool: "mcp_fs__a", Hidden: true}}, `tools[1].tool "mcp_fs__a" is shaped twice (also tools[0])`},
		{"bad name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: "read file"}}, `tools[0].name "read file" must match [A-Za-z0-9_-]{1,64}`},
		{"long name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: strings.Repeat("n", 65)}}, "must match [A-Za-z0-9_-]{1,64}"},
		{"mcp_ name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: "mcp_fs__b"}}, `tools[0].name "mcp_fs__b" begins with mcp_ or lemonade_`},
		{"lemonade_ name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: "lemonade_x"}}, "begins with mcp_ or lemonade_"},
		{"meta-tool name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: "call_tool"}}, `tools[0].name "call_tool" is the name of a tool search meta-tool`},
		{"collision", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: "read"}, {Tool: "mcp_fs__b", Name: "read"}}, `tools[1].name "read" is also the name of tools[0] (mcp_fs__a)`},
		{"long description", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Description: strings.Repeat("d", MaxShapedDescription+1)}}, fmt.Sprintf("tools[0].description is %d bytes; at most %d", MaxShapedDescription+1, MaxShapedDescription)},
		{"too many arguments", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Arguments: args(MaxShapedArguments + 1)}}, fmt.Sprintf("tools[0].arguments sets %d arguments; at most %d", MaxShapedArguments+1, MaxShapedArguments)},
		{"empty argument name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Arguments: &mcpgatewayv1.PresetToolArguments{Defaults: map[string]*structpb.Value{"": structpb.NewBoolValue(true)}}}}, "tools[0].arguments.defaults has an argument name of 0 bytes"},
		{"long argument name", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Arguments: &mcpgatewayv1.PresetToolArguments{Fixed: map[string]*structpb.Value{strings.Repeat("k", MaxArgumentName+1): structpb.NewBoolValue(true)}}}}, "tools[0].arguments.fixed has an argument name of 129 bytes"},
		{"fixed and defaulted", []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed: map[string]*structpb.Value{"root": structpb.NewStringValue("/")}, Defaults: map[string]*structpb.Value{"root": structpb.NewStringValue("/")}}}}, "tools[0].arguments.fixed.root is also in arguments.defaults"},
		{"too many tools", many, fmt.Sprintf("tools shapes %d tools; a preset shapes at most %d", MaxPresetTools+1, MaxPresetTools)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePreset(shapedPreset(c.tools...), nil, nil)
			if !errors.Is(err, ErrInvalidPreset) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	// At the bounds: accepted.
	atMost := []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__a", Name: strings.Repeat("n", 64), Description: strings.Repeat("d", MaxShapedDescription), Arguments: args(MaxShapedArguments)}}
	if _, err := ParsePreset(shapedPreset(atMost...), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePreset(shapedPreset(many[:MaxPresetTools]...), nil, nil); err != nil {
		t.Fatal(err)
	}
	// Without "lemonade" selected, a built-in tool is not the preset's.
	in := &mcpgatewayv1.PresetInput{Id: proto.String("p"), McpServerIds: []string{"fs"}, Tools: []*mcpgatewayv1.PresetTool{{Tool: "lemonade_list_models", Hidden: true}}}
	if _, err := ParsePreset(in, nil, nil); err == nil || !strings.Contains(err.Error(), "is not a tool of this preset's providers (fs)") {
		t.Fatalf("err = %v", err)
	}
}

func TestKeepPresetTools(t *testing.T) {
	stored := &mcpgatewayv1.Preset{Id: "p", McpServerIds: []string{"fs", "gh"}, Tools: []*mcpgatewayv1.PresetTool{
		{Tool: "mcp_fs__rm", Hidden: true}, {Tool: "mcp_gh__search", Name: "search"}}}
	parse := func(in *mcpgatewayv1.PresetInput) *mcpgatewayv1.Preset {
		p, err := ParsePreset(in, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Left out and not named: kept, but for the providers still selected.
	in := &mcpgatewayv1.PresetInput{Id: proto.String("p"), McpServerIds: []string{"fs"}}
	p := parse(in)
	if err := KeepPresetTools(p, stored, in, []string{"id", "mcp_server_ids"}); err != nil {
		t.Fatal(err)
	}
	if len(p.GetTools()) != 1 || p.GetTools()[0].GetTool() != "mcp_fs__rm" || p.GetTools()[0] == stored.GetTools()[0] {
		t.Fatalf("kept %v", p.GetTools())
	}
	// Named empty: cleared.
	p = parse(in)
	if err := KeepPresetTools(p, stored, in, []string{"tools"}); err != nil || len(p.GetTools()) != 0 {
		t.Fatalf("cleared: %v %v", p.GetTools(), err)
	}
	// Sent: taken as sent.
	in = &mcpgatewayv1.PresetInput{Id: proto.String("p"), McpServerIds: []string{"fs"}, Tools: []*mcpgatewayv1.PresetTool{{Tool: "mcp_fs__ls", Name: "ls"}}}
	p = parse(in)
	if err := KeepPresetTools(p, stored, in, nil); err != nil || len(p.GetTools()) != 1 || p.GetTools()[0].GetName() != "ls" {
		t.Fatalf("sent: %v %v", p.GetTools(), err)
	}
	// A new preset has none to keep.
	p = parse(&mcpgatewayv1.PresetInput{Id: proto.String("q")})
	if err := KeepPresetTools(p, nil, &mcpgatewayv1.PresetInput{}, nil); err != nil || p.GetTools() != nil {
		t.Fatalf("new: %v %v", p.GetTools(), err)
	}
	if err := KeepPresetTools(p, nil, &mcpgatewayv1.PresetInput{}, []string{"tool"}); err == nil || !strings.Contains(err.Error(), `update_mask path "tool" names no field of a preset`) {
		t.Fatalf("a bad path: %v", err)
	}
}
