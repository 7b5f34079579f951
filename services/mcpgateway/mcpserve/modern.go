package mcpserve

import (
	"slices"

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
	msg, bad := AdmitModern(req, r)
	if bad != nil {
		return mcpera.Final(stream, bad)
	}
	if !msg.IsRequest() {
		return nil // a notification (notifications/cancelled): accepted, 202
	}
	ctx := server.WithSupportedProtocolVersions(stream.Context(), mcpera.Supported)
	sess := &clientSession{modern: true, notes: make(chan mcp.JSONRPCNotification, 64), level: DefaultLogLevel, loaded: true}
	resp, err := h.dispatch(ctx, sess, payload, envelope(msg), stream.Message)
	if err != nil || resp == nil {
		return err
	}
	return mcpera.Final(stream, resp)
}

// AdmitModern is what every endpoint checks first of a request of 2026-07-28 (r, classified
// from req): the JSON-RPC envelope, that it is not a response (the revision has no server
// requests, so a client posts none), the transport rules of mcpera.Request.Check, and that
// its method was not removed by the revision. It returns the message, and the answer that
// ends the exchange when the request cannot go further (send it with mcpera.Final). With
// no answer, a message that is not a request is a notification, accepted (HTTP 202);
// notifications/cancelled does nothing: a modern request has no session to name it by, so
// closing its connection is how it is cancelled.
func AdmitModern(req *mcphttp.Request, r mcpera.Request) (Message, []byte) {
	env, code, problem := checkEnvelope(req.Body)
	msg := Message(env)
	switch {
	case problem != "":
		return msg, errorResponse(env.ID, code, problem)
	case env.Method == "":
		return msg, errorResponse(env.ID, mcp.INVALID_REQUEST,
			"Invalid Request: in protocol 2026-07-28 a server sends no requests, so a client posts no responses; answer an input_required result by sending the request again with its inputResponses")
	case env.JSONRPC != mcp.JSONRPC_VERSION:
		return msg, errorResponse(env.ID, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	if bad := r.Check(req.Header, env.ID, env.Method, mcpera.Supported); bad != nil {
		return msg, bad
	}
	if env.isRequest() && slices.Contains(mcpera.Removed, env.Method) {
		return msg, errorResponse(env.ID, mcp.METHOD_NOT_FOUND, "Method not found: "+env.Method+" was removed in protocol 2026-07-28")
	}
	return msg, nil
}
