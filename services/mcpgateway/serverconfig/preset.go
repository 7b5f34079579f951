package serverconfig

import (
	"regexp"
	"slices"
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
	f, err := fold(body, "preset", `{"id":"helper","model":"builtin-llm","mcp_server_ids":["lemonade"]}`, presetAliases, presetFields, nil)
	if err != nil {
		return nil, err
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
