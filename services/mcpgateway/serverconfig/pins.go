package serverconfig

import (
	"slices"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// FieldPinTools names pin_tools in errors and documents.
const FieldPinTools = "pin_tools"

// PinsTools reports whether the server of cfg pins its tool definitions (pins.Gate): unless
// its pin_tools is false. Unset means true, for servers registered before the setting
// existed too: their next listing is pinned as it is.
func PinsTools(cfg *mcpgatewayv1.ServerConfig) bool { return cfg.PinTools == nil || cfg.GetPinTools() }

// SameProgram reports whether configs a and b run the same server: the same transport and
// program (command, args, working_dir) or URL. An administrator who points a server at
// another program registers another server under its id, whose tools are pinned afresh.
func SameProgram(a, b *mcpgatewayv1.ServerConfig) bool {
	return a.GetTransport() == b.GetTransport() && a.GetCommand() == b.GetCommand() && slices.Equal(a.GetArgs(), b.GetArgs()) &&
		a.GetWorkingDir() == b.GetWorkingDir() && a.GetUrl() == b.GetUrl()
}
