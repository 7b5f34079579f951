package serverconfig

import (
	"path"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// Values of a server config's approval.
const (
	ApprovalRequired = "required"
	ApprovalNone     = "none"
)

// Values of a server config's approval_by: who decides a call that needs approval.
const (
	// ApprovalByAdmin (the default, stored unset): only the admin key decides, on every path.
	ApprovalByAdmin = "admin"
	// ApprovalByClient: an MCP client's user decides the calls made over MCP (elicitation,
	// input_required); chats and the admin API still wait for an administrator.
	ApprovalByClient = "client"
)

// FieldApprovalTools names approval_tools in errors.
const FieldApprovalTools = "approval_tools"

// parseApproval checks approval, approval_by and approval_tools of cfg: approval is
// "required" or "none" (any case; "none" is the default, stored unset), approval_by "admin"
// (the default, stored unset) or "client", approval_tools the globs tools_allow takes.
func parseApproval(cfg *mcpgatewayv1.ServerConfig) error {
	switch v := strings.ToLower(strings.TrimSpace(cfg.GetApproval())); v {
	case ApprovalRequired:
		cfg.Approval = proto.String(ApprovalRequired)
	case ApprovalNone, "":
		cfg.Approval = nil
	default:
		return invalid(`approval %q: use "required" (every tool of the server waits for a person's approval) or "none" (only the tools approval_tools names, if any)`, truncate(cfg.GetApproval(), 40))
	}
	switch v := strings.ToLower(strings.TrimSpace(cfg.GetApprovalBy())); v {
	case ApprovalByClient:
		cfg.ApprovalBy = proto.String(ApprovalByClient)
	case ApprovalByAdmin, "":
		cfg.ApprovalBy = nil
	default:
		return invalid(`approval_by %q: use "admin" (only the admin key decides a held call) or "client" (an MCP client's user decides through elicitation)`, truncate(cfg.GetApprovalBy(), 40))
	}
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
