package mcpserve

import (
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/stateless"
)

// modern answers one request of protocol 2026-07-28: no session id is read or issued, the
// request carries its version, the client's capabilities and its log level in _meta, and is
// answered on its own (mcp-go's MCPServer serves that revision: server/discover, resultType,
// caching hints, the removed methods, subscriptions/listen, the log level of _meta). What
// happens here is what the transport owns: the checks of package stateless, and the HTTP
// class of the answer.
func (h *Handler) modern(req *mcpgatewayv1.ExchangeRequest, r stateless.Request, stream ExchangeStream) error {
	payload := req.GetPayload()
	env, code, problem := checkEnvelope(payload)
	if problem != "" {
		return stream.Send(stateless.Final(errorResponse(env.ID, code, problem)))
	}
	if env.Method == "" {
		return stream.Send(stateless.Final(errorResponse(env.ID, mcp.INVALID_REQUEST,
			"Invalid Request: in protocol 2026-07-28 a server sends no requests, so a client posts no responses; answer an input_required result by sending the request again with its inputResponses")))
	}
	if bad := r.Check(req, env.ID, env.Method, Supported); bad != nil {
		return stream.Send(stateless.Final(bad))
	}
	if !env.isRequest() {
		return nil // a notification (notifications/cancelled): accepted, 202
	}
	if slices.Contains(stateless.Removed, env.Method) {
		return stream.Send(stateless.Final(errorResponse(env.ID, mcp.METHOD_NOT_FOUND,
			"Method not found: "+env.Method+" was removed in protocol 2026-07-28")))
	}
	ctx := server.WithSupportedProtocolVersions(stream.Context(), Supported)
	sess := &clientSession{modern: true, notes: make(chan mcp.JSONRPCNotification, 64), level: DefaultLogLevel, loaded: true}
	resp, err := h.dispatch(ctx, sess, payload, env, func(m []byte) error {
		return stream.Send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: m}})
	})
	if err != nil || resp == nil {
		return err
	}
	return stream.Send(stateless.Final(resp))
}
