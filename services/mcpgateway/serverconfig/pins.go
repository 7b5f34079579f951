package serverconfig

import mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"

// FieldPinTools names pin_tools in errors and documents.
const FieldPinTools = "pin_tools"

// PinsTools reports whether the server of cfg pins its tool definitions (pins.Gate): unless
// its pin_tools is false. Unset means true, for servers registered before the setting
// existed too: their next listing is pinned as it is.
func PinsTools(cfg *mcpgatewayv1.ServerConfig) bool { return cfg.PinTools == nil || cfg.GetPinTools() }
