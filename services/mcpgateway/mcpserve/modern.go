package mcpserve

import (
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
)

// modern answers one request of protocol 2026-07-28: no session id is read or issued, the
// request carries its version, the client's capabilities and its log level in _meta, and is
// answered on its own (mcp-go's MCPServer serves that revision: server/discover, resultType,
// caching hints, the removed methods, subscriptions/listen, the log level of _meta). What
// happens here is what the transport owns: the checks of package mcpera, and the HTTP
// class of the answer.
func (h *Handler) modern(req *mcphttp.Request, r mcpera.Request, stream mcphttp.ExchangeStream) error {
	payload := req.Body
	msg, bad := mcpera.Admit(req, r)
	if bad != nil {
		return mcpera.Final(stream, bad)
	}
	if !msg.IsRequest() {
		return nil // a notification (notifications/cancelled): accepted, 202
	}
	ctx := server.WithSupportedProtocolVersions(stream.Context(), mcpera.Supported)
	sess := &clientSession{modern: true, notes: make(chan mcp.JSONRPCNotification, 64), level: DefaultLogLevel, loaded: true}
	resp, err := h.dispatch(ctx, sess, payload, msg, stream.Message)
	if err != nil || resp == nil {
		return err
	}
	return mcpera.Final(stream, resp)
}
