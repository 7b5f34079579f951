package aggregate

import (
	"errors"
	"fmt"
)

// ErrUnknownPreset means the endpoint names no preset in the registry: /mcp/presets/{id}
// answers it 404; /mcp with ZEST_MCP_PRESET answers every request with it (and logs it).
var ErrUnknownPreset = errors.New("no preset is served with this id: it is not in the registry (GET /internal/mcp/presets lists them)")

// errUnknownCursor is a list cursor this endpoint did not issue.
var errUnknownCursor = errors.New("Invalid params: params.cursor is not a cursor this endpoint issued: send the nextCursor of the previous page, or no cursor for the first page")

// ownPresetError is ErrUnknownPreset for /mcp: it names the variable the operator set.
type ownPresetError string

func (e ownPresetError) Error() string {
	return fmt.Sprintf("ZEST_MCP_PRESET names preset %q, which is not in the registry: create it (POST /internal/mcp/presets) or unset ZEST_MCP_PRESET to serve the built-in tools on /mcp", string(e))
}

func (e ownPresetError) Is(target error) bool { return target == ErrUnknownPreset }
