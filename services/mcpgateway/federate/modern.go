package federate

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// modern answers one request of protocol 2026-07-28 to /mcp/servers/{id}: no session, the
// request stands alone. server/discover is answered with what the upstream's own handshake
// (or discovery) said; subscriptions/listen streams the upstream's list_changed
// notifications the client asked for; everything else goes to the upstream through the same
// path as a session's requests (capabilities, tool filters, progress), in the upstream's own
// era: a session-era upstream is sent the request without the revision's _meta members, and
// its result gets what 2026-07-28 asks of a result (mcpera.Decorate).
func (h *Handler) modern(ctx context.Context, req *mcphttp.Request, r mcpera.Request, cfg *mcpgatewayv1.ServerConfig, out *output) error {
	msg, bad := mcpera.Admit(req, r)
	if bad != nil {
		return out.modern(bad)
	}
	if !msg.IsRequest() {
		return nil // a notification (notifications/cancelled): accepted
	}
	inf, err := h.up.Info(ctx, cfg)
	if err != nil {
		return out.modern(jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, cfg.GetId(), "connecting", err)))
	}
	switch msg.Method {
	case "server/discover":
		answer, err := mcpera.Discover(msg.ID, inf.Capabilities, inf.Instructions, orEmpty(inf.ServerInfo))
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return out.modern(answer)
	case "subscriptions/listen":
		return h.listenModern(ctx, cfg, msg.ID, r, inf.Capabilities, inf.ServerInfo, out)
	}
	if msg.Method == "tools/call" {
		// The Mcp-Param-* headers mirror the arguments the upstream's tool annotates
		// (x-mcp-header), checked against its listed tools (cached).
		if tools, err := h.up.ListTools(ctx, cfg, false); err == nil {
			var p struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(r.Params, &p)
			if bad := r.CheckParamHeaders(req.Header, msg.ID, mcpera.Tool(tools, p.Name)); bad != nil {
				return out.modern(bad)
			}
		}
	}
	params := mcpera.ParamsFor(inf.ProtocolVersion, r.Params) // as the upstream's era wants it
	fwd, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "method": msg.Method, "params": params})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if len(r.Params) == 0 {
		fwd, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "method": msg.Method})
	}
	c := &call{h: h, cfg: cfg, out: out, modern: true, modernRelays: relaysOfMeta(r.Params), clientParams: r.Params}
	var resp []byte
	resumed := false
	// A modern upstream's rounds are its client's; a tools/call's retry is the pipeline's
	// (CallTool).
	if !mcp.IsModernProtocol(inf.ProtocolVersion) && msg.Method != "tools/call" {
		resp, resumed = c.resumeParked(ctx, msg, r.Params)
	}
	if !resumed {
		msg.Params = params // as forwarded
		if len(r.Params) == 0 {
			msg.Params = nil
		}
		resp = c.dispatch(ctx, fwd, msg)
	}
	if resp == nil {
		return out.err()
	}
	return out.modern(mcpera.DecorateResponse(msg.Method, resp, inf.ServerInfo))
}

// listenModern serves subscriptions/listen: the notifications the client asked for that the
// upstream declares, of the upstream alone (ServeSubscription).
func (h *Handler) listenModern(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, id json.RawMessage, r mcpera.Request, caps, serverInfo map[string]any, out *output) error {
	return h.ServeSubscription(ctx, Subscription{Out: out, Sub: r.Subscribe(id, caps), Hub: h.hub,
		Servers: []string{cfg.GetId()}, Every: h.listenCheck, ServerInfo: serverInfo})
}
