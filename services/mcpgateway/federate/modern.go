package federate

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/stateless"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// modern answers one request of protocol 2026-07-28 to /mcp/servers/{id}: no session, the
// request stands alone. server/discover is answered with what the upstream's own handshake
// (or discovery) said; subscriptions/listen streams the upstream's list_changed
// notifications the client asked for; everything else goes to the upstream through the same
// path as a session's requests (capabilities, tool filters, progress), in the upstream's own
// era: a session-era upstream is sent the request without the revision's _meta members, and
// its result gets what 2026-07-28 asks of a result (stateless.Decorate).
func (h *Handler) modern(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, r stateless.Request, cfg *mcpgatewayv1.ServerConfig, out *output) error {
	payload := req.GetPayload()
	msg, code, problem := mcpserve.CheckMessage(payload)
	if problem != "" {
		return out.send(stateless.Final(mcpserve.ErrorResponse(msg.ID, code, problem)))
	}
	if msg.Method == "" {
		return out.send(stateless.Final(mcpserve.ErrorResponse(msg.ID, mcp.INVALID_REQUEST,
			"Invalid Request: in protocol 2026-07-28 a server sends no requests, so a client posts no responses; answer an input_required result by sending the request again with its inputResponses")))
	}
	if msg.JSONRPC != mcp.JSONRPC_VERSION {
		return out.send(stateless.Final(mcpserve.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)))
	}
	if bad := r.Check(req, msg.ID, msg.Method, mcpserve.Supported); bad != nil {
		return out.send(stateless.Final(bad))
	}
	if !msg.IsRequest() {
		// A notification (notifications/cancelled): accepted. A modern request has no session
		// to name it by, so cancelling one is not supported yet; the client stops waiting.
		return nil
	}
	if slices.Contains(stateless.Removed, msg.Method) {
		return out.send(stateless.Final(mcpserve.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND,
			"Method not found: "+msg.Method+" was removed in protocol 2026-07-28")))
	}
	inf, err := h.up.Info(ctx, cfg)
	if err != nil {
		return out.send(stateless.Final(mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, cfg.GetId(), "connecting", err))))
	}
	switch msg.Method {
	case "server/discover":
		res := map[string]any{"supportedVersions": mcpserve.Supported, "capabilities": orEmpty(inf.Capabilities)}
		if inf.Instructions != "" {
			res["instructions"] = inf.Instructions
		}
		b, err := json.Marshal(res)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return out.send(stateless.Final(mcpserve.Result(msg.ID, stateless.Decorate(msg.Method, b, orEmpty(inf.ServerInfo)))))
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
			if bad := r.CheckParamHeaders(req, msg.ID, stateless.Tool(tools, p.Name)); bad != nil {
				return out.send(stateless.Final(bad))
			}
		}
	}
	// The request as the upstream's era wants it: a server of 2026-07-28 gets the client's
	// _meta (its capabilities decide what the server may ask of it); a session-era server
	// gets none of the revision's members, which would make it read the request as modern.
	params := r.Params
	if !mcp.IsModernProtocol(inf.ProtocolVersion) {
		params = stateless.StripMeta(params)
	}
	fwd, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "method": msg.Method, "params": params})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if len(r.Params) == 0 {
		fwd, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "method": msg.Method})
	}
	c := &call{h: h, cfg: cfg, out: out, modern: true, modernRelays: relaysOfMeta(r.Params)}
	var resp []byte
	resumed := false
	if !mcp.IsModernProtocol(inf.ProtocolVersion) { // a modern upstream's rounds are its client's
		resp, resumed = c.resumeParked(ctx, msg, r.Params)
	}
	if !resumed {
		resp = c.dispatch(ctx, fwd, msg)
	}
	if resp == nil {
		return out.err()
	}
	return out.send(stateless.Final(decorateResponse(msg.Method, resp, inf.ServerInfo)))
}

// decorateResponse applies stateless.Decorate to the result of a JSON-RPC response; an error
// response is returned as it is.
func decorateResponse(method string, resp []byte, serverInfo map[string]any) []byte {
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(resp, &r) != nil || len(r.Result) == 0 {
		return resp
	}
	var info any
	if serverInfo != nil {
		info = serverInfo
	}
	return mcpserve.Result(r.ID, stateless.Decorate(method, r.Result, info))
}

// listenModern serves subscriptions/listen: it acknowledges the notification types both the
// client asked for and the upstream declares (tools, prompts and resources list_changed;
// resource subscriptions are not offered: the upstream's subscriptions are shared by every
// client), then streams the upstream's notifications of those types, tagged with the
// subscription id, until the client goes away. Nothing was asked for (or can be given): the
// acknowledgement and the result come at once.
func (h *Handler) listenModern(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, id json.RawMessage, r stateless.Request, caps, serverInfo map[string]any, out *output) error {
	var p struct {
		Notifications struct {
			ToolsListChanged     bool `json:"toolsListChanged"`
			PromptsListChanged   bool `json:"promptsListChanged"`
			ResourcesListChanged bool `json:"resourcesListChanged"`
		} `json:"notifications"`
	}
	_ = json.Unmarshal(r.Params, &p)
	listChanged := func(kind string) bool {
		m, _ := caps[kind].(map[string]any)
		v, _ := m["listChanged"].(bool)
		return v
	}
	allowed := map[string]bool{}
	filter := map[string]any{}
	for _, k := range []struct {
		asked      bool
		kind, flag string
	}{
		{p.Notifications.ToolsListChanged, "tools", "toolsListChanged"},
		{p.Notifications.PromptsListChanged, "prompts", "promptsListChanged"},
		{p.Notifications.ResourcesListChanged, "resources", "resourcesListChanged"},
	} {
		if k.asked && listChanged(k.kind) {
			allowed["notifications/"+k.kind+"/list_changed"] = true
			filter[k.flag] = true
		}
	}
	tag := map[string]any{mcp.MetaKeySubscriptionID: id}
	ack, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcp.MethodNotificationSubscriptionsAcknowledged,
		"params": map[string]any{"_meta": tag, "notifications": filter}})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	var l *fanout.Listener
	if len(allowed) > 0 {
		l = fanout.NewListener()
		h.hub.Follow(l, []string{cfg.GetId()})
		defer h.hub.Follow(l, nil)
	}
	if err := out.send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: ack}}); err != nil {
		return err
	}
	for l != nil {
		select {
		case <-ctx.Done():
			l = nil
		case msg := <-l.C():
			var n map[string]json.RawMessage
			var method string
			if json.Unmarshal(msg, &n) != nil || json.Unmarshal(n["method"], &method) != nil || !allowed[method] {
				continue
			}
			n["params"], _ = json.Marshal(map[string]any{"_meta": tag})
			b, err := json.Marshal(n)
			if err != nil {
				continue
			}
			if err := out.send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: b}}); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return nil // the client went away: nobody reads the result
	}
	res, _ := json.Marshal(map[string]any{"_meta": tag})
	var info any
	if serverInfo != nil {
		info = serverInfo
	}
	return out.send(stateless.Final(mcpserve.Result(id, stateless.Decorate("subscriptions/listen", res, info))))
}
