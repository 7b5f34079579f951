// Package incident words an MCP server's failure for the caller who met it: the cause for an
// administrator (keyauth's admin key), else an incident id that mcpgateway's log line carries
// with the cause — a server's stderr and exit status are for administrators.
package incident

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/lib/requestid"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Describe returns summary followed by the cause (admin) or by an incident id, which it then
// logs at warn with the server, summary and cause.
//
// A server Zest cannot sign in to is no incident: every caller reads the fix alone
// (oauthclient.Fix: the server, and how to sign in), as the admin API answers it.
func Describe(ctx context.Context, log *slog.Logger, admin bool, serverID, summary string, err error) string {
	if fix, ok := oauthclient.Fix(err); ok {
		return fix
	}
	if admin {
		return summary + ": " + cause(serverID, err)
	}
	id := requestid.New()
	log.WarnContext(ctx, "MCP server failed", "server", serverID, "incident", id, "what", summary, "err", err)
	return fmt.Sprintf("%s (incident %s: an administrator can find the cause in mcpgateway's log or in GET /internal/mcp/servers/%s)",
		summary, id, serverID)
}

// cause is err's text as it follows a summary that names the server and says it failed:
// without upstream.ErrUpstream's own "MCP server failed: \"id\": " (the summary says it), and
// with a part a library repeated at once ("failed to send request: failed to send request",
// "context deadline exceeded: context deadline exceeded") said once.
func cause(serverID string, err error) string {
	text := strings.TrimPrefix(err.Error(), upstream.ErrUpstream.Error()+": "+strconv.Quote(serverID)+": ")
	parts := strings.Split(text, ": ")
	out := parts[:1]
	for _, p := range parts[1:] {
		if p != out[len(out)-1] {
			out = append(out, p)
		}
	}
	return strings.Join(out, ": ")
}
