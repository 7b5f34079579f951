package serverconfig

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// ErrInvalidPreset wraps every preset validation failure.
var ErrInvalidPreset = errors.New("invalid preset")

func invalidPreset(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidPreset, fmt.Sprintf(format, a...))
}

// UnknownModel is the refusal of a preset whose model the inference service does not know.
func UnknownModel(model string) error {
	return invalidPreset("model %q is not known: GET /api/v1/models lists the models (or leave model out, and each chat names its own)", truncate(model, 120))
}

// MaxProviders is how many MCP providers a preset may select.
const MaxProviders = 4

// LemonadeProvider is the provider id of the built-in lemonade_* tools.
const LemonadeProvider = registry.LemonadeProvider

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

// ParsePreset checks a preset an admin sent and returns it as stored. The legacy
// tools_enabled flag is migrated (true → ["lemonade"], false → []) when mcp_server_ids is
// empty, and both fields are kept in step. known reports whether a provider id names a
// registered server ("lemonade" is always known); nil accepts every id.
func ParsePreset(in *mcpgatewayv1.PresetInput, taken, known func(string) bool) (*mcpgatewayv1.Preset, error) {
	if in == nil {
		return nil, invalidPreset(`the preset is missing: send a preset such as {"id":"helper","model":"builtin-llm","mcp_server_ids":["lemonade"]}`)
	}
	p := &mcpgatewayv1.Preset{Id: in.GetId(), Name: in.GetName(), Model: in.GetModel(), SystemPrompt: in.GetSystemPrompt(), ToolSearch: in.GetToolSearch()}
	switch {
	case len(in.GetMcpServerIds()) > 0:
		p.McpServerIds = SanitizeProviders(in.GetMcpServerIds())
	case in.GetToolsEnabled():
		p.McpServerIds = []string{LemonadeProvider}
	default:
		p.McpServerIds = []string{}
	}
	if len(p.McpServerIds) > MaxProviders {
		return nil, invalidPreset("mcp_server_ids selects %d providers; a preset selects at most %d", len(p.McpServerIds), MaxProviders)
	}
	if known != nil {
		for _, id := range p.McpServerIds {
			if id != LemonadeProvider && !known(id) {
				return nil, invalidPreset("mcp_server_ids names %q, which is not a registered server: register it first (POST /internal/mcp/servers), or use \"lemonade\" for the built-in tools", id)
			}
		}
	}
	p.ToolsEnabled = slices.Contains(p.McpServerIds, LemonadeProvider)
	if err := checkPresetTools(in.GetTools(), p.GetMcpServerIds()); err != nil {
		return nil, err
	}
	if len(in.GetTools()) > 0 {
		p.Tools = presetTools(in.GetTools())
	}
	switch {
	case p.GetId() == "":
		src := p.GetName()
		if src == "" {
			src = "preset"
		}
		p.Id = deriveID(src, taken)
	case !IDPattern.MatchString(p.GetId()):
		return nil, invalidPreset("id %q must match [A-Za-z0-9_.-]{1,96}", truncate(p.GetId(), 120))
	}
	if p.GetName() == "" {
		p.Name = p.GetId()
	}
	return p, nil
}
