package serverconfig

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// The bounds of a preset's tools (Preset.tools).
const (
	// MaxPresetTools is how many tools a preset may shape.
	MaxPresetTools = 1024
	// MaxShapedDescription is the longest description a preset may give a tool, in bytes.
	MaxShapedDescription = 8192
	// MaxShapedArguments is how many arguments one tool's fixed and defaults set together.
	MaxShapedArguments = 64
	// MaxArgumentName is the longest argument name a preset may set, in bytes.
	MaxArgumentName = 128
)

// ShapedNamePattern is what a preset's new tool name matches: OpenAI's function names, so the
// chat loop can offer it as it is.
var ShapedNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ReservedToolNames are names no preset may give a tool: tool search's meta-tools.
var ReservedToolNames = []string{"search_tools", "call_tool"}

// ChatNamePart is a server id or tool name as a chat_name holds it: every character outside
// [A-Za-z0-9_-] mapped to '_', '_' trimmed at both ends, "tool" for an empty result.
func ChatNamePart(part string) string {
	var b strings.Builder
	for _, r := range part {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		return "tool"
	}
	return out
}

// ChatNamePrefix begins the chat_name of every tool of server id (catalog.ChatName).
func ChatNamePrefix(id string) string { return "mcp_" + ChatNamePart(id) + "__" }

// checkPresetTools checks a preset's tools against its providers: each names a tool of a
// selected provider once, by its chat_name; a new name is valid, outside the names of servers'
// and built-in tools (mcp_, lemonade_), and unique in the preset; the argument values are
// bounded, and none is both fixed and defaulted. A tool its server does not list (now) is
// accepted: a server may be down, or list it later.
func checkPresetTools(tools []*mcpgatewayv1.PresetTool, providers []string) error {
	if len(tools) > MaxPresetTools {
		return invalidPreset("tools shapes %d tools; a preset shapes at most %d (hide a server's tools with its tools_deny instead)", len(tools), MaxPresetTools)
	}
	seenTool := map[string]int{}
	seenName := map[string]int{}
	for i, t := range tools {
		field := func(member string) string { return "tools[" + strconv.Itoa(i) + "]" + member }
		tool := t.GetTool()
		if tool == "" {
			return invalidPreset("%s is required: the tool's chat_name, as the preset lists it unshaped (mcp_<server>__<name>, or a lemonade_* built-in tool)", field(".tool"))
		}
		if !ofProviders(tool, providers) {
			return invalidPreset("%s %q is not a tool of this preset's providers (%s): name a tool by its chat_name as tools/list of /mcp/presets/{id} shows it, or add its server to mcp_server_ids",
				field(".tool"), truncate(tool, 120), strings.Join(providers, ", "))
		}
		if j, dup := seenTool[tool]; dup {
			return invalidPreset("%s %q is shaped twice (also tools[%d]): give each tool one entry", field(".tool"), tool, j)
		}
		seenTool[tool] = i
		if name := t.GetName(); name != "" {
			switch {
			case !ShapedNamePattern.MatchString(name):
				return invalidPreset("%s %q must match [A-Za-z0-9_-]{1,64} (the names a model's function calls may use)", field(".name"), truncate(name, 120))
			case strings.HasPrefix(name, "mcp_") || strings.HasPrefix(name, "lemonade_"):
				return invalidPreset("%s %q begins with mcp_ or lemonade_, which name servers' and built-in tools: choose a name without that prefix", field(".name"), name)
			case slices.Contains(ReservedToolNames, name):
				return invalidPreset("%s %q is the name of a tool search meta-tool: choose another name", field(".name"), name)
			}
			if j, dup := seenName[name]; dup {
				return invalidPreset("%s %q is also the name of tools[%d] (%s): names are unique in a preset, choose another", field(".name"), name, j, tools[j].GetTool())
			}
			seenName[name] = i
		}
		if len(t.GetDescription()) > MaxShapedDescription {
			return invalidPreset("%s is %d bytes; at most %d", field(".description"), len(t.GetDescription()), MaxShapedDescription)
		}
		fixed, defaults := t.GetArguments().GetFixed(), t.GetArguments().GetDefaults()
		if n := len(fixed) + len(defaults); n > MaxShapedArguments {
			return invalidPreset("%s sets %d arguments; at most %d", field(".arguments"), n, MaxShapedArguments)
		}
		for _, set := range []struct {
			member string
			m      map[string]*structpb.Value
		}{{".arguments.fixed", fixed}, {".arguments.defaults", defaults}} {
			for k := range set.m {
				if k == "" || len(k) > MaxArgumentName {
					return invalidPreset("%s has an argument name of %d bytes: names are 1-%d bytes", field(set.member), len(k), MaxArgumentName)
				}
			}
		}
		for k := range fixed {
			if _, both := defaults[k]; both {
				return invalidPreset("%s.%s is also in arguments.defaults: an argument is fixed (always sent, hidden from the client) or defaulted (sent when left out), not both", field(".arguments.fixed"), k)
			}
		}
	}
	return nil
}

// presetTools are a preset's tools as stored: copies of what the admin sent.
func presetTools(in []*mcpgatewayv1.PresetTool) []*mcpgatewayv1.PresetTool {
	out := make([]*mcpgatewayv1.PresetTool, 0, len(in))
	for _, t := range in {
		out = append(out, proto.CloneOf(t))
	}
	return out
}

// ofProviders reports whether tool (a chat_name) is a tool of one of providers.
func ofProviders(tool string, providers []string) bool {
	return slices.ContainsFunc(providers, func(id string) bool {
		if id == LemonadeProvider {
			return strings.HasPrefix(tool, "lemonade_")
		}
		return strings.HasPrefix(tool, ChatNamePrefix(id))
	})
}

var presetInputFields = (&mcpgatewayv1.PresetInput{}).ProtoReflect().Descriptor().Fields()

// KeepPresetTools gives p, a preset ParsePreset read from in, the tools of stored (the preset
// as it was; nil for a new one) when in leaves them out and paths (the request's update_mask)
// do not name them: a client that knows only Lemonade's fields never erases a preset's
// shaping. The tools of providers p no longer selects are dropped (they shape nothing). A
// path that names no field of a preset is refused.
func KeepPresetTools(p, stored *mcpgatewayv1.Preset, in *mcpgatewayv1.PresetInput, paths []string) error {
	for _, path := range paths {
		if presetInputFields.ByName(protoreflect.Name(path)) == nil {
			return invalidPreset("update_mask path %q names no field of a preset: use its snake_case names (tools, mcp_server_ids, …)", truncate(path, 80))
		}
	}
	if len(in.GetTools()) > 0 || slices.Contains(paths, "tools") {
		return nil
	}
	var kept []*mcpgatewayv1.PresetTool
	for _, t := range stored.GetTools() {
		if ofProviders(t.GetTool(), p.GetMcpServerIds()) {
			kept = append(kept, proto.CloneOf(t))
		}
	}
	p.Tools = kept
	return nil
}
