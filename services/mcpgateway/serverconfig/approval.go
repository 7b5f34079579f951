package serverconfig

import (
	"path"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Values of a server config's approval.
const (
	ApprovalRequired = "required"
	ApprovalNone     = "none"
)

// Values of a server config's approval_by: who decides a call that needs approval.
const (
	// ApprovalByAdmin (the default, stored as ""): only the admin key decides, on every path.
	ApprovalByAdmin = "admin"
	// ApprovalByClient: an MCP client's user decides the calls made over MCP (elicitation,
	// input_required); chats and the admin API still wait for an administrator.
	ApprovalByClient = "client"
)

// FieldApprovalTools names approval_tools in errors.
const FieldApprovalTools = "approval_tools"

// parseApproval checks approval and approval_tools of in into cfg: approval is "required" or
// "none" (any case; absent is "none", stored as ""), approval_tools the globs tools_allow takes.
func parseApproval(in *mcpgatewayv1.ServerInput, cfg *mcpgatewayv1.ServerConfig) error {
	if in.Approval != nil {
		switch v := strings.ToLower(strings.TrimSpace(in.GetApproval())); v {
		case ApprovalRequired:
			cfg.Approval = ApprovalRequired
		case ApprovalNone, "":
			cfg.Approval = "" // none is the default: stored as absent
		default:
			return invalid(`approval %q: use "required" (every tool of the server waits for a person's approval) or "none" (only the tools approval_tools names, if any)`, truncate(in.GetApproval(), 40))
		}
	}
	if in.ApprovalBy != nil {
		switch v := strings.ToLower(strings.TrimSpace(in.GetApprovalBy())); v {
		case ApprovalByClient:
			cfg.ApprovalBy = ApprovalByClient
		case ApprovalByAdmin, "":
			cfg.ApprovalBy = "" // admin is the default: stored as absent
		default:
			return invalid(`approval_by %q: use "admin" (only the admin key decides a held call) or "client" (an MCP client's user decides through elicitation)`, truncate(in.GetApprovalBy(), 40))
		}
	}
	cfg.ApprovalTools = in.GetApprovalTools()
	return checkToolPatterns(FieldApprovalTools, cfg.GetApprovalTools())
}

// ApprovalBy is who decides the calls of the server of cfg that need approval:
// ApprovalByAdmin or ApprovalByClient.
func ApprovalBy(cfg *mcpgatewayv1.ServerConfig) string {
	if cfg.GetApprovalBy() == ApprovalByClient {
		return ApprovalByClient
	}
	return ApprovalByAdmin
}

// NeedsApproval reports whether a call of tool (its own name on the server of cfg) must wait
// for a person's approval: the server's approval is "required", or one of its approval_tools
// patterns matches the name.
func NeedsApproval(cfg *mcpgatewayv1.ServerConfig, tool string) bool {
	if cfg.GetApproval() == ApprovalRequired {
		return true
	}
	for _, p := range cfg.GetApprovalTools() {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}
