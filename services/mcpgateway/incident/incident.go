// Package incident words an MCP server's failure for the caller who met it: the cause for an
// administrator (keyauth's admin key), else an incident id that mcpgateway's log line carries
// with the cause — a server's stderr and exit status are for administrators.
package incident

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/zestmcp/zest/lib/requestid"
)

// Describe returns summary followed by the cause (admin) or by an incident id, which it then
// logs at warn with the server, summary and cause.
func Describe(ctx context.Context, log *slog.Logger, admin bool, serverID, summary string, err error) string {
	if admin {
		return fmt.Sprintf("%s: %v", summary, err)
	}
	id := requestid.New()
	log.WarnContext(ctx, "MCP server failed", "server", serverID, "incident", id, "what", summary, "err", err)
	return fmt.Sprintf("%s (incident %s: an administrator can find the cause in mcpgateway's log or in GET /internal/mcp/servers/%s)",
		summary, id, serverID)
}
