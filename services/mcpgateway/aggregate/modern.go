package aggregate

import (
	"context"
	"encoding/json"

	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// modern answers one request of protocol 2026-07-28 to a preset's endpoint: no session, the
// request stands alone, with the checks every endpoint applies (mcpera.Admit).
// server/discover describes the preset as initialize does (the union of the providers'
// capabilities, Zest's serverInfo); subscriptions/listen streams the providers' list_changed
// notifications; every other request goes through the session era's dispatch (names,
// routing, pages), each provider in its own era (call.forward), and its result gets what the
// revision asks of a result, the preset's serverInfo in place of a provider's
// (mcpera.DecorateAs).
//
// A session-era provider's requests for the client (sampling, elicitation, roots, as its _meta
// clientCapabilities accept them) end the request with an input_required result, as on
// /mcp/servers/{id}; the retry, routed as any request, resumes the parked call when the
// requestState Zest signed names the provider it reaches (call.forward).
func (h *Handler) modern(ctx context.Context, ep endpoint, req *mcphttp.Request, r mcpera.Request, provs []provider, out *federate.Output) error {
	msg, bad := mcpera.Admit(req, r)
	if bad != nil {
		return out.Modern(bad)
	}
	if !msg.IsRequest() {
		return nil // a notification (notifications/cancelled): accepted
	}
	info := serverInfo(ep)
	switch msg.Method {
	case "server/discover":
		caps, instr := h.describe(ctx, ep, provs)
		if r, ok := caps["resources"].(map[string]any); ok {
			// In 2026-07-28 subscribe means resource subscriptions through
			// subscriptions/listen, which no endpoint of mcpgateway grants.
			delete(r, "subscribe")
		}
		answer, err := mcpera.Discover(msg.ID, caps, instr, info)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return out.Modern(answer)
	case "subscriptions/listen":
		return h.listenModern(ctx, ep, provs, msg.ID, r, out)
	}
	c := &call{h: h, ep: ep, provs: provs, out: out, modern: &r, req: req}
	resp := c.dispatch(ctx, req.Body, msg)
	if resp == nil {
		return out.Err()
	}
	// One identity per endpoint: a provider's own serverInfo (a modern provider's, or mcp-go's
	// of the built-in tools) gives way to the preset's.
	return out.Modern(mcpera.DecorateResponseAs(msg.Method, resp, info))
}

// listenModern serves subscriptions/listen: the list_changed notifications the client asked
// for that the preset declares (the union of its providers', as server/discover gives it), of
// every provider (federate.ServeSubscription); when the preset's providers or its shaping of
// the tools change, the granted list_changed follow too (the lists changed), as on a
// session's GET stream (reread).
func (h *Handler) listenModern(ctx context.Context, ep endpoint, provs []provider, id json.RawMessage, r mcpera.Request, out *federate.Output) error {
	caps, _ := h.describe(ctx, ep, provs)
	wake, stop := h.bell.Listen()
	defer stop()
	ids := servers(provs)
	return h.fed.ServeSubscription(ctx, federate.Subscription{Out: out, Sub: r.Subscribe(id, caps), Hub: h.hub,
		Servers: ids, Every: h.listenCheck, Wake: wake, ServerInfo: serverInfo(ep),
		More: func() ([]string, bool) {
			changed := h.reread(ctx, ep, &provs, &ids)
			return ids, changed
		}})
}

// modernParams are the params a provider of protocolVersion gets of the client's request:
// as they came for a session's request, as its era wants them for a modern one
// (mcpera.ParamsFor).
func (c *call) modernParams(protocolVersion string, params json.RawMessage) json.RawMessage {
	if c.modern == nil {
		return params
	}
	return mcpera.ParamsFor(protocolVersion, params)
}

// checkParamHeaders checks the Mcp-Param-* headers of a modern tools/call against the
// x-mcp-header annotations of the provider's tool (orig, its own name; listed, cached): the
// answer to send when they do not mirror the arguments, else nil.
func (c *call) checkParamHeaders(ctx context.Context, pr provider, orig string, id json.RawMessage) []byte {
	if c.modern == nil {
		return nil
	}
	tools, err := c.h.up.ListTools(ctx, pr.cfg, false)
	if err != nil {
		return nil // the call itself will say what is wrong with the provider
	}
	return c.modern.CheckParamHeaders(c.req.Header, id, mcpera.Tool(tools, orig))
}
