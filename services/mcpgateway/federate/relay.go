package federate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Relaying a server's requests (sampling/createMessage, elicitation/create, roots/list) to the
// MCP client whose call caused them. The session remembers which of them its client accepts
// (the capabilities it declared in initialize, in the signed session id); a forwarded request
// passes them down, and the upstream path (the tool host for stdio, this replica for HTTP)
// attributes the server's requests to calls. A relayed request reaches the client on the
// POST's SSE stream, before the answer, under an id mcpgateway signs for this session and
// server; the client's response, POSTed to any replica, is checked against the session and
// handed back with upstream's Answer.

// relaysOf reads the client capabilities of an initialize request as session.Claims.Relays.
func relaysOf(payload []byte) string {
	var p struct {
		Params struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	var out strings.Builder
	for _, k := range []struct{ name, flag string }{{"sampling", "s"}, {"elicitation", "e"}, {"roots", "r"}} {
		if v, ok := p.Params.Capabilities[k.name]; ok && len(v) > 0 && v[0] == '{' {
			out.WriteString(k.flag)
		}
	}
	return out.String()
}

// relays are the server requests the session's client accepts.
func relays(cl session.Claims) upstream.Relays {
	return upstream.Relays{Sampling: strings.Contains(cl.Relays, "s"), Elicitation: strings.Contains(cl.Relays, "e"), Roots: strings.Contains(cl.Relays, "r")}
}

// hooks are what a forwarded request takes from the server during the call: its progress,
// when it asked for it, and the server's requests its client accepts. OnRequest is always
// set: the call is made for an MCP client (see upstream's answerServerRequest). A session's
// call bridges the eras (Bridge): an upstream of 2026-07-28 asks for input with
// input_required results, whose requests reach the client as a session-era server's would.
// A modern client's call (no session) gets such a result as it is and answers it itself.
// A modern client's call to a stdio server parks instead (bridge.go). A session's client gets
// the server's notifications on its GET streams (Notify): the answer waits for those the
// server wrote before it (Ordered). A modern client has no GET stream: its answer never waits.
func (c *call) hooks(params json.RawMessage) upstream.Hooks {
	h := upstream.Hooks{Relays: relays(c.claims), OnRequest: c.relay, Bridge: c.sessionID != "", Ordered: c.sessionID != ""}
	if c.parks() {
		h.Relays, h.Park = c.modernRelays, ParkWindow
	}
	if hasProgressToken(params) {
		h.OnProgress = c.out.note
	}
	return h
}

// relay sends a server's request to the client on the call's stream, under a signed id.
func (c *call) relay(req upstream.ServerRequest) {
	msg := map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": c.h.sessions.SignRelay(c.sessionID, c.cfg.GetId(), req.Ref), "method": req.Method}
	if p := req.Params; len(p) > 0 && string(p) != "null" {
		msg["params"] = p
	}
	b, err := json.Marshal(msg)
	if err != nil {
		c.h.log.Warn("a server request could not be relayed", "server", c.cfg.GetId(), "method", req.Method, "err", err)
		return
	}
	c.out.note(b)
}

// clientAnswer takes a response the client POSTed: the answer to a relayed request goes to
// the server that asked; a response to anything else is accepted and dropped. nil is HTTP 202;
// an error response is a 400 that says why the answer was not taken.
func (c *call) clientAnswer(ctx context.Context, payload []byte, msg jsonrpc.Message) []byte {
	var id string
	if json.Unmarshal(msg.ID, &id) != nil || !strings.HasPrefix(id, session.RelayPrefix) {
		return nil
	}
	ref, err := c.h.sessions.OpenRelay(id, c.sessionID, c.cfg.GetId())
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: this response answers no request sent to this session (its id was not issued for it)")
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(payload, &r) != nil || (r.Error == nil) == (len(r.Result) == 0) {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: a response carries exactly one of result and error")
	}
	if approvalID, ok := strings.CutPrefix(ref, approvalRef); ok { // Zest's own elicitation (approval.go)
		errMsg := ""
		if r.Error != nil {
			errMsg = r.Error.Message
		}
		return c.answerApproval(ctx, approvalID, msg, r.Result, errMsg)
	}
	var rpcErr *upstream.RPCError
	if r.Error != nil {
		rpcErr = &upstream.RPCError{Code: r.Error.Code, Message: r.Error.Message, Data: r.Error.Data}
	}
	err = c.h.up.Answer(ctx, ref, r.Result, rpcErr)
	switch {
	case errors.Is(err, upstream.ErrRelayUnknown):
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: "+err.Error())
	case err != nil:
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, c.h.failure(ctx, c.cfg.GetId(), "answering a request of", err))
	}
	return nil
}
