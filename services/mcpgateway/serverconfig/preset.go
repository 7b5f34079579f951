package serverconfig

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/protobuf/types/known/structpb"
)

// MaxProviders is how many MCP providers a preset may select.
const MaxProviders = 4

// LemonadeProvider is the provider id of the built-in lemonade_* tools.
const LemonadeProvider = registry.LemonadeProvider

var presetFields = []string{"id", "name", "model", "system_prompt", "mcp_server_ids", "tools_enabled"}

var presetAliases = map[string]string{"system_prompt": "systemPrompt", "mcp_server_ids": "mcpServerIds", "tools_enabled": "toolsEnabled"}

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// SanitizeProviders cleans provider ids to [A-Za-z0-9_.-]{1,96}, drops empty ones and
// duplicates, keeping the order.
func SanitizeProviders(ids []string) []string {
	out := []string{}
	for _, id := range ids {
		id = notIDChar.ReplaceAllString(strings.TrimSpace(id), "")
		if len(id) > 96 {
			id = id[:96]
		}
		if id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// ParsePreset reads a preset from body (bare or {"preset":{…}}). The legacy tools_enabled
// flag is migrated (true → ["lemonade"], false → []) when mcp_server_ids is absent, and both
// fields are kept in step.
func ParsePreset(body *structpb.Struct, taken func(string) bool) (*mcpgatewayv1.Preset, error) {
	fields := body.GetFields()
	if w, ok := fields["preset"]; ok {
		if len(fields) != 1 {
			return nil, invalid(`send the preset bare or wrapped as {"preset":{…}}, not both`)
		}
		if fields = w.GetStructValue().GetFields(); fields == nil {
			return nil, invalid("preset must be an object")
		}
	}
	if len(fields) == 0 {
		return nil, invalid(`the body is empty: send a preset such as {"id":"helper","model":"builtin-llm","mcp_server_ids":["lemonade"]}`)
	}
	f := make(map[string]*structpb.Value, len(fields))
	for k, v := range fields {
		f[k] = v
	}
	for snake, camel := range presetAliases {
		if v, ok := f[camel]; ok {
			if _, both := f[snake]; both {
				return nil, invalid("%s and %s are the same field: send one of them", snake, camel)
			}
			f[snake] = v
			delete(f, camel)
		}
	}
	var unknown []string
	for k := range f {
		if !slices.Contains(presetFields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, invalid("unknown field %s: the fields are %s", strings.Join(unknown, ", "), strings.Join(presetFields, ", "))
	}
	r := reader{f: f}
	p := &mcpgatewayv1.Preset{Id: r.str("id"), Name: r.str("name"), Model: r.str("model"), SystemPrompt: r.str("system_prompt")}
	ids, hasIDs := f["mcp_server_ids"]
	list := r.strs("mcp_server_ids")
	enabled := r.boolean("tools_enabled", false)
	if r.err != nil {
		return nil, r.err
	}
	if hasIDs && ids.GetListValue() != nil {
		p.McpServerIds = SanitizeProviders(list)
	} else if enabled {
		p.McpServerIds = []string{LemonadeProvider}
	}
	if len(p.McpServerIds) > MaxProviders {
		return nil, invalid("mcp_server_ids selects %d providers; a preset selects at most %d", len(p.McpServerIds), MaxProviders)
	}
	p.ToolsEnabled = slices.Contains(p.McpServerIds, LemonadeProvider)
	if p.McpServerIds == nil {
		p.McpServerIds = []string{}
	}
	switch {
	case p.GetId() == "":
		src := p.GetName()
		if src == "" {
			src = "preset"
		}
		p.Id = deriveID(src, taken)
	case !IDPattern.MatchString(p.GetId()):
		return nil, invalid("id %q must match [A-Za-z0-9_.-]{1,96}", truncate(p.GetId(), 120))
	}
	if p.GetName() == "" {
		p.Name = p.GetId()
	}
	return p, nil
}
